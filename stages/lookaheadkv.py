"""Glue between the paperdag engine and the lookaheadkv method: synthesize -> train_lm (with its targets) ->
train_lookahead -> infer -> evaluate. The eviction rules, the lookahead module, s_GT and the comparison protocol live in
paperdag.methods.lookaheadkv, the tiny LM's lifecycle in paperdag.lm: these functions read inputs and call them."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import polars as pl
from pydantic import Field, NonNegativeFloat, NonNegativeInt, PositiveFloat, PositiveInt

from paperdag.engine import Item
from paperdag.engine.params import Fraction, PositiveFraction
from paperdag.lm import TinyLMConfig
from paperdag.methods.lookaheadkv import Kind, TaskSizes, encode, make_rows, question_tokens

# torch and the code that needs it are imported inside the stage functions: importing this module stays cheap
# (tests/engine/test_imports.py).

@dataclass(frozen=True)
class SynthesizeParams:
    keys: PositiveInt
    values: PositiveInt
    fillers: PositiveInt
    pairs: PositiveInt
    asked: PositiveInt  # records a question asks for, at most `pairs` (the response recalls them in the question's order)
    min_train_pairs: Annotated[int, Field(ge=2)]  # at most `pairs`
    value_tokens: PositiveInt
    prompt_tokens: PositiveInt  # T of the lookahead, validation and evaluation prompts (bos and question included)
    train_contexts: Annotated[list[PositiveInt], Field(min_length=1)]  # context lengths (tokens) of the LM's training rows
    lm_examples: PositiveInt
    drill_examples: NonNegativeInt
    drill_queries: PositiveInt
    copy_examples: NonNegativeInt  # copy drills: copy_tokens random symbols, then a random copy_stretch of them again
    copy_tokens: PositiveInt
    copy_stretch: PositiveInt
    lookahead_examples: PositiveInt
    validation_examples: PositiveInt
    eval_examples: PositiveInt
    seed: int

    def __post_init__(self) -> None:
        if self.asked > self.pairs:
            raise ValueError("asked", f"must lie in [1, pairs = {self.pairs}]; got {self.asked}")
        if self.min_train_pairs > self.pairs:
            raise ValueError("min_train_pairs", f"must lie in [2, pairs = {self.pairs}]; got {self.min_train_pairs}")
        if self.copy_stretch >= self.copy_tokens:
            raise ValueError("copy_stretch", f"must be below copy_tokens = {self.copy_tokens}; got {self.copy_stretch}")
        if max(self.train_contexts) > self.context_tokens:
            raise ValueError("train_contexts", "must not exceed the evaluation context, prompt_tokens - "
                                               f"{1 + question_tokens(self.asked)} = "
                                               f"{self.context_tokens}; got {self.train_contexts}")

    @property
    def context_tokens(self) -> int:
        return self.prompt_tokens - 1 - question_tokens(self.asked)  # bos and `? ka kb .. :`


def synthesize(params: SynthesizeParams) -> dict[str, object]:
    """Every example of every set (methods.lookaheadkv.data.make_rows), with a row id."""
    p = params
    sizes = TaskSizes(p.keys, p.values, p.fillers, p.pairs, p.value_tokens, p.context_tokens, p.asked)
    rows = make_rows(sizes, p.min_train_pairs, p.train_contexts, p.lm_examples, p.drill_examples, p.drill_queries,
                     p.lookahead_examples, p.validation_examples, p.eval_examples, random.Random(p.seed), p.copy_examples,
                     p.copy_tokens, p.copy_stretch)
    return {"examples": pl.DataFrame(rows).with_row_index("row")}


@dataclass(frozen=True)
class CurriculumPhase:
    steps: PositiveInt  # optimiser steps of the phase (its own warm-up and linear decay)
    contexts: PositiveInt  # task rows with contexts of at most this many tokens (copy drills: any)
    mixture: dict[Kind, NonNegativeFloat]  # share of the phase's batches per row kind
    batch_size: PositiveInt | None = None  # rows per step (None: train_lm.batch_size)
    lr: PositiveFloat | None = None  # peak learning rate of the phase (None: train_lm.lr)
    until_em: Annotated[float, Field(ge=0, le=100)] | None = None  # repeat the phase until the validation rows' full-cache exact match reaches this on every split (percent) ...
    max_rounds: PositiveInt = 1  # ... at most this many rounds in all (a fresh seed per round)


@dataclass(frozen=True)
class TrainLMParams(TinyLMConfig):
    curriculum: Annotated[list[CurriculumPhase], Field(min_length=1)]  # the phases, in order
    min_full_cache_em: Annotated[float, Field(ge=0, le=100)]  # the check: every split's full-cache exact match (percent)
    targets_batch_size: PositiveInt  # rows per forward pass of the targets (greedy responses, s_GT)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.steps != sum(p.steps for p in self.curriculum):
            raise ValueError("steps", f"must be the curriculum's steps in all, {sum(p.steps for p in self.curriculum)}; got {self.steps}")
        if not all(any(w > 0 for w in p.mixture.values()) for p in self.curriculum):
            raise ValueError("curriculum", "every phase's mixture needs a positive weight")


def train_lm(params: TrainLMParams, examples: pl.DataFrame) -> dict[str, object]:
    """One replicate's tiny Llama (word-level tokenizer; or model_path's checkpoint) trained with a full cache on the LM
    rows, in curriculum phases (methods.lookaheadkv.train_curriculum): copy drills, recall drills, then the splits
    with more and more filler; its full-cache exact match on the evaluation
    rows, which must reach min_full_cache_em on every split (else the comparison of evictions means nothing). Then
    the frozen LM's targets for the lookahead-training, validation and evaluation rows: its greedy response and s_GT
    (layers, heads, prompt positions; methods.lookaheadkv.scores.ground_truth_importance)."""
    from paperdag.lm import checkpoint_writer, lm_stats
    from paperdag.methods.lookaheadkv import build_lm, checked_full_cache_exact_match, train_curriculum
    from paperdag.methods.lookaheadkv import targets as make_targets

    start = time.perf_counter()
    words = {w for text in examples["prompt"].to_list() + examples["response"].to_list() for w in text.split()}
    longest = max(len(p.split()) + len(r.split()) for p, r in zip(examples["prompt"], examples["response"], strict=True))
    model, tokenizer = build_lm(params, words, max_positions=max(256, longest + 64))  # + bos, eos and room to decode
    history, rounds = train_curriculum(model, tokenizer, examples.filter(pl.col("set") == "lm"), params.curriculum, params,
                                       validation=examples.filter(pl.col("set") == "validation"))
    train_seconds = time.perf_counter() - start
    em = checked_full_cache_exact_match(model, tokenizer, examples.filter(pl.col("set") == "eval"), params.min_full_cache_em,
                                        f"lookaheadkv train_lm (seed {params.seed})")
    stats = {"full_cache_exact_match": em, "rounds": rounds, "steps_trained": len(history),
             **lm_stats(model, tokenizer, params, history, train_seconds)}
    table = examples.filter(pl.col("set").is_in(["lookahead", "validation", "eval"]))
    longest = max(len(encode(tokenizer, r)[1]) for r in table.iter_rows(named=True))
    targets, importance = make_targets(model, tokenizer, table, longest + 1, params.targets_batch_size)
    return {"model": checkpoint_writer(model, tokenizer), "train_stats": stats, "targets": targets, "importance": importance}


@dataclass(frozen=True)
class TrainLookaheadParams:
    n_tokens: PositiveInt
    rank: PositiveInt
    alpha: PositiveFloat
    steps: PositiveInt
    batch_size: PositiveInt
    lr: PositiveFloat
    warmup_steps: NonNegativeInt
    threads: PositiveInt
    seed: int


def train_lookahead(params: TrainLookaheadParams, model: Path, targets: pl.DataFrame, importance: dict) -> dict[str, object]:
    """Lookahead embeddings P and the masked LoRA, trained with the LM frozen to minimise KL(s_GT || s_LKV) averaged
    over layers and heads; the held-out KL on the evaluation rows before and after training."""
    import torch

    from paperdag.lm import TrainConfig, load_causal_lm
    from paperdag.methods.lookaheadkv import LookaheadKV, attach, fit_lookahead

    torch.set_num_threads(params.threads)
    lm, _ = load_causal_lm(model)
    torch.manual_seed(params.seed)
    module = LookaheadKV.for_model(lm, params.n_tokens, params.rank, params.alpha)
    attach(lm, module)
    rows, held_out = (list(targets.filter(pl.col("set") == name).iter_rows(named=True)) for name in ("lookahead", "eval"))
    config = TrainConfig(steps=params.steps, lr=params.lr, warmup_steps=params.warmup_steps, weight_decay=0.0, seed=params.seed)
    stats = fit_lookahead(lm, module, rows, held_out, importance, config, params.batch_size)
    return {"lookahead": module.save, "lookahead_stats": stats}


@dataclass(frozen=True)
class InferParams:
    budgets: Annotated[list[PositiveFraction], Field(min_length=1)]  # per-head budgets C as fractions of the prompt length T
    recent: NonNegativeInt
    sinks: NonNegativeInt
    h2o_recent: Fraction
    windows: Annotated[list[PositiveInt], Field(min_length=1)]  # SnapKV's tuning sweep: observation windows w ...
    kernels: Annotated[list[PositiveInt], Field(min_length=1)]  # ... and pooling kernels
    pooling: Literal["avgpool", "maxpool"]
    draft_tokens: PositiveInt
    max_new_tokens: PositiveInt
    batch_size: PositiveInt
    timing_repeats: PositiveInt
    timing_rows: PositiveInt  # rows of each batch whose eviction is timed, one request at a time (batch 1: latency)
    threads: PositiveInt


def infer(params: InferParams, model: Path, lookahead: Path, targets: pl.DataFrame, importance: dict) -> dict[str, object]:
    """One replicate: SnapKV's window and kernel tuned per budget on the validation rows, then every method at every
    per-head budget on the evaluation rows (methods.lookaheadkv.compare): exact match, overlap of the kept positions
    with the oracle's, each method's time to the evicted cache per budget (C < T)."""
    import torch

    from paperdag.lm import load_causal_lm
    from paperdag.methods.lookaheadkv import LookaheadKV, Setting, attach, tuned_comparison

    torch.set_num_threads(params.threads)
    lm, tokenizer = load_causal_lm(model)
    module = LookaheadKV.load(lookahead)
    attach(lm, module)
    p = params
    setting = Setting(recent=p.recent, sinks=p.sinks, h2o_recent=p.h2o_recent, pooling=p.pooling, draft_tokens=p.draft_tokens,
                      lookahead=module)
    predictions, stats = tuned_comparison(lm, tokenizer, setting, targets, importance, p.budgets, p.windows, p.kernels,
                                          p.max_new_tokens, p.batch_size, p.timing_repeats, p.timing_rows)
    return {"predictions": predictions, "eviction_stats": {**stats, "threads": p.threads}}


@dataclass(frozen=True)
class EvaluateParams:
    small_budgets: PositiveInt  # the claims' "small budgets": this many of the smallest budgets


def evaluate(params: EvaluateParams, train_stats: dict[Item, dict], lookahead_stats: dict[Item, dict],
             predictions: dict[Item, pl.DataFrame], eviction_stats: dict[Item, dict]) -> dict[str, object]:
    """Per replicate: exact match per split, budget and method, overlap with the oracle's kept set, eviction cost
    per budget; over replicates the headline (paired intervals of LookaheadKV - tuned SnapKV, intervals of the cost
    ratios: what pipelines/lookaheadkv.yaml's claims read) and the accuracy-vs-budget plot of the means."""
    from paperdag.methods.lookaheadkv import accuracy_vs_budget, over_replicates

    metrics = over_replicates(train_stats, lookahead_stats, predictions, eviction_stats, params.small_budgets)
    return {"metrics": metrics, "accuracy_vs_budget": accuracy_vs_budget(metrics["headline"]["exact_match_mean"])}

"""Glue between the paperdag engine and the lookaheadkv method: synthesize -> train_lm -> targets -> train_lookahead
-> infer -> evaluate. The eviction rules, the lookahead module, s_GT and the comparison protocol live in
paperdag.methods.lookaheadkv, the tiny LM's lifecycle in paperdag.lm: these functions read inputs and call them."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import polars as pl
from pydantic import Field, NonNegativeFloat, NonNegativeInt, PositiveFloat, PositiveInt

from paperdag.lm import TinyLMConfig
from paperdag.methods.lookaheadkv import (Kind, accuracy_vs_budget, encode, exact_match_table, headline, make_rows,
                                          vocabulary_text)

# torch and the code that needs it are imported inside the stage functions: importing this module stays cheap
# (tests/engine/test_imports.py).

# ---------------------------------------------------------------- synthesize


@dataclass(frozen=True)
class SynthesizeParams:
    keys: PositiveInt
    values: PositiveInt
    pairs: PositiveInt
    min_train_pairs: Annotated[int, Field(ge=2)]  # at most `pairs`
    lm_examples: PositiveInt
    drill_examples: NonNegativeInt
    drill_queries: PositiveInt
    lookahead_examples: PositiveInt
    eval_examples: PositiveInt
    seed: int

    def __post_init__(self) -> None:
        if self.min_train_pairs > self.pairs:
            raise ValueError("min_train_pairs", f"must lie in [2, pairs = {self.pairs}]; got {self.min_train_pairs}")


def synthesize(params: SynthesizeParams) -> dict[str, object]:
    """Every example of every set (methods.lookaheadkv.data.make_rows), with a row id."""
    p = params
    rows = make_rows(p.keys, p.values, p.pairs, p.min_train_pairs, p.lm_examples, p.drill_examples, p.drill_queries,
                     p.lookahead_examples, p.eval_examples, random.Random(p.seed))
    return {"examples": pl.DataFrame(rows).with_row_index("row")}


# ---------------------------------------------------------------- train_lm


@dataclass(frozen=True)
class TrainLMParams(TinyLMConfig):
    curriculum: Annotated[list[PositiveInt], Field(min_length=1)]  # per phase, its largest context (pairs)
    mixture: dict[Kind, NonNegativeFloat]


def train_lm(params: TrainLMParams, examples: pl.DataFrame) -> dict[str, object]:
    """A tiny Llama (or model_path's checkpoint) trained with a full cache on the LM rows, in curriculum phases of
    growing context size (methods.lookaheadkv.train_curriculum); its full-cache exact match on the evaluation rows."""
    from paperdag.lm import build_or_load, checkpoint_writer, lm_stats
    from paperdag.methods.lookaheadkv import full_cache_exact_match, train_curriculum

    start = time.perf_counter()
    texts = vocabulary_text(examples["prompt"].to_list() + examples["response"].to_list())
    model, tokenizer = build_or_load(params, texts, add_bos=True, model_max_length=4096, max_positions=lambda tok: max(
        256, max(len(p) + len(r) for p, r in (encode(tok, row) for row in examples.iter_rows(named=True))) + 64))
    history = train_curriculum(model, tokenizer, examples.filter(pl.col("set") == "lm"), params.curriculum, params.mixture, params)
    train_seconds = time.perf_counter() - start
    stats = {"full_cache_exact_match": full_cache_exact_match(model, tokenizer, examples.filter(pl.col("set") == "eval")),
             **lm_stats(model, tokenizer, params, history, train_seconds)}
    return {"model": checkpoint_writer(model, tokenizer), "train_stats": stats}


# ---------------------------------------------------------------- targets


@dataclass(frozen=True)
class TargetsParams:
    max_new_tokens: PositiveInt
    batch_size: PositiveInt
    threads: PositiveInt


def targets(params: TargetsParams, model: Path, examples: pl.DataFrame) -> dict[str, object]:
    """For the lookahead-training and evaluation rows: the frozen model's greedy response (full cache) and s_GT
    (layers, heads, prompt positions; methods.lookaheadkv.scores.ground_truth_importance)."""
    import torch

    from paperdag.lm import load_causal_lm
    from paperdag.methods.lookaheadkv import targets as make_targets

    torch.set_num_threads(params.threads)
    lm, tokenizer = load_causal_lm(model, attn_implementation="eager")
    table = examples.filter(pl.col("set").is_in(["lookahead", "eval"]))
    out, importance = make_targets(lm, tokenizer, table, params.max_new_tokens, params.batch_size)
    return {"targets": out, "importance": importance}


# ---------------------------------------------------------------- train_lookahead


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
    lm, _ = load_causal_lm(model, attn_implementation="eager")
    torch.manual_seed(params.seed)
    module = LookaheadKV.for_model(lm, params.n_tokens, params.rank, params.alpha)
    attach(lm, module)
    rows, held_out = (list(targets.filter(pl.col("set") == name).iter_rows(named=True)) for name in ("lookahead", "eval"))
    config = TrainConfig(steps=params.steps, lr=params.lr, warmup_steps=params.warmup_steps, weight_decay=0.0, seed=params.seed)
    stats = fit_lookahead(lm, module, rows, held_out, importance, config, params.batch_size)
    return {"lookahead": module.save, "lookahead_stats": stats}


# ---------------------------------------------------------------- infer


@dataclass(frozen=True)
class InferParams:
    budgets: Annotated[list[PositiveInt], Field(min_length=1)]  # per-head token budgets C
    recent: NonNegativeInt
    sinks: NonNegativeInt
    window: PositiveInt
    kernel: PositiveInt
    draft_tokens: PositiveInt
    max_new_tokens: PositiveInt
    batch_size: PositiveInt
    threads: PositiveInt


def infer(params: InferParams, model: Path, lookahead: Path, targets: pl.DataFrame, importance: dict) -> dict[str, object]:
    """Every method at every per-head budget on the evaluation rows, in one run (methods.lookaheadkv.compare): exact
    match, overlap of the kept positions with the oracle's, the wall time of building each evicted cache."""
    import torch

    from paperdag.lm import load_causal_lm
    from paperdag.methods.lookaheadkv import LookaheadKV, Setting, attach, compare

    torch.set_num_threads(params.threads)
    lm, tokenizer = load_causal_lm(model, attn_implementation="eager")
    module = LookaheadKV.load(lookahead)
    attach(lm, module)
    setting = Setting(recent=params.recent, sinks=params.sinks, window=params.window, kernel=params.kernel,
                      draft_tokens=params.draft_tokens, lookahead=module)
    predictions, timing = compare(lm, tokenizer, setting, targets.filter(pl.col("set") == "eval"), importance, params.budgets,
                                  params.max_new_tokens, params.batch_size)
    return {"predictions": predictions, "eviction_stats": {"runs": timing, "threads": params.threads}}


# ---------------------------------------------------------------- evaluate


@dataclass(frozen=True)
class EvaluateParams:
    small_budgets: PositiveInt  # the claims' "small budgets": this many of the smallest budgets


def evaluate(params: EvaluateParams, train_stats: dict, lookahead_stats: dict, predictions: pl.DataFrame,
             eviction_stats: dict) -> dict[str, object]:
    """Exact match per split, budget and method; overlap with the oracle's kept set; eviction cost per method from
    the same infer run; the headline (the numbers pipelines/lookaheadkv.yaml's claims read) and the accuracy-vs-budget plot."""
    table = exact_match_table(predictions)
    metrics = {"headline": headline(table, eviction_stats["runs"], params.small_budgets, lookahead_stats),
               "table": list(table.iter_rows(named=True)), "lm": {k: v for k, v in train_stats.items() if k != "loss"}}
    return {"metrics": metrics, "accuracy_vs_budget": accuracy_vs_budget(table)}

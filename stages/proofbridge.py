"""Glue between the paperdag engine and the proofbridge method: synthesize -> train_embed (x replicate) -> train_gen
(x replicate) -> repair (x replicate) -> evaluate. The formal language and its checker, the z3 judge, the world, the
joint embedding, the protocol (retrieval, the generator and its check, the arms' repair chains), the metrics and
figures live in paperdag.methods.proofbridge; the tiny LM in paperdag.lm; MiniLM in paperdag.retrieval."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import polars as pl
from pydantic import Field, NonNegativeFloat, NonNegativeInt, PositiveFloat, PositiveInt

from paperdag.engine import Item
from paperdag.lm import TinyLMConfig
from paperdag.methods.proofbridge import (assign_families, check_world, generation_scores, headline, joint_retrieval, make_split,
                                          pass_figure, recall_figure, repair_arms, retrieval_scores, theorems_table, train_generator)

Unit = Annotated[float, Field(ge=0, le=1)]

# torch, transformers, z3 and the encoder are imported inside the stage functions: importing this module stays cheap.


@dataclass(frozen=True)
class SynthesizeParams:
    per_family: dict[str, PositiveInt]  # theorems per family of each split: train, val, test
    test_families: list[str]  # held-out families (skeleton:direction), never trained on
    val_families: list[str]  # validation families: learnability check, temperature and frozen-view tuning
    seed: int


def synthesize(params: SynthesizeParams) -> dict[str, object]:
    """Theorems of every family with formal statement, proof, proof states and NL, split by family; counts met or raise."""
    families = assign_families(params.test_families, params.val_families)
    table = theorems_table(make_split(families, params.per_family, random.Random(params.seed)))
    check_world(table, params.per_family, families, "synthesize")
    return {"theorems": table}


@dataclass(frozen=True)
class TrainEmbedParams:
    encoder: str  # NL encoder (packaged MiniLM or a local sentence-transformers directory)
    nl_top_layers: PositiveInt  # MiniLM layers that train (the rest frozen)
    formal_hidden: PositiveInt  # byte-level formal encoder width
    formal_layers: PositiveInt
    formal_heads: PositiveInt
    formal_top_layers: PositiveInt  # formal encoder layers that train in the joint phase
    max_bytes: PositiveInt  # formal text cut (bytes)
    mlm_steps: PositiveInt  # masked-byte pretraining of the formal encoder on training theorems
    mlm_batch: PositiveInt
    mlm_lr: PositiveFloat
    steps: PositiveInt  # InfoNCE steps
    batch: PositiveInt  # pairs per step (in-batch negatives)
    lr: PositiveFloat
    tau: PositiveFloat  # InfoNCE temperature (paper: 0.07)
    proj_hidden: PositiveInt
    proj_dim: PositiveInt
    dropout: Unit
    context_k: PositiveInt  # retrieved examples per theorem for generation (paper: 5)
    threads: PositiveInt
    item: Item
    seed: int


def train_embed(params: TrainEmbedParams, theorems: pl.DataFrame) -> dict[str, object]:
    """The joint embedding trained on the training theorems; gold ranks of the joint embedding and of frozen MiniLM
    (its formal view chosen on val) for the val and test queries among their split's theorems; the top-k training
    theorems retrieved for every theorem (a training theorem: from other families only)."""
    import torch

    from paperdag.retrieval import encode, load_encoder

    torch.set_num_threads(params.threads)
    torch.manual_seed(params.seed)
    return joint_retrieval(theorems, load_encoder(params.encoder), lambda st, texts: encode(st, texts, progress=False), params)


@dataclass(frozen=True)
class TrainGenParams(TinyLMConfig):
    mixture: dict[str, NonNegativeFloat]  # share of steps per prompt kind (gen.ARMS)
    near_misses: PositiveInt  # corrupted attempts per training theorem (repair pools)
    max_new_tokens: PositiveInt
    holdout_per_family: PositiveInt  # training theorems per training family kept out of the generator's training: the learnability check
    min_holdout_type_correct: Unit  # greedy type correctness without retrieval on those held-out theorems the model must reach
    item: Item


def train_gen(params: TrainGenParams, theorems: pl.DataFrame, contexts: pl.DataFrame) -> dict[str, object]:
    """A byte-level BPE tokenizer and a tiny Llama trained on the training theorems, with and without their retrieved
    examples, and on near-miss repairs; greedy type correctness on held-out theorems of the training families checked
    (learnability: it learned the formal language), greedy scores on the unseen val families recorded."""
    from paperdag.lm import build_or_load, checkpoint_writer, fit_pools, lm_stats

    start = time.perf_counter()
    model, tokenizer, stats, losses = train_generator(
        theorems, contexts, params, lambda texts: build_or_load(params, texts, max_positions=1024, model_max_length=1024),
        lambda model, tokenizer, pools: fit_pools(model, pools, params.mixture, params, tokenizer.pad_token_id,
                                                  f"proofbridge train_gen {params.item}").losses["loss"])
    stats |= lm_stats(model, tokenizer, params, losses, time.perf_counter() - start)
    return {"generator": checkpoint_writer(model, tokenizer), "gen_stats": stats}


@dataclass(frozen=True)
class RepairParams:
    samples: PositiveInt  # n samples per theorem and arm (pass@k for k <= n)
    temperatures: list[NonNegativeFloat]  # tuned per arm on val (semantic pass@n), the same choices for every arm
    rounds: NonNegativeInt  # repair rounds with the checker's error fed back (paper: up to 5)
    batch_size: PositiveInt
    max_new_tokens: PositiveInt
    threads: PositiveInt
    item: Item
    seed: int


def repair(params: RepairParams, generator: Path, theorems: pl.DataFrame, contexts: pl.DataFrame) -> dict[str, object]:
    """Per arm, its sampling temperature chosen on val (semantic pass@n); then on every test theorem n sampled chains
    per arm (repair arms: up to `rounds` regenerations with the checker's error), each final attempt checked and judged."""
    import torch

    from paperdag.lm import load_causal_lm

    torch.set_num_threads(params.threads)
    start = time.perf_counter()
    model, tokenizer = load_causal_lm(generator)
    attempts, chosen = repair_arms(model, tokenizer, theorems, contexts, params)
    return {"attempts": attempts, "repair_stats": {"replicate": params.item.replicate, **chosen, "seconds": time.perf_counter() - start}}


@dataclass(frozen=True)
class EvaluateParams:
    k: PositiveInt  # pass@k of the claims (<= repair.samples)
    recall_ks: list[PositiveInt]  # Recall@k curve


def evaluate(params: EvaluateParams, retrieval: dict[Item, pl.DataFrame], attempts: dict[Item, pl.DataFrame],
             embed_stats: dict[Item, dict], gen_stats: dict[Item, dict], repair_stats: dict[Item, dict]) -> dict[str, object]:
    """Per replicate Recall@k / MRR of both retrievers on the unseen test families and pass@k of each arm; the
    headline over replicates (paired); the Recall@k and pass@k figures."""
    per = {}
    for item in retrieval:
        per[str(item)] = {**retrieval_scores(retrieval[item], "test", params.recall_ks), **generation_scores(attempts[item], params.k)}
    scores = list(per.values())
    metrics = {"headline": headline(scores, params.k), "per_replicate": per,
               "frozen_view": {str(i): s["frozen_view"] for i, s in embed_stats.items()},
               "val_greedy": {str(i): s["val_greedy"] for i, s in gen_stats.items()},
               "holdout_greedy": {str(i): s["holdout_greedy"] for i, s in gen_stats.items()},
               "temperature": {str(i): s["temperature"] for i, s in repair_stats.items()}}
    return {"metrics": metrics, "recall_at_k": recall_figure(scores, params.recall_ks), "pass_at_k": pass_figure(scores)}

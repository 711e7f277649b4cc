"""Glue between the paperdag engine and the ckplug method: synthesize -> train (x training arm x replicate) -> infer
(x training arm x replicate) -> evaluate (gathers every element).

The decoding rules, the comparison protocol, the metrics and the figure live in paperdag.methods.ckplug; the tiny
LM's lifecycle, generation and the fact world in paperdag.lm; intervals over replicates in paperdag.stats. These
functions read inputs, call them and return their outputs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import polars as pl
from pydantic import NonNegativeFloat, NonNegativeInt, PositiveInt

from paperdag.engine import Item
from paperdag.engine.params import Fraction, PositiveFraction
from paperdag.figures import loss_curves, panels
from paperdag.lm import TinyLMConfig
from paperdag.methods.ckplug import (ConflictRule, EntropyOver, Kind, WorldSizes, accuracy_vs_noise, arm_headline, build, interval_table, mr_vs_alpha,
                                     replicate_numbers)

# torch and the code that needs it are imported inside the stage functions: importing this module stays cheap
# (tests/engine/test_imports.py).

# ---------------------------------------------------------------- synthesize


@dataclass(frozen=True)
class SynthesizeParams:
    known_entities: PositiveInt
    reading_entities: PositiveInt
    fresh_entities: PositiveInt
    test_facts: PositiveInt
    adaptive_items: PositiveInt  # per noise level
    adaptive_noise: list[Fraction]  # the noise sweep: share of each level's items with a counterfactual context
    distractors: NonNegativeInt
    conflict_items: NonNegativeInt
    consistent_items: NonNegativeInt
    reading_copies: PositiveInt  # rows per reading fact, each with its own random value when > 1 (copy, not recall)
    seed: int


def synthesize(params: SynthesizeParams) -> dict[str, object]:
    """The fact world, the training rows (closed-book, reading, consistent, conflict), the counterfactual test set and
    the adaptive mixed set (adaptive_items per noise level); a count that cannot be met is an error."""
    p = params
    sizes = WorldSizes(p.known_entities, p.reading_entities, p.fresh_entities, p.test_facts, p.adaptive_items,
                       tuple(p.adaptive_noise), p.distractors, p.conflict_items, p.consistent_items, p.reading_copies)
    world, groups, train_rows, counterfactual, adaptive = build(sizes, p.seed)
    group_of = {e: g for g, names in groups.items() for e in names}
    facts = pl.DataFrame(
        [{"entity": e, "relation": r, "value": v, "group": group_of[e]} for (e, r), v in world.facts.items()]
    )
    return {"facts": facts, "train_rows": train_rows, "counterfactual": counterfactual, "adaptive": adaptive}


# ---------------------------------------------------------------- train


@dataclass(frozen=True)
class TrainParams(TinyLMConfig):
    mixture: dict[Kind, NonNegativeFloat]
    curriculum_steps: NonNegativeInt  # the first steps train on closed-book rows only (memorise first), then the mixture
    max_new_tokens: PositiveInt
    item: Item  # the matrix element: item.training (arm), item.replicate (its seed is the engine's, per element)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.curriculum_steps >= self.steps > 0 or (self.steps == 0 and self.curriculum_steps):
            raise ValueError("curriculum_steps", f"must be below steps = {self.steps}; got {self.curriculum_steps}")


def train(params: TrainParams, train_rows: pl.DataFrame) -> dict[str, object]:
    """A byte-level BPE tokenizer and a tiny Llama trained from scratch on the rows (or, with model_path, a local
    checkpoint fine-tuned for `steps`): closed-book rows only for curriculum_steps, then the mixture; closed-book
    recall of every memorised fact; the loss curve. The training_free arm drops the conflict rows (conflict_items =
    0: the paper's method needs no such training). One element: the seed (initialisation, batch order) is its own."""
    import polars as pl

    from paperdag.lm import build_or_load, checkpoint_writer, fit_pools, lm_stats
    from paperdag.methods.ckplug import closed_book_recall, training_arm, training_pools, training_texts

    start = time.perf_counter()
    train_rows, mixture = training_arm(train_rows, params.mixture, str(params.item.training))
    model, tokenizer = build_or_load(params, training_texts(train_rows))
    pools, name = training_pools(tokenizer, train_rows), f"ckplug train {params.item}"
    history: list[float] = []
    for steps, mix, seed in ((params.curriculum_steps, {"closed_book": 1.0}, params.seed + 1),
                             (params.steps - params.curriculum_steps, mixture, params.seed)):
        if steps:
            history += fit_pools(model, pools, mix, params, tokenizer.pad_token_id, name, steps=steps, seed=seed).losses["loss"]
    train_seconds = time.perf_counter() - start
    recall, questions = closed_book_recall(model, tokenizer, train_rows, params.max_new_tokens)
    stats = {"training": params.item.training, "replicate": params.item.replicate, "seed": params.seed, "closed_book_recall": recall, "closed_book_questions": questions,
             **lm_stats(model, tokenizer, params, history, train_seconds)}
    fig, (ax,) = panels(6, 3.2)
    loss_curves(ax, {"loss": history}, ylabel="target cross-entropy",
                title=f"ckplug train {params.item}: closed-book recall {recall:.1%}")
    return {"model": checkpoint_writer(model, tokenizer), "train_stats": stats, "loss_curve": fig}


# ---------------------------------------------------------------- infer


@dataclass(frozen=True)
class InferParams:
    alphas: list[Fraction]  # the CK-PLUG sweep: must hold 0.0 and 1.0, the ends of the MR range
    cad_betas: list[NonNegativeFloat]  # CAD's strength sweep (the baseline at its best beta; 0 = plain RAG)
    conflict_rule: ConflictRule
    entropy_over: EntropyOver  # CK-PLUG's entropies: head (official code) or vocab; the other is decoded beside it
    relative_top: PositiveFraction
    min_head: PositiveInt
    max_new_tokens: PositiveInt
    batch_size: PositiveInt
    item: Item  # the matrix element: which arm's and replicate's model decodes

    def __post_init__(self) -> None:
        if 0.0 not in self.alphas or 1.0 not in self.alphas:
            raise ValueError("alphas", f"must include 0.0 and 1.0 (the ends of the MR range); got {self.alphas}")


def infer(params: InferParams, model: Path, counterfactual: pl.DataFrame, adaptive: pl.DataFrame) -> dict[str, object]:
    """Every method on the counterfactual set and on the adaptive set with one replicate's model; one prediction row
    per (set, item, method). Greedy decoding: the same test items for every replicate and method (paired)."""
    from paperdag.lm import load_causal_lm
    from paperdag.methods.ckplug import method_rules, run_methods

    lm, tokenizer = load_causal_lm(model)
    p = params
    methods = method_rules(p.alphas, p.cad_betas, p.conflict_rule, p.relative_top, p.min_head, p.entropy_over)
    predictions, timing = run_methods(lm, tokenizer, {"counterfactual": counterfactual, "adaptive": adaptive}, methods,
                                      p.max_new_tokens, p.batch_size, f"ckplug infer {p.item}")
    return {"predictions": predictions, "decode_stats": {"training": p.item.training, "replicate": p.item.replicate, "runs": timing}}


# ---------------------------------------------------------------- evaluate (gathers every replicate)


@dataclass(frozen=True)
class EvaluateParams:
    """What the adaptive set was asked to hold (its delivered size is checked against it); the claims' thresholds
    live in pipelines/ckplug.yaml `claims:`."""

    adaptive_items: PositiveInt
    adaptive_noise: list[Fraction]


def evaluate(params: EvaluateParams, train_stats: dict[Item, dict], predictions: dict[Item, pl.DataFrame],
             decode_stats: dict[Item, dict]) -> dict[str, object]:
    """Per element: ConR, ParR, MR per method and alpha (counterfactual set), accuracy per method and noise level
    (adaptive set), closed-book recall, decoding cost. Over the replicates of each training arm: 95 % t intervals,
    and the paired differences adaptive - RAG / no-RAG / CAD (same replicate, same items). The headline is the
    conflict_rows arm's, with the training_free arm's beside it; the plots show both arms' MR sweeps and adaptive-set
    accuracy per noise level."""
    keys = list(predictions)  # the matrix's order
    for name, gathered in (("train_stats", train_stats), ("decode_stats", decode_stats)):
        if list(gathered) != keys:
            raise ValueError(f"evaluate: {name} elements {list(gathered)} differ from predictions' {keys}")
    per = {k: replicate_numbers(train_stats[k]["closed_book_recall"], predictions[k], decode_stats[k]["runs"]) for k in keys}
    arms = {str(a): {str(k.replicate): per[k] for k in keys if k.training == a} for a in dict.fromkeys(k.training for k in keys)}
    sizes = {k: predictions[k].filter(pl.col("set") == "adaptive").select("noise", "item").n_unique() for k in keys}
    headline = arm_headline(arms, sizes, params.adaptive_items * len(params.adaptive_noise))
    metrics = {"headline": headline, "table": {a: interval_table(p) for a, p in arms.items()},
               "replicates": {a: p for a, p in arms.items()}}
    return {"metrics": metrics, "mr_vs_alpha": mr_vs_alpha(arms), "accuracy_vs_noise": accuracy_vs_noise(arms)}

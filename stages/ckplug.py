"""Glue between the paperdag engine and the ckplug method: synthesize -> train (x replicate) -> infer (x replicate)
-> evaluate (gathers every replicate).

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
from paperdag.methods.ckplug import ConflictRule, Kind, WorldSizes, build, headline, interval_table, mr_vs_alpha, replicate_numbers

# torch and the code that needs it are imported inside the stage functions: importing this module stays cheap
# (tests/engine/test_imports.py).

# ---------------------------------------------------------------- synthesize


@dataclass(frozen=True)
class SynthesizeParams:
    known_entities: PositiveInt
    reading_entities: PositiveInt
    fresh_entities: PositiveInt
    test_facts: PositiveInt
    adaptive_items: PositiveInt
    adaptive_noisy_fraction: Fraction
    distractors: NonNegativeInt
    conflict_items: NonNegativeInt
    consistent_items: NonNegativeInt
    seed: int


def synthesize(params: SynthesizeParams) -> dict[str, object]:
    """The fact world, the training rows (closed-book, reading, consistent, conflict), the counterfactual test set and
    the adaptive mixed set."""
    p = params
    sizes = WorldSizes(p.known_entities, p.reading_entities, p.fresh_entities, p.test_facts, p.adaptive_items,
                       p.adaptive_noisy_fraction, p.distractors, p.conflict_items, p.consistent_items)
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
    max_new_tokens: PositiveInt
    item: Item  # the matrix element: item.replicate (its seed is the engine's, per element)


def train(params: TrainParams, train_rows: pl.DataFrame) -> dict[str, object]:
    """A byte-level BPE tokenizer and a tiny Llama trained from scratch on the rows (or, with model_path, a local
    checkpoint fine-tuned for `steps`); closed-book recall of every memorised fact; the loss curve. One replicate:
    the seed (initialisation, batch order) is the element's own."""
    from paperdag.lm import build_or_load, checkpoint_writer, fit_pools, lm_stats
    from paperdag.methods.ckplug import closed_book_recall, training_pools, training_texts

    start = time.perf_counter()
    model, tokenizer = build_or_load(params, training_texts(train_rows))
    history: list[float] = []
    if params.steps > 0:
        history = fit_pools(model, training_pools(tokenizer, train_rows), params.mixture, params, tokenizer.pad_token_id,
                            f"ckplug train {params.item.replicate}").losses["loss"]
    train_seconds = time.perf_counter() - start
    recall, questions = closed_book_recall(model, tokenizer, train_rows, params.max_new_tokens)
    stats = {"replicate": params.item.replicate, "seed": params.seed, "closed_book_recall": recall, "closed_book_questions": questions,
             **lm_stats(model, tokenizer, params, history, train_seconds)}
    fig, (ax,) = panels(6, 3.2)
    loss_curves(ax, {"loss": history}, ylabel="target cross-entropy",
                title=f"ckplug train {params.item.replicate}: closed-book recall {recall:.1%}")
    return {"model": checkpoint_writer(model, tokenizer), "train_stats": stats, "loss_curve": fig}


# ---------------------------------------------------------------- infer


@dataclass(frozen=True)
class InferParams:
    alphas: list[Fraction]  # the CK-PLUG sweep: must hold 0.0 and 1.0, the ends of the MR range
    cad_beta: NonNegativeFloat
    conflict_rule: ConflictRule
    relative_top: PositiveFraction
    min_head: PositiveInt
    max_new_tokens: PositiveInt
    batch_size: PositiveInt
    item: Item  # the matrix element: item.replicate, which replicate's model decodes

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
    methods = method_rules(p.alphas, p.cad_beta, p.conflict_rule, p.relative_top, p.min_head)
    predictions, timing = run_methods(lm, tokenizer, {"counterfactual": counterfactual, "adaptive": adaptive}, methods,
                                      p.max_new_tokens, p.batch_size, f"ckplug infer {p.item.replicate}")
    return {"predictions": predictions, "decode_stats": {"replicate": p.item.replicate, "runs": timing}}


# ---------------------------------------------------------------- evaluate (gathers every replicate)


@dataclass(frozen=True)
class EvaluateParams:
    """No knobs: the claims' thresholds live in pipelines/ckplug.yaml `claims:`."""


def evaluate(params: EvaluateParams, train_stats: dict[Item, dict], predictions: dict[Item, pl.DataFrame],
             decode_stats: dict[Item, dict]) -> dict[str, object]:
    """Per replicate: ConR, ParR, MR per method and alpha (counterfactual set), accuracy per method (adaptive set),
    closed-book recall, decoding cost. Over replicates: 95 % t intervals of each, and the paired differences adaptive
    - RAG and adaptive - no-RAG (same replicate, same items) with their minimum detectable difference. The MR-vs-alpha
    plot shows the mean over replicates and each replicate."""
    keys = list(predictions)  # the matrix's order
    for name, gathered in (("train_stats", train_stats), ("decode_stats", decode_stats)):
        if list(gathered) != keys:
            raise ValueError(f"evaluate: {name} replicates {list(gathered)} differ from predictions' {keys}")
    per = {k: replicate_numbers(train_stats[k]["closed_book_recall"], predictions[k], decode_stats[k]["runs"]) for k in keys}
    metrics = {"headline": headline(per), "table": interval_table(per), "replicates": per}
    return {"metrics": metrics, "mr_vs_alpha": mr_vs_alpha(per)}

"""Glue between the paperdag engine and the ckplug method: synthesize -> train -> infer -> evaluate.

The decoding rule lives in paperdag.methods.ckplug; the tiny LM, its tokenizer, generation and the fact world in
paperdag.lm. These functions turn tables into prompts, prompts into predictions, predictions into metrics.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import torch
from matplotlib.figure import Figure
from rich.progress import track

from paperdag.lm import (
    TrainConfig,
    checkpoint_writer,
    contains_answer,
    fit_causal_lm,
    generate,
    load_causal_lm,
    plain,
    tiny_causal_lm,
    tiny_llama_config,
    train_byte_bpe,
)
from paperdag.methods.ckplug import (
    KINDS,
    WorldSizes,
    build,
    cad_rule,
    ckplug_rule,
    context_prompt,
    memory_recall_table,
    parametric_prompt,
)

# ---------------------------------------------------------------- synthesize


@dataclass(frozen=True)
class SynthesizeParams:
    known_entities: int
    reading_entities: int
    fresh_entities: int
    test_facts: int
    adaptive_items: int
    adaptive_noisy_fraction: float
    distractors: int
    conflict_items: int
    consistent_items: int
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
class TrainParams:
    model_path: str
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    intermediate_size: int
    steps: int
    batch_size: int
    lr: float
    warmup_steps: int
    mixture: dict[str, float]
    max_new_tokens: int
    threads: int
    seed: int


def _encode(tokenizer, row: dict) -> tuple[list[int], list[int]]:
    prompt = context_prompt(row["context"], row["question"]) if row["context"] else parametric_prompt(row["question"])
    target = tokenizer(" " + row["answer"], add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    return tokenizer(prompt)["input_ids"], target


def train(params: TrainParams, train_rows: pl.DataFrame) -> dict[str, object]:
    """A byte-level BPE tokenizer and a tiny Llama trained from scratch on the rows (or, with model_path, a local
    checkpoint fine-tuned for `steps`); closed-book recall of every memorised fact; the loss curve."""
    torch.set_num_threads(params.threads)
    unknown = sorted(set(params.mixture) - set(KINDS))
    if unknown:
        raise ValueError(f"params.yaml ckplug.train.mixture: unknown kinds {unknown}; choose from {KINDS}")
    start = time.perf_counter()
    if params.model_path:
        model, tokenizer = load_causal_lm(params.model_path)
    else:
        texts = [f"{context_prompt(r['context'], r['question'])} {r['answer']}" for r in train_rows.iter_rows(named=True)]
        tokenizer = train_byte_bpe(texts, params.vocab_size)
        config = tiny_llama_config(len(tokenizer), params.hidden_size, params.num_layers, params.num_heads, params.num_kv_heads,
                                   params.intermediate_size, pad_token_id=tokenizer.pad_token_id,
                                   bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
        model = tiny_causal_lm(config)
    pools = {kind: [_encode(tokenizer, r) for r in train_rows.filter(pl.col("kind") == kind).iter_rows(named=True)] for kind in KINDS}
    history: list[float] = []
    if params.steps > 0:
        config = TrainConfig(steps=params.steps, lr=params.lr, warmup_steps=params.warmup_steps, weight_decay=0.0, seed=params.seed)
        history = fit_causal_lm(model, pools, params.mixture, config, params.batch_size, tokenizer.pad_token_id, description="ckplug train")
    train_seconds = time.perf_counter() - start
    closed = train_rows.filter(pl.col("kind") == "closed_book")
    predictions = _decode(model, tokenizer, [[parametric_prompt(q) for q in closed["question"]]], plain, params.max_new_tokens, 256)[0]
    hits = [contains_answer(p, a) for p, a in zip(predictions, closed["answer"], strict=True)]
    stats = {
        "closed_book_recall": sum(hits) / len(hits),
        "closed_book_questions": len(hits),
        "parameters": sum(p.numel() for p in model.parameters()),
        "vocab_size": len(tokenizer),
        "model": params.model_path or "tiny Llama from scratch",
        "steps": params.steps,
        "final_loss": sum(history[-50:]) / max(1, len(history[-50:])) if history else None,
        "loss": history,
        "train_seconds": train_seconds,
    }
    return {"model": checkpoint_writer(model, tokenizer), "train_stats": stats, "loss_curve": _loss_plot(history, stats)}


def _loss_plot(history: list[float], stats: dict) -> Figure:
    fig = Figure(figsize=(6, 3.2), layout="constrained")
    ax = fig.subplots()
    if history:
        window = max(1, len(history) // 50)
        smooth = [sum(history[max(0, i - window + 1) : i + 1]) / len(history[max(0, i - window + 1) : i + 1]) for i in range(len(history))]
        ax.plot(history, color="tab:blue", alpha=0.25, linewidth=0.8, label="step loss")
        ax.plot(smooth, color="tab:blue", linewidth=1.5, label=f"mean of {window}")
        ax.legend(fontsize=8)
    ax.set_xlabel("step")
    ax.set_ylabel("target cross-entropy")
    ax.set_title(f"ckplug train: closed-book recall {stats['closed_book_recall']:.1%}", fontsize=10, loc="left")
    ax.grid(alpha=0.3)
    return fig


def _decode(model, tokenizer, views: list[list[str]], rule, max_new_tokens: int, batch_size: int) -> tuple[list[str], dict]:
    """Greedy generations for every example (views: one prompt list per view), in batches; texts and timing."""
    ids = [[tokenizer(p)["input_ids"] for p in prompts] for prompts in views]
    texts, seconds, tokens, passes = [], 0.0, 0, 0
    for lo in range(0, len(ids[0]), batch_size):
        out = generate(model, [v[lo : lo + batch_size] for v in ids], tokenizer.pad_token_id, tokenizer.eos_token_id, rule=rule,
                       max_new_tokens=max_new_tokens)
        texts += [tokenizer.decode(t, skip_special_tokens=True).strip() for t in out.tokens]
        seconds, tokens, passes = seconds + out.seconds, tokens + out.new_tokens, passes + out.forward_passes
    return texts, {"seconds": seconds, "new_tokens": tokens, "forward_passes": passes}


# ---------------------------------------------------------------- infer


@dataclass(frozen=True)
class InferParams:
    alphas: list[float]
    cad_beta: float
    conflict_rule: str
    relative_top: float
    min_head: int
    max_new_tokens: int
    batch_size: int
    threads: int


def methods(params: InferParams) -> list[tuple[str, float | None, int, object]]:
    """(method, alpha, views used, step rule): views are 1 = context prompt, 0 = parametric prompt, 2 = both."""
    rows: list[tuple[str, float | None, int, object]] = [("no-rag", None, 0, plain), ("rag", None, 1, plain),
                                                         ("cad", None, 2, cad_rule(params.cad_beta))]
    rows += [("ck-plug", a, 2, ckplug_rule(a, params.conflict_rule, params.relative_top, params.min_head)) for a in params.alphas]
    rows.append(("ck-plug-adaptive", None, 2, ckplug_rule(None, params.conflict_rule, params.relative_top, params.min_head)))
    return rows


def infer(params: InferParams, model: Path, counterfactual: pl.DataFrame, adaptive: pl.DataFrame) -> dict[str, object]:
    """Every method on the counterfactual set and on the adaptive set; one prediction row per (set, item, method)."""
    torch.set_num_threads(params.threads)
    lm, tokenizer = load_causal_lm(model)
    frames, timing = [], []
    jobs = [(name, table, m) for name, table in (("counterfactual", counterfactual), ("adaptive", adaptive)) for m in methods(params)]
    for set_name, table, (method, alpha, use, rule) in track(jobs, description="ckplug infer"):
        with_context = [context_prompt(c, q) for c, q in zip(table["context"], table["question"], strict=True)]
        without = [parametric_prompt(q) for q in table["question"]]
        views = {0: [without], 1: [with_context], 2: [with_context, without]}[use]
        texts, cost = _decode(lm, tokenizer, views, rule, params.max_new_tokens, params.batch_size)
        frames.append(table.with_row_index("item").with_columns(
            pl.lit(set_name).alias("set"), pl.lit(method).alias("method"), pl.lit(alpha, dtype=pl.Float64).alias("alpha"),
            pl.Series("prediction", texts, dtype=pl.String)))
        timing.append({"set": set_name, "method": method, "alpha": alpha, **cost,
                       "tokens_per_s": cost["new_tokens"] / cost["seconds"] if cost["seconds"] else None})
    predictions = pl.concat(frames, how="diagonal_relaxed")
    return {"predictions": predictions, "decode_stats": {"runs": timing}}


# ---------------------------------------------------------------- evaluate


@dataclass(frozen=True)
class EvaluateParams:
    min_mr_range: float  # target: MR(alpha = 1) - MR(alpha = 0), in points
    min_recall: float  # closed-book recall below this makes MR meaningless: flagged in the targets


def evaluate(params: EvaluateParams, train_stats: dict, predictions: pl.DataFrame, decode_stats: dict) -> dict[str, object]:
    """ConR, ParR, MR per method and alpha (counterfactual set); accuracy per method (adaptive set); tokens/s; the
    headline and the spec's targets; the MR-vs-alpha plot."""
    table = memory_recall_table(predictions, decode_stats["runs"])
    by = {(r["method"], r["alpha"]): r for r in table}
    ck = sorted((r for r in table if r["method"] == "ck-plug"), key=lambda r: r["alpha"])
    if len(ck) < 2 or ck[0]["alpha"] != 0.0 or ck[-1]["alpha"] != 1.0:
        raise ValueError("params.yaml ckplug.infer.alphas must include 0.0 and 1.0 (the ends of the MR range)")
    mrs = [r["MR"] for r in ck]
    plain_cost = _seconds_per_token(decode_stats["runs"], "rag")
    ck_cost = _seconds_per_token(decode_stats["runs"], "ck-plug")
    headline = {
        "closed_book_recall": train_stats["closed_book_recall"],
        "mr_alpha0": mrs[0],
        "mr_alpha1": mrs[-1],
        "mr_range": mrs[-1] - mrs[0],
        "mr_baseline_rag": by[("rag", None)]["MR"],
        "mr_norag": by[("no-rag", None)]["MR"],
        "mr_cad": by[("cad", None)]["MR"],
        "mr_by_alpha": {f"{r['alpha']:g}": r["MR"] for r in ck},
        "mr_monotone": all(b >= a for a, b in zip(mrs, mrs[1:])),
        "adaptive_acc": by[("ck-plug-adaptive", None)]["acc"],
        "rag_acc": by[("rag", None)]["acc"],
        "norag_acc": by[("no-rag", None)]["acc"],
        "cad_acc": by[("cad", None)]["acc"],
        "adaptive_acc_by_group": by[("ck-plug-adaptive", None)]["acc_by_group"],
        "rag_acc_by_group": by[("rag", None)]["acc_by_group"],
        "norag_acc_by_group": by[("no-rag", None)]["acc_by_group"],
        "decode_cost_ratio": ck_cost / plain_cost,
        "decode_note": "CK-PLUG (all alphas, both sets) seconds per generated token / plain RAG decoding's, same infer run",
        "units": "ConR, ParR, MR, acc in percent",
    }
    targets = {
        "closed_book_recall": _target(headline["closed_book_recall"], f">= {params.min_recall}",
                                      headline["closed_book_recall"] >= params.min_recall),
        "mr_range": _target(headline["mr_range"], f">= {params.min_mr_range} points", headline["mr_range"] >= params.min_mr_range),
        "mr_monotone": _target(headline["mr_monotone"], "MR non-decreasing in alpha", headline["mr_monotone"]),
        "adaptive_beats_rag": _target(headline["adaptive_acc"] - headline["rag_acc"], "> 0 points",
                                      headline["adaptive_acc"] > headline["rag_acc"]),
        "adaptive_beats_norag": _target(headline["adaptive_acc"] - headline["norag_acc"], "> 0 points",
                                        headline["adaptive_acc"] > headline["norag_acc"]),
        "decode_cost_ratio": _target(headline["decode_cost_ratio"], "~2 (one extra forward pass per token), not more",
                                     headline["decode_cost_ratio"] <= 2.5),
    }
    metrics = {"headline": headline, "targets": targets, "table": table}
    return {"metrics": metrics, "mr_vs_alpha": _mr_plot(ck, by)}


def _target(value: object, goal: str, met: bool) -> dict[str, object]:
    return {"value": value, "target": goal, "met": bool(met)}


def _seconds_per_token(runs: list[dict], method: str) -> float:
    mine = [r for r in runs if r["method"] == method]
    return sum(r["seconds"] for r in mine) / max(1, sum(r["new_tokens"] for r in mine))


def _mr_plot(ck: list[dict], by: dict) -> Figure:
    fig = Figure(figsize=(6, 3.6), layout="constrained")
    ax = fig.subplots()
    alphas = [r["alpha"] for r in ck]
    ax.plot(alphas, [r["MR"] for r in ck], marker="o", color="tab:blue", label="CK-PLUG MR")
    ax.plot(alphas, [r["ConR"] for r in ck], marker=".", linestyle=":", color="tab:orange", label="CK-PLUG ConR")
    ax.plot(alphas, [r["ParR"] for r in ck], marker=".", linestyle=":", color="tab:green", label="CK-PLUG ParR")
    for (method, color, style) in (("rag", "black", "--"), ("cad", "tab:red", "-."), ("ck-plug-adaptive", "tab:purple", ":")):
        ax.axhline(by[(method, None)]["MR"], color=color, linestyle=style, linewidth=1, label=f"{method} MR")
    ax.set_xlabel("alpha (0: trust context, 1: trust memory)")
    ax.set_ylabel("percent (counterfactual set)")
    ax.set_ylim(-2, 102)
    ax.set_xticks(alphas)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    ax.set_title("Memory recall MR = ParR / (ParR + ConR) vs alpha", fontsize=10, loc="left")
    return fig

"""Glue between the paperdag engine and the ckplug method: synthesize -> train (x replicate) -> infer (x replicate)
-> evaluate (gathers every replicate).

The decoding rule and the metrics live in paperdag.methods.ckplug; the tiny LM, its tokenizer, generation and the
fact world in paperdag.lm; intervals and paired differences over replicates in paperdag.stats. These functions turn
tables into prompts, prompts into predictions, predictions into metrics.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import polars as pl
from matplotlib.figure import Figure
from pydantic import NonNegativeFloat, NonNegativeInt, PositiveFloat, PositiveInt
from rich.progress import track

from paperdag.engine import Item
from paperdag.engine.params import Fraction, PositiveFraction
from paperdag.lm import contains_answer
from paperdag.methods.ckplug import (
    KINDS,
    WorldSizes,
    build,
    context_prompt,
    is_monotone,
    memory_recall_table,
    mr_sweep,
    parametric_prompt,
    seconds_per_token,
)
from paperdag.stats import interval, paired

# The tiny LM, generation and the decoding rules need torch and transformers: they are imported inside the functions
# that use them, so that importing this module (every ckplug stage process does) stays cheap for synthesize and
# evaluate (tests/engine/test_imports.py).

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
class TrainParams:
    model_path: str
    vocab_size: PositiveInt
    hidden_size: PositiveInt
    num_layers: PositiveInt
    num_heads: PositiveInt
    num_kv_heads: PositiveInt
    intermediate_size: PositiveInt
    steps: PositiveInt
    batch_size: PositiveInt
    lr: PositiveFloat
    warmup_steps: NonNegativeInt
    mixture: dict[str, NonNegativeFloat]
    max_new_tokens: PositiveInt
    item: Item  # the matrix element: item.replicate (its seed is the engine's, per element)
    seed: int


def _encode(tokenizer, row: dict) -> tuple[list[int], list[int]]:
    prompt = context_prompt(row["context"], row["question"]) if row["context"] else parametric_prompt(row["question"])
    target = tokenizer(" " + row["answer"], add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    return tokenizer(prompt)["input_ids"], target


def train(params: TrainParams, train_rows: pl.DataFrame) -> dict[str, object]:
    """A byte-level BPE tokenizer and a tiny Llama trained from scratch on the rows (or, with model_path, a local
    checkpoint fine-tuned for `steps`); closed-book recall of every memorised fact; the loss curve. One replicate:
    the seed (initialisation, batch order) is the element's own."""
    from paperdag.lm import (
        TrainConfig,
        checkpoint_writer,
        fit_causal_lm,
        load_causal_lm,
        plain,
        tiny_causal_lm,
        tiny_llama_config,
        train_byte_bpe,
    )

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
        history = fit_causal_lm(model, pools, params.mixture, config, params.batch_size, tokenizer.pad_token_id, description=f"ckplug train {params.item.replicate}")
    train_seconds = time.perf_counter() - start
    closed = train_rows.filter(pl.col("kind") == "closed_book")
    predictions = _decode(model, tokenizer, [[parametric_prompt(q) for q in closed["question"]]], plain, params.max_new_tokens, 256)[0]
    hits = [contains_answer(p, a) for p, a in zip(predictions, closed["answer"], strict=True)]
    stats = {
        "replicate": params.item.replicate,
        "seed": params.seed,
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
    ax.set_title(f"ckplug train {stats['replicate']}: closed-book recall {stats['closed_book_recall']:.1%}", fontsize=10, loc="left")
    ax.grid(alpha=0.3)
    return fig


def _decode(model, tokenizer, views: list[list[str]], rule, max_new_tokens: int, batch_size: int) -> tuple[list[str], dict]:
    """Greedy generations for every example (views: one prompt list per view), in batches; texts and timing."""
    from paperdag.lm import generate

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
    alphas: list[Fraction]
    cad_beta: NonNegativeFloat
    conflict_rule: str
    relative_top: PositiveFraction
    min_head: PositiveInt
    max_new_tokens: PositiveInt
    batch_size: PositiveInt
    item: Item  # the matrix element: item.replicate, which replicate's model decodes


def methods(params: InferParams) -> list[tuple[str, float | None, int, object]]:
    """(method, alpha, views used, step rule): views are 1 = context prompt, 0 = parametric prompt, 2 = both."""
    from paperdag.lm import plain
    from paperdag.methods.ckplug import cad_rule, ckplug_rule

    rows: list[tuple[str, float | None, int, object]] = [("no-rag", None, 0, plain), ("rag", None, 1, plain),
                                                         ("cad", None, 2, cad_rule(params.cad_beta))]
    rows += [("ck-plug", a, 2, ckplug_rule(a, params.conflict_rule, params.relative_top, params.min_head)) for a in params.alphas]
    rows.append(("ck-plug-adaptive", None, 2, ckplug_rule(None, params.conflict_rule, params.relative_top, params.min_head)))
    return rows


def infer(params: InferParams, model: Path, counterfactual: pl.DataFrame, adaptive: pl.DataFrame) -> dict[str, object]:
    """Every method on the counterfactual set and on the adaptive set with one replicate's model; one prediction row
    per (set, item, method). Greedy decoding: the same test items for every replicate and method (paired)."""
    from paperdag.lm import load_causal_lm

    lm, tokenizer = load_causal_lm(model)
    frames, timing = [], []
    jobs = [(name, table, m) for name, table in (("counterfactual", counterfactual), ("adaptive", adaptive)) for m in methods(params)]
    for set_name, table, (method, alpha, use, rule) in track(jobs, description=f"ckplug infer {params.item.replicate}"):
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
    return {"predictions": predictions, "decode_stats": {"replicate": params.item.replicate, "runs": timing}}


# ---------------------------------------------------------------- evaluate (gathers every replicate)


@dataclass(frozen=True)
class EvaluateParams:
    """No knobs: the claims' thresholds live in pipelines/ckplug.yaml `claims:`."""


# the per-replicate numbers reported as intervals over replicates: name -> (method, alpha, column) of the table
_ACCURACY = {"adaptive_acc": "ck-plug-adaptive", "rag_acc": "rag", "norag_acc": "no-rag", "cad_acc": "cad"}
_MR = {"mr_rag": "rag", "mr_norag": "no-rag", "mr_cad": "cad", "mr_adaptive": "ck-plug-adaptive"}
_PAIRED = {"adaptive_minus_rag": ("adaptive_acc", "rag_acc"), "adaptive_minus_norag": ("adaptive_acc", "norag_acc")}


def _replicate(train_stats: dict, predictions: pl.DataFrame, decode_stats: dict) -> dict[str, object]:
    """One replicate's numbers: closed-book recall, the MR sweep, accuracies on the adaptive set, the decoding cost."""
    table = memory_recall_table(predictions, decode_stats["runs"])
    by = {(r["method"], r["alpha"]): r for r in table}
    alphas, mrs = mr_sweep(table)
    out: dict[str, object] = {
        "closed_book_recall": train_stats["closed_book_recall"],
        "mr_alpha0": mrs[0],
        "mr_alpha1": mrs[-1],
        "mr_range": mrs[-1] - mrs[0],
        "mr_by_alpha": {f"{a:g}": m for a, m in zip(alphas, mrs, strict=True)},
        "mr_monotone": is_monotone(mrs),
        **{k: by[(m, None)]["MR"] for k, m in _MR.items()},
        **{k: by[(m, None)]["acc"] for k, m in _ACCURACY.items()},
        "decode_cost_ratio": seconds_per_token(decode_stats["runs"], "ck-plug") / seconds_per_token(decode_stats["runs"], "rag"),
    }
    out.update({k: out[a] - out[b] for k, (a, b) in _PAIRED.items()})
    out["table"] = table
    return out


def _table(per: dict[str, dict]) -> list[dict]:
    """One row per (method, alpha): each column as an interval over replicates (acc_by_group per group)."""
    first = next(iter(per.values()))["table"]
    rows = []
    for i, row in enumerate(first):
        reps = [p["table"][i] for p in per.values()]
        if any((r["method"], r["alpha"]) != (row["method"], row["alpha"]) for r in reps):
            raise ValueError("predictions: replicates decoded different (method, alpha) lists; rerun ckplug:infer")
        out = {"method": row["method"], "alpha": row["alpha"]}
        out.update({c: interval([r[c] for r in reps]) for c in ("ConR", "ParR", "MR", "acc")})
        out["acc_by_group"] = {g: interval([r["acc_by_group"][g] for r in reps]) for g in row["acc_by_group"]}
        times = [r["tokens_per_s"] for r in reps]
        out["tokens_per_s"] = interval(times) if None not in times else None
        rows.append(out)
    return rows


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
    per = {k: _replicate(train_stats[k], predictions[k], decode_stats[k]) for k in keys}
    col = {name: [p[name] for p in per.values()] for name in next(iter(per.values())) if name != "table"}
    headline: dict[str, object] = {
        "replicates": len(keys),
        "closed_book_recall": interval(col["closed_book_recall"]),
        "mr_alpha0": interval(col["mr_alpha0"]),
        "mr_alpha1": interval(col["mr_alpha1"]),
        "mr_range": interval(col["mr_range"]),
        "mr_monotone": sum(col["mr_monotone"]) / len(keys),
        **{k: interval(col[k]) for k in _ACCURACY},
        **{k: paired(col[a], col[b]) for k, (a, b) in _PAIRED.items()},
        **{k: interval(col[k]) for k in _MR},
        "mr_by_alpha": {a: interval([m[a] for m in col["mr_by_alpha"]]) for a in col["mr_by_alpha"][0]},
        "decode_cost_ratio": interval(col["decode_cost_ratio"]),
        "notes": {
            "units": "ConR, ParR, MR, acc in percent; closed_book_recall a fraction; intervals: 95 % Student-t over "
                     "replicates (paperdag.stats), paired = per-replicate differences on the same items",
            "mr_monotone": "fraction of replicates whose MR is non-decreasing in alpha and MR(1) > MR(0)",
            "mr_range": "MR(alpha = 1) - MR(alpha = 0), points",
            "decode_cost_ratio": "CK-PLUG (all alphas, both sets) seconds per generated token / plain RAG decoding's, "
                                 "same infer run",
        },
    }
    metrics = {"headline": headline, "table": _table(per), "replicates": per}
    return {"metrics": metrics, "mr_vs_alpha": _mr_plot(per)}


def _mr_plot(per: dict[str, dict]) -> Figure:
    fig = Figure(figsize=(6.4, 3.8), layout="constrained")
    ax = fig.subplots()
    tables = [[r for r in sorted((r for r in p["table"] if r["method"] == "ck-plug"), key=lambda r: r["alpha"])] for p in per.values()]
    alphas = [r["alpha"] for r in tables[0]]
    for column, color, style, marker in (("MR", "tab:blue", "-", "o"), ("ConR", "tab:orange", ":", "."), ("ParR", "tab:green", ":", ".")):
        values = [[t[i][column] for t in tables] for i in range(len(alphas))]
        stats = [interval(v) for v in values]
        mean = [s["mean"] for s in stats]
        ax.plot(alphas, mean, marker=marker, linestyle=style, color=color, label=f"CK-PLUG {column} (mean)")
        if len(tables) > 1:
            ax.fill_between(alphas, [s["ci95_low"] for s in stats], [s["ci95_high"] for s in stats], color=color,
                            alpha=0.12 if column == "MR" else 0.06, linewidth=0)
        if column == "MR":
            for t in tables:
                ax.plot(alphas, [r["MR"] for r in t], color=color, alpha=0.35, linewidth=0.8, marker=".", markersize=3)
    for (method, color, style) in (("rag", "black", "--"), ("cad", "tab:red", "-."), ("ck-plug-adaptive", "tab:purple", ":")):
        mr = [next(r["MR"] for r in p["table"] if r["method"] == method) for p in per.values()]
        ax.axhline(sum(mr) / len(mr), color=color, linestyle=style, linewidth=1, label=f"{method} MR (mean)")
    ax.set_xlabel("alpha (0: trust context, 1: trust memory)")
    ax.set_ylabel("percent (counterfactual set)")
    ax.set_ylim(-2, 102)
    ax.set_xticks(alphas)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    band = "band: 95 % t interval of the mean, thin lines: each replicate" if len(tables) > 1 else "one replicate: no interval"
    ax.set_title(f"MR = ParR / (ParR + ConR) vs alpha, mean of {len(tables)} replicates\n({band})", fontsize=9, loc="left")
    return fig

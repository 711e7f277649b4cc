"""The paper's knowledge-reliance metrics on counterfactual contexts, and accuracy on the adaptive mixed set.

A prediction hits an answer when the normalised answer occurs in the normalised prediction (word-bounded).
ConR = share recalling the context's (counterfactual) answer, ParR = share recalling the memorised answer,
MR = ParR / (ParR + ConR): 0 = always the context, 100 = always memory.
"""

from __future__ import annotations

import polars as pl

from paperdag.lm.factworld import contains_answer
from paperdag.stats import interval, paired


def recall(predictions: list[str], answers: list[str]) -> float:
    """Percent of predictions containing their answer."""
    if not predictions:
        return float("nan")
    return 100.0 * sum(contains_answer(p, a) for p, a in zip(predictions, answers, strict=True)) / len(predictions)


def memory_ratio(par_r: float, con_r: float) -> float:
    """MR = ParR / (ParR + ConR) in percent (50 when neither answer is ever produced: no preference shown)."""
    return 100.0 * par_r / (par_r + con_r) if par_r + con_r > 0 else 50.0


def memory_recall_table(predictions: pl.DataFrame, runs: list[dict]) -> list[dict]:
    """One row per (method, alpha): ConR, ParR, MR on the counterfactual set, acc (and per group) on the adaptive
    set, tokens/s over both sets."""
    rows = []
    keys = predictions.select("method", "alpha").unique(maintain_order=True).iter_rows()
    for method, alpha in keys:
        mine = predictions.filter((pl.col("method") == method) & (pl.col("alpha").eq_missing(alpha)))
        cf = mine.filter(pl.col("set") == "counterfactual")
        ad = mine.filter(pl.col("set") == "adaptive")
        con_r = recall(cf["prediction"].to_list(), cf["context_answer"].to_list())
        par_r = recall(cf["prediction"].to_list(), cf["memory_answer"].to_list())
        by_group = {
            group: recall(part["prediction"].to_list(), part["gold"].to_list())
            for (group,), part in sorted(ad.group_by("group"), key=lambda kv: kv[0])
        }
        timed = [r for r in runs if r["method"] == method and r["alpha"] == alpha]
        tokens, seconds = sum(r["new_tokens"] for r in timed), sum(r["seconds"] for r in timed)
        rows.append({
            "method": method,
            "alpha": alpha,
            "ConR": con_r,
            "ParR": par_r,
            "MR": memory_ratio(par_r, con_r),
            "acc": recall(ad["prediction"].to_list(), ad["gold"].to_list()),
            "acc_by_group": by_group,
            "tokens_per_s": tokens / seconds if seconds else None,
        })
    return rows


def mr_sweep(table: list[dict]) -> tuple[list[float], list[float]]:
    """CK-PLUG's (alphas, MRs) from a memory_recall_table, by increasing alpha; the sweep must span alpha 0 to 1."""
    ck = sorted((r for r in table if r["method"] == "ck-plug"), key=lambda r: r["alpha"])
    alphas = [r["alpha"] for r in ck]
    if len(ck) < 2 or alphas[0] != 0.0 or alphas[-1] != 1.0:
        raise ValueError(f"predictions: the CK-PLUG sweep must span alpha 0.0 to 1.0 (the ends of the MR range); got {alphas}")
    return alphas, [r["MR"] for r in ck]


def is_monotone(mrs: list[float]) -> bool:
    """MR rises with alpha: non-decreasing at every step of the sweep and MR(1) > MR(0) (a flat sweep controls
    nothing, so it does not count as monotone)."""
    return all(b >= a for a, b in zip(mrs, mrs[1:])) and mrs[-1] > mrs[0]


def seconds_per_token(runs: list[dict], method: str) -> float:
    """Decoding seconds per generated token of one method over all its runs (every alpha, both sets)."""
    mine = [r for r in runs if r["method"] == method]
    tokens = sum(r["new_tokens"] for r in mine)
    if not mine or tokens == 0:
        raise ValueError(f"decode_stats: no generated tokens recorded for method '{method}'")
    return sum(r["seconds"] for r in mine) / tokens


# the per-replicate numbers reported as intervals over replicates: name -> method of the table
ACCURACY = {"adaptive_acc": "ck-plug-adaptive", "rag_acc": "rag", "norag_acc": "no-rag", "cad_acc": "cad"}
MR = {"mr_rag": "rag", "mr_norag": "no-rag", "mr_cad": "cad", "mr_adaptive": "ck-plug-adaptive"}
PAIRED = {"adaptive_minus_rag": ("adaptive_acc", "rag_acc"), "adaptive_minus_norag": ("adaptive_acc", "norag_acc")}


def replicate_numbers(closed_book_recall: float, predictions: pl.DataFrame, runs: list[dict]) -> dict[str, object]:
    """One replicate's numbers: closed-book recall, the MR sweep, accuracies on the adaptive set, the decoding cost."""
    table = memory_recall_table(predictions, runs)
    by = {(r["method"], r["alpha"]): r for r in table}
    alphas, mrs = mr_sweep(table)
    out: dict[str, object] = {
        "closed_book_recall": closed_book_recall,
        "mr_alpha0": mrs[0],
        "mr_alpha1": mrs[-1],
        "mr_range": mrs[-1] - mrs[0],
        "mr_by_alpha": {f"{a:g}": m for a, m in zip(alphas, mrs, strict=True)},
        "mr_monotone": is_monotone(mrs),
        **{k: by[(m, None)]["MR"] for k, m in MR.items()},
        **{k: by[(m, None)]["acc"] for k, m in ACCURACY.items()},
        "decode_cost_ratio": seconds_per_token(runs, "ck-plug") / seconds_per_token(runs, "rag"),
    }
    out.update({k: out[a] - out[b] for k, (a, b) in PAIRED.items()})
    out["table"] = table
    return out


def interval_table(per: dict[str, dict]) -> list[dict]:
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


def headline(per: dict[str, dict]) -> dict[str, object]:
    """The numbers the claims read, over replicates: 95 % t intervals, paired differences on the same items."""
    col = {name: [p[name] for p in per.values()] for name in next(iter(per.values())) if name != "table"}
    return {
        "replicates": len(per),
        "closed_book_recall": interval(col["closed_book_recall"]),
        "mr_alpha0": interval(col["mr_alpha0"]),
        "mr_alpha1": interval(col["mr_alpha1"]),
        "mr_range": interval(col["mr_range"]),
        "mr_monotone": sum(col["mr_monotone"]) / len(per),
        **{k: interval(col[k]) for k in ACCURACY},
        **{k: paired(col[a], col[b]) for k, (a, b) in PAIRED.items()},
        **{k: interval(col[k]) for k in MR},
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

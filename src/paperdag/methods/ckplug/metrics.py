"""The paper's knowledge-reliance metrics on counterfactual contexts, and accuracy on the adaptive mixed set.

A prediction hits an answer when the normalised answer occurs in the normalised prediction (word-bounded).
ConR = share recalling the context's (counterfactual) answer, ParR = share recalling the memorised answer,
MR = ParR / (ParR + ConR): 0 = always the context, 100 = always memory.
"""

from __future__ import annotations

import polars as pl

from paperdag.lm.factworld import contains_answer


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
        raise ValueError(f"params.yaml ckplug.infer.alphas must include 0.0 and 1.0 (the ends of the MR range), got {alphas}")
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

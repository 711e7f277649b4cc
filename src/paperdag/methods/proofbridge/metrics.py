"""Scores: retrieval Recall@k / MRR from gold ranks; type and semantic correctness at pass@k (the unbiased estimator
of Chen et al. 2021 from n samples per theorem); per replicate, then over replicates with paired intervals; and the
two report figures (Recall@k curves, pass@k per arm)."""

from __future__ import annotations

from math import comb

import numpy as np
import polars as pl

from paperdag.methods.proofbridge.gen import ARMS, METHOD
from paperdag.stats import interval, paired

RETRIEVERS = ("joint", "frozen")  # the joint embedding, frozen MiniLM on the formal text (view tuned on val)
BASELINE_NO_RETRIEVAL, BASELINE_NO_REPAIR = "plain_repair", "rag"


def pass_at_k(n: int, c: int, k: int) -> float:
    """P(at least one of k samples drawn from n, c of them correct, is correct) = 1 - C(n - c, k) / C(n, k)."""
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} samples per theorem, got {n}")
    return 1.0 if n - c < k else 1.0 - comb(n - c, k) / comb(n, k)


def recall_curve(ranks: np.ndarray, ks: list[int]) -> list[float]:
    return [float((ranks <= k).mean()) for k in ks]


def retrieval_scores(retrieval: pl.DataFrame, split: str, ks: list[int]) -> dict[str, object]:
    """Recall@k for each k, Recall@1 and MRR of each retriever on one split's queries."""
    out: dict[str, object] = {}
    for name in RETRIEVERS:
        ranks = retrieval.filter((pl.col("split") == split) & (pl.col("retriever") == name))["gold_rank"].to_numpy()
        if not len(ranks):
            raise ValueError(f"proofbridge evaluate: no {split} ranks of retriever {name}")
        out[f"recall1_{name}"] = float((ranks == 1).mean())
        out[f"mrr_{name}"] = float((1.0 / ranks).mean())
        out[f"recall_curve_{name}"] = recall_curve(ranks, ks)
        out["candidates"] = int(len(ranks))
    return out


def generation_scores(attempts: pl.DataFrame, k: int) -> dict[str, object]:
    """Per arm: semantic and type correctness at pass@1 and pass@k, their curves over 1..n, the mean attempts per
    chain, over the test theorems (every arm on the same theorems and sample count)."""
    out: dict[str, object] = {}
    per = attempts.group_by("arm", "theorem").agg(pl.len().alias("n"), pl.col("semantic").sum().alias("sem"),
                                                   pl.col("type_correct").sum().alias("typ"), pl.col("attempts").mean().alias("att"))
    ns = set(per["n"].to_list())
    if len(ns) != 1:
        raise ValueError(f"proofbridge evaluate: arms / theorems have different sample counts {sorted(ns)}")
    n = ns.pop()
    theorems = None
    for arm in ARMS:
        rows = per.filter(pl.col("arm") == arm).sort("theorem")
        if theorems is None:
            theorems = rows["theorem"].to_list()
        elif rows["theorem"].to_list() != theorems:
            raise ValueError(f"proofbridge evaluate: arm {arm} was run on other theorems than {ARMS[0]}")
        for what, col in (("sem", "sem"), ("type", "typ")):
            curve = [float(np.mean([pass_at_k(n, c, j) for c in rows[col]])) for j in range(1, n + 1)]
            out[f"{what}_pass1_{arm}"] = curve[0]
            out[f"{what}_passk_{arm}"] = curve[k - 1]
            out[f"{what}_curve_{arm}"] = curve
        out[f"attempts_{arm}"] = float(rows["att"].mean())
    out["samples"], out["theorems"] = n, len(theorems or [])
    return out


def headline(per_replicate: list[dict[str, object]], k: int) -> dict[str, object]:
    """Intervals over replicates of every scalar; the claims' paired differences and the Recall@1 ratio."""
    def col(key: str) -> list[float]:
        return [float(r[key]) for r in per_replicate]

    h: dict[str, object] = {key: interval(col(key)) for key, v in per_replicate[0].items() if isinstance(v, (int, float))}
    # frozen Recall@1 can be 0: the ratio's denominator is floored at one hit in the candidate set
    floor = [1.0 / r["candidates"] for r in per_replicate]
    h["recall1_ratio_joint_over_frozen"] = interval([r["recall1_joint"] / max(r["recall1_frozen"], f) for r, f in zip(per_replicate, floor)])
    h["recall1_joint_minus_frozen"] = paired(col("recall1_joint"), col("recall1_frozen"))
    h["mrr_joint_minus_frozen"] = paired(col("mrr_joint"), col("mrr_frozen"))
    for name, base in (("no_retrieval", BASELINE_NO_RETRIEVAL), ("no_repair", BASELINE_NO_REPAIR), ("plain", "plain")):
        h[f"sem_passk_method_minus_{name}"] = paired(col(f"sem_passk_{METHOD}"), col(f"sem_passk_{base}"))
        h[f"type_passk_method_minus_{name}"] = paired(col(f"type_passk_{METHOD}"), col(f"type_passk_{base}"))
    h["k"], h["replicates"] = k, len(per_replicate)
    return h


def recall_figure(per_replicate: list[dict[str, object]], ks: list[int]):
    from paperdag.figures import mean_band, panels, decorate

    fig, (ax,) = panels(5, 3.4)
    for (name, label), colour in zip((("joint", "joint embedding"), ("frozen", "frozen MiniLM")), ("tab:blue", "tab:gray")):
        curves = np.array([r[f"recall_curve_{name}"] for r in per_replicate])
        mean_band(ax, ks, curves.mean(0).tolist(), replicates=curves.tolist(), label=label, colour=colour)
    decorate(ax, xlabel="k", ylabel="Recall@k (test, unseen families)", ylim=(0, 1.02), xticks=ks,
             title="NL -> formal retrieval among the test theorems")
    return fig


def pass_figure(per_replicate: list[dict[str, object]]):
    from paperdag.figures import mean_band, panels, decorate

    fig, axes = panels(9, 3.4, 2)
    for ax, what, label in zip(axes, ("sem", "type"), ("semantic correctness", "type correctness"), strict=True):
        for arm, colour in zip(ARMS, ("tab:gray", "tab:orange", "tab:green", "tab:blue"), strict=True):
            curves = np.array([r[f"{what}_curve_{arm}"] for r in per_replicate])
            xs = list(range(1, curves.shape[1] + 1))
            mean_band(ax, xs, curves.mean(0).tolist(), replicates=curves.tolist(), label=arm, colour=colour)
        decorate(ax, xlabel="k (samples)", ylabel=f"{label} at pass@k", ylim=(0, 1.02), xticks=xs, title=label)
    return fig

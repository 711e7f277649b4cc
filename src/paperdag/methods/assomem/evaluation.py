"""Scoring the rankings: Recall@{1,3,6,10} and nDCG@10 per set, method and question type; the headline over
replicate dialogue sets (t intervals, differences paired on the same replicates and test questions) that
pipelines/assomem.yaml's claims read."""

from __future__ import annotations

import numpy as np
import polars as pl

from paperdag.methods.assomem.protocol import METHODS, TOP

KS = (1, 3, 6, 10)
CLAIM_SET = "chat"  # the similarity-dense set the claims are judged on
# headline difference -> (method, baseline), R@6 on the claim set
PAIRED = {"r6_assomem_minus_flat_dense": ("assomem", "flat_dense"), "r6_assomem_minus_bm25": ("assomem", "bm25"),
          "r6_assomem_minus_two_stage": ("assomem", "two_stage"), "r6_assomem_minus_pagerank_only": ("assomem", "pagerank_only"),
          "r6_assomem_minus_no_time": ("assomem", "no_time"), "r6_assomem_minus_no_importance": ("assomem", "no_importance"),
          "r6_assomem_minus_no_clues": ("assomem", "no_clues"), "r6_assomem_minus_equal_weights": ("assomem", "equal_weights")}


def check_rankings(rankings: pl.DataFrame, questions: pl.DataFrame, where: str) -> None:
    """Every method ranks every test question exactly once, TOP deep: raises naming what is missing."""
    test = questions.filter(pl.col("split") == "test")
    per = rankings.group_by(["method", "qid"]).len()
    if set(per["method"].unique().to_list()) != set(METHODS):
        raise ValueError(f"{where}: rankings hold methods {sorted(per['method'].unique())}, expected {sorted(METHODS)}")
    if per.height != len(METHODS) * test.height or per["len"].min() != TOP:
        raise ValueError(f"{where}: expected {TOP} ranks for each of {test.height} test questions and {len(METHODS)} "
                         f"methods; got {per.height} (method, question) pairs, depths {sorted(per['len'].unique())}")


def score(rankings: pl.DataFrame, questions: pl.DataFrame) -> list[dict]:
    """One row per (set, method, question type incl. "all"): n, R@k for KS, nDCG@10, in %."""
    from paperdag.retrieval import ndcg_at_k, recall_at_k

    q = questions.filter(pl.col("split") == "test")
    useful = dict(zip(q["qid"].to_list(), [list(u) for u in q["useful"].to_list()], strict=True))
    meta = dict(zip(q["qid"].to_list(), zip(q["set"].to_list(), q["qtype"].to_list(), strict=True), strict=True))
    rows = []
    for (method,), part in rankings.sort(["qid", "rank"]).group_by(["method"], maintain_order=True):
        qids = part["qid"].unique(maintain_order=True).to_list()
        ids = part["uid"].to_numpy().reshape(len(qids), TOP)
        for st in sorted({meta[i][0] for i in qids}):
            for qtype in ("all", "fact", "preference", "temporal"):
                sel = [j for j, i in enumerate(qids) if meta[i][0] == st and qtype in ("all", meta[i][1])]
                if not sel:
                    continue
                rel = [useful[qids[j]] for j in sel]
                row = {"set": st, "method": method, "qtype": qtype, "n": len(sel)}
                row.update({f"r{k}": 100 * recall_at_k(ids[sel], rel, k) for k in KS})
                row["ndcg10"] = 100 * ndcg_at_k(ids[sel], rel, 10)
                rows.append(row)
    return rows


def headline(table: list[dict], stats: dict) -> dict[str, float]:
    """One replicate's headline: R@6 / nDCG@10 per method on each set (all types), per type on the claim set, the
    paired differences, and the per-query latency ratio AssoMem / flat dense."""
    out: dict[str, float] = {}
    for r in table:
        prefix = "" if r["set"] == CLAIM_SET else f"{r['set']}_"
        if r["qtype"] == "all":
            out[f"{prefix}r6_{r['method']}"] = r["r6"]
            out[f"{prefix}ndcg10_{r['method']}"] = r["ndcg10"]
            out[f"{prefix}r10_{r['method']}"] = r["r10"]
        elif not prefix:
            out[f"r6_{r['method']}_{r['qtype']}"] = r["r6"]
    for key, (m, b) in PAIRED.items():
        out[key] = out[f"r6_{m}"] - out[f"r6_{b}"]
    lat = stats["latency_seconds"]
    out["latency_ms_assomem"] = 1000 * float(np.mean(lat["assomem"]))
    out["latency_ms_flat_dense"] = 1000 * float(np.mean(lat["flat_dense"]))
    out["latency_ratio_assomem_vs_flat_dense"] = out["latency_ms_assomem"] / out["latency_ms_flat_dense"]
    out["test_questions"] = sum(r["n"] for r in table if r["qtype"] == "all" and r["method"] == "assomem" and r["set"] == CLAIM_SET)
    return out


def replicated(per_replicate: list[dict[str, float]]) -> dict[str, object]:
    """Every headline number as a t interval over replicates; the claimed differences as paired intervals (+ mdd,
    the smallest difference the design detects at alpha 0.05, power 0.8)."""
    from paperdag.stats import interval, paired

    out: dict[str, object] = {"replicates": len(per_replicate)}
    for key in per_replicate[0]:
        if key in PAIRED:
            m, b = PAIRED[key]
            out[key] = paired([h[f"r6_{m}"] for h in per_replicate], [h[f"r6_{b}"] for h in per_replicate])
        elif key == "test_questions":
            out[key] = [h[key] for h in per_replicate]
        else:
            out[key] = interval([h[key] for h in per_replicate])
    return out


def weights_per_type(fusion: dict, set_name: str, temperature_key: str = "temperature") -> dict[str, dict[str, float]]:
    """AssoMem's fitted weights softmax(CMI / T) per question type on one set (for the plot and the report)."""
    from paperdag.methods.assomem.memory import fusion_weights

    tuned = fusion[set_name]["methods"]["assomem"]
    return {t: fusion_weights(c, tuned["setting"][temperature_key]) for t, c in tuned["cmi"].items()}

"""Scoring the retrieval runs: nDCG@10 and Recall@100 per (method, variant, rho) on the cross-lingual and the
proper-noun test queries, beside index bytes, active dimensions and latency; the headline the claims read."""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from paperdag.methods.milco.sparse import K
from paperdag.retrieval import ndcg_at_k_per_query, padded, recall_at_k_per_query


def score_runs(queries: pl.DataFrame, runs: pl.DataFrame, index_stats: dict[str, Any], latency: dict[str, Any]) -> list[dict]:
    """A row per (method, variant, rho) of the runs; ndcg10 / recall100 unqualified are the cross-lingual ones."""
    test = queries.filter(pl.col("split") == "test").sort("query_id")
    kinds = dict(zip(test["query_id"], test["kind"], strict=True))
    relevant = dict(zip(test["query_id"], test["relevant"].to_list(), strict=True))
    sparse_stats = {(r["variant"], r["rho"]): r for r in index_stats["sparse"]}
    table = []
    for (method, variant, rho), rows in runs.group_by("method", "variant", "rho", maintain_order=True):
        row: dict[str, Any] = {"method": method, "variant": variant, "rho": rho}
        for kind in ("crosslingual", "propernoun"):
            mine = rows.filter(pl.col("query_id").map_elements(kinds.get, return_dtype=pl.String) == kind)
            ranked = padded(mine["ranking"].to_list(), -1, K, np.int64)
            rel = [relevant[q] for q in mine["query_id"]]
            row[f"ndcg10_{kind}"] = float(np.nanmean(ndcg_at_k_per_query(ranked, rel, 10)))
            row[f"recall100_{kind}"] = float(np.nanmean(recall_at_k_per_query(ranked, rel, K)))
        if method == "milco":
            s = sparse_stats[(variant, rho)]
            row |= {"active_dims": s["active_dims"], "pivot_dims": s["pivot_dims"], "echo_dims": s["echo_dims"],
                    "index_bytes": s["index_bytes"]}
            lat = latency[f"{variant}/rho_{rho:g}"]
        else:
            dense = index_stats["dense"]
            row |= {"active_dims": dense["dim"] if method == "dense" else None, "index_bytes": dense["index_bytes"] if method == "dense" else None}
            lat = latency[variant]
        row |= {"latency_ms": lat["search_ms_mean"], "encode_ms_per_query": lat["encode_ms_per_query"]}
        row["ndcg10"], row["recall100"] = row["ndcg10_crosslingual"], row["recall100_crosslingual"]
        table.append(row)
    return table


def find_row(table: list[dict], variant: str, rho: float | None = None) -> dict:
    for r in table:
        if r["variant"] == variant and (rho is None or r["rho"] == rho):
            return r
    raise ValueError(f"no evaluated run for {variant} at rho={rho}: is it in params.yaml milco.index.rhos?")


def headline(table: list[dict], headline_rho: float) -> dict[str, Any]:
    """The claims' numbers: MILCO unpruned and at headline_rho against the baselines and ablations."""
    full, pruned = find_row(table, "milco", 1.0), find_row(table, "milco", headline_rho)
    dense, no_echo = find_row(table, "dense"), find_row(table, "no_echo", 1.0)
    return {
        "queries": "ndcg10_* on cross-lingual test queries (query language != document language) unless named _propernoun",
        "ndcg10_milco": full["ndcg10_crosslingual"],
        "ndcg10_milco_pruned": pruned["ndcg10_crosslingual"],
        "ndcg10_bm25": find_row(table, "bm25")["ndcg10_crosslingual"],
        "ndcg10_translate_bm25": find_row(table, "translate_bm25")["ndcg10_crosslingual"],
        "ndcg10_dense": dense["ndcg10_crosslingual"],
        "ndcg10_no_align": find_row(table, "no_align", 1.0)["ndcg10_crosslingual"],
        "ndcg10_no_connector": find_row(table, "no_connector", 1.0)["ndcg10_crosslingual"],
        "ndcg10_no_echo_crosslingual": no_echo["ndcg10_crosslingual"],
        "ndcg10_milco_propernoun": full["ndcg10_propernoun"],
        "ndcg10_no_echo": no_echo["ndcg10_propernoun"],
        "ndcg10_milco_pruned_propernoun": pruned["ndcg10_propernoun"],
        # the comparisons the claims test, each as one number (method - baseline, nDCG@10)
        "ndcg10_milco_minus_bm25": full["ndcg10_crosslingual"] - find_row(table, "bm25")["ndcg10_crosslingual"],
        "ndcg10_milco_minus_dense": full["ndcg10_crosslingual"] - dense["ndcg10_crosslingual"],
        "ndcg10_milco_minus_no_echo_propernoun": full["ndcg10_propernoun"] - no_echo["ndcg10_propernoun"],
        "ndcg10_milco_pruned_minus_dense": pruned["ndcg10_crosslingual"] - dense["ndcg10_crosslingual"],
        "headline_rho": headline_rho,
        "active_dims_unpruned": full["active_dims"],
        "active_dims_pruned": pruned["active_dims"],
        "index_bytes_milco_pruned": pruned["index_bytes"],
        "index_bytes_dense": dense["index_bytes"],
        "index_size_ratio_dense_over_milco": dense["index_bytes"] / pruned["index_bytes"],
        "latency_ms_milco_pruned": pruned["latency_ms"],
        "latency_ms_dense": dense["latency_ms"],
        "latency_ratio_dense_over_milco": dense["latency_ms"] / pruned["latency_ms"],
        "latency_note": "search only (query encoding excluded), one query at a time, one thread, fastest of "
                        "milco.retrieve.latency_repeats runs per query, mean over test queries; dense = exact faiss flat "
                        "inner product over 384-d MiniLM vectors, milco = inverted index at headline_rho; same retrieve run",
    }

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
            dense = index_stats.get(method, {})
            row |= {"active_dims": dense.get("dim"), "index_bytes": dense.get("index_bytes")}
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


def replicate_numbers(table: list[dict], rho: float) -> dict[str, float]:
    """One replicate's numbers at the operating point `rho` (nDCG@10 on the cross-lingual test queries unless named
    _propernoun): MILCO and its ablations pruned at rho, MILCO unpruned, every baseline; sizes and latencies."""
    pruned = find_row(table, "milco", rho)
    dense, trained = find_row(table, "dense"), find_row(table, "dense_trained")
    out = {"ndcg10_milco": find_row(table, "milco", 1.0)["ndcg10_crosslingual"], "ndcg10_milco_pruned": pruned["ndcg10_crosslingual"],
           "ndcg10_milco_pruned_propernoun": pruned["ndcg10_propernoun"]}
    for v in ("no_echo", "no_connector", "no_align"):
        row = find_row(table, v, rho)
        out |= {f"ndcg10_{v}_pruned": row["ndcg10_crosslingual"], f"ndcg10_{v}_pruned_propernoun": row["ndcg10_propernoun"]}
    for b in ("translate_bm25", "bm25", "dense", "dense_trained"):
        row = find_row(table, b)
        out |= {f"ndcg10_{b}": row["ndcg10_crosslingual"], f"ndcg10_{b}_propernoun": row["ndcg10_propernoun"]}
    out |= {"active_dims_pruned": pruned["active_dims"], "active_dims_unpruned": find_row(table, "milco", 1.0)["active_dims"],
            "index_bytes_milco_pruned": pruned["index_bytes"], "index_bytes_dense_trained": trained["index_bytes"],
            "index_bytes_dense": dense["index_bytes"], "dims_dense_trained": trained["active_dims"],
            "latency_ms_milco_pruned": pruned["latency_ms"], "latency_ms_dense_trained": trained["latency_ms"],
            "latency_ms_dense": dense["latency_ms"]}
    for b in ("dense_trained", "dense"):
        out[f"index_size_ratio_{b}_over_milco"] = out[f"index_bytes_{b}"] / out["index_bytes_milco_pruned"]
        out[f"latency_ratio_{b}_over_milco"] = out[f"latency_ms_{b}"] / out["latency_ms_milco_pruned"]
    return out


# the claims' paired comparisons: name -> (method key, baseline key), both per replicate on the same test queries
COMPARISONS: dict[str, tuple[str, str]] = {
    "milco_pruned_minus_translate_bm25": ("ndcg10_milco_pruned", "ndcg10_translate_bm25"),
    "milco_pruned_minus_dense_trained": ("ndcg10_milco_pruned", "ndcg10_dense_trained"),
    "milco_pruned_minus_dense_minilm": ("ndcg10_milco_pruned", "ndcg10_dense"),
    "milco_minus_no_echo_propernoun": ("ndcg10_milco_pruned_propernoun", "ndcg10_no_echo_pruned_propernoun"),
    "milco_minus_no_connector": ("ndcg10_milco_pruned", "ndcg10_no_connector_pruned"),
    "milco_minus_no_align": ("ndcg10_milco_pruned", "ndcg10_no_align_pruned"),
}


def headline(per: dict[str, dict[str, float]], headline_rho: float) -> dict[str, Any]:
    """Over the replicates (keys: matrix element keys): a 95 % t interval of every replicate number, and the paired
    differences the claims test (method - baseline in the same replicate)."""
    from paperdag.stats import interval, paired

    keys = list(per)
    out: dict[str, Any] = {"replicates": len(keys), "headline_rho": headline_rho,
                           "queries": "ndcg10_* on cross-lingual test queries (query language != document language) unless named "
                                      "_propernoun; _pruned: at headline_rho (documents and queries mass-pruned)"}
    for name in per[keys[0]]:
        out[name] = interval([per[k][name] for k in keys])
    for name, (method, baseline) in COMPARISONS.items():
        out[name] = paired([per[k][method] for k in keys], [per[k][baseline] for k in keys])
    out["latency_note"] = ("search only (query encoding excluded), one query at a time, one thread, fastest of "
                           "milco.retrieve.latency_repeats runs per query, mean over test queries; dense_trained = exact faiss flat "
                           "inner product over the fair dense baseline's h_m-d vectors, dense = over 384-d MiniLM vectors, milco = "
                           "inverted index at headline_rho; same retrieve run")
    return out


def mean_table(tables: list[list[dict]]) -> list[dict]:
    """The replicates' tables averaged row by row (same methods, variants and rhos in each): the plot's curve."""
    rows = []
    for group in zip(*tables, strict=True):
        row = dict(group[0])
        for k, v in row.items():
            if isinstance(v, float | int) and not isinstance(v, bool) and k != "rho":
                row[k] = float(np.mean([g[k] for g in group]))
        rows.append(row)
    return rows


def replicated(queries: dict, runs: dict, index_stats: dict, latency: dict, headline_rho: float) -> dict[str, Any]:
    """metrics.json: the headline over replicates, the mean table, and each replicate's table and numbers."""
    keys = list(runs)
    for name, gathered in (("queries", queries), ("index_stats", index_stats), ("latency", latency)):
        if list(gathered) != keys:
            raise ValueError(f"milco evaluate: {name} replicates {list(gathered)} differ from runs' {keys}")
    tables = {str(k): score_runs(queries[k], runs[k], index_stats[k], latency[k]) for k in keys}
    per = {k: replicate_numbers(t, headline_rho) for k, t in tables.items()}
    return {"headline": headline(per, headline_rho), "table": mean_table(list(tables.values())),
            "replicates": {k: {"numbers": per[k], "table": tables[k]} for k in tables}}

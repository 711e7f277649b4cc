"""Scoring the search protocol's results: per (dataset, scheme, method, param) relevance against the exact top-k,
diversity, Nash social welfare at eta and latency; the headline the claims read, the detail behind it, a demo query.

`params` below is the evaluate params: headline_dataset, headline_schemes, multi_scheme, demo_query, eta, k,
fetch_candidates.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from paperdag.methods.welfare_nns.welfare import nsw, one_hot
from paperdag.retrieval import (
    attribute_entropy,
    distinct_attributes,
    inverse_simpson,
    padded,
    recall_at_k_per_query,
)


def metrics(params: Any, results: pl.DataFrame, attributes: dict[str, np.ndarray], catalogue: dict[str, Any],
            products: pl.DataFrame) -> dict[str, Any]:
    """Per (dataset, scheme, method, param), means over queries of: ratio = sum sigma(S) / sum sigma(exact top-k),
    recall vs exact top-k, attribute entropy, inverse Simpson, distinct attributes, NSW (at eta), latency; the
    headline (the numbers pipelines/welfare_nns.yaml's claims read), the per-scheme detail behind it, the demo query."""
    table: list[dict[str, Any]] = []
    nsw_per_query: dict[tuple[str, str, str, float | None], np.ndarray] = {}
    for (dataset, scheme), rows in results.group_by("dataset", "scheme", maintain_order=True):
        spec = catalogue[dataset]["schemes"][scheme]
        scheme_attrs = attributes[f"{dataset}.{scheme}"]
        membership = scheme_attrs.astype(bool) if spec["kind"] == "multi" else one_hot(scheme_attrs, spec["c"])
        item_labels = _item_labels(membership)
        reference = rows.filter(pl.col("method") == "exact-top-k").sort("query")
        exact_ids = padded(reference["ids"].to_list(), -1).astype(np.int64)
        exact_mass = np.array([sum(s) for s in reference["sims"].to_list()])
        k = exact_ids.shape[1]
        for (method, param), group in rows.group_by("method", "param", maintain_order=True):
            group = group.sort("query")
            ids = padded(group["ids"].to_list(), -1, k).astype(np.int64)
            sims = padded(group["sims"].to_list(), 0.0, k)
            labels = _labels(ids, item_labels)
            u = np.einsum("qk,qkc->qc", sims, membership[np.maximum(ids, 0)] * (ids >= 0)[..., None])  # u_l per query
            welfare = np.array([nsw(row, params.eta) for row in u])
            nsw_per_query[(dataset, scheme, method, param)] = welfare
            table.append({
                "dataset": dataset,
                "scheme": scheme,
                "kind": spec["kind"],
                "c": spec["c"],
                "method": method,
                "param": param,
                "ratio": float(np.mean(sims.sum(axis=1) / exact_mass)),
                "recall": float(np.nanmean(recall_at_k_per_query(ids, exact_ids, k))),
                "entropy": float(np.nanmean(attribute_entropy(labels))),
                "inverse_simpson": float(np.nanmean(inverse_simpson(labels))),
                "distinct": float(np.mean(distinct_attributes(labels))),
                "nsw": float(welfare.mean()),
                "latency_ms": float(group["latency_ms"].mean()),
                "select_ms": float(group["select_ms"].mean()),
            })
    headline, detail = _headline(params, table, nsw_per_query, catalogue)
    demo = _demo(params, results, products, catalogue)
    if demo:
        headline[f"{params.demo_query}_topk_colours"] = len(set(demo["top-k colours"]))
        headline[f"{params.demo_query}_nash_colours"] = len(set(demo["nash-ann colours"]))
    return {"headline": headline, "table": table, "detail": detail, "demo": demo}


def _item_labels(membership: np.ndarray) -> np.ndarray:
    """(n, a) the attributes of each item, a = the most attributes one item has, -1 padded: a single-attribute item
    has its attribute, a multi-attribute item each of its attributes (entropy then counts attribute occurrences)."""
    per_item = int(membership.sum(axis=1).max())
    rank = np.cumsum(membership, axis=1)  # (n, c): how many of the item's attributes are <= l
    labels = np.full((len(membership), per_item), -1, dtype=np.int64)
    for slot in range(per_item):
        has = (rank == slot + 1) & membership
        labels[:, slot] = np.where(has.any(axis=1), has.argmax(axis=1), -1)
    return labels


def _labels(ids: np.ndarray, item_labels: np.ndarray) -> np.ndarray:
    """(m, k * a) attribute labels of each query's result set; -1 = empty slot."""
    m, k = ids.shape
    labels = np.where((ids >= 0)[..., None], item_labels[np.maximum(ids, 0)], -1)  # (m, k, a)
    return labels.reshape(m, k * item_labels.shape[1])


def _rows(table: list[dict[str, Any]], dataset: str, scheme: str, method: str) -> list[dict[str, Any]]:
    return [r for r in table if (r["dataset"], r["scheme"], r["method"]) == (dataset, scheme, method)]


def _one(table: list[dict[str, Any]], dataset: str, scheme: str, method: str, param: float | None = None) -> dict[str, Any]:
    found = [r for r in _rows(table, dataset, scheme, method) if r["param"] == param]
    if not found:
        raise ValueError(f"no {method} row (param {param}) for {dataset}/{scheme}: is it in welfare_nns.infer's sweeps?")
    return found[0]


def _dominates(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """a dominates b on (ratio, entropy): no worse on both, better on one (1e-9 slack for float noise)."""
    eps = 1e-9
    no_worse = a["ratio"] >= b["ratio"] - eps and a["entropy"] >= b["entropy"] - eps
    return no_worse and (a["ratio"] > b["ratio"] + eps or a["entropy"] > b["entropy"] + eps)


def _headline(params: Any, table: list[dict[str, Any]], nsw_per_query: dict[tuple, np.ndarray],
              catalogue: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The welfare_nns.md claims' numbers on the headline dataset's schemes, and the per-scheme detail behind them."""
    d, eta = params.headline_dataset, params.eta
    if d not in catalogue or not set(params.headline_schemes) <= set(catalogue[d]["schemes"]):
        raise ValueError(f"headline {d}/{params.headline_schemes}: not synthesized; check the synthesized datasets")
    detail: dict[str, Any] = {}
    for scheme in params.headline_schemes:
        nash = _rows(table, d, scheme, "nash-ann")
        pairs = [{"cap": div["param"], "eta": n["param"], "nash": [n["ratio"], n["entropy"]], "div": [div["ratio"], div["entropy"]]}
                 for div in _rows(table, d, scheme, "div-ann") for n in nash if _dominates(n, div)]
        ratio_q = nsw_per_query[(d, scheme, "nash-ann", eta)] / nsw_per_query[(d, scheme, "nash-ann-exact", eta)]
        topk, at_eta = _one(table, d, scheme, "top-k"), _one(table, d, scheme, "nash-ann", eta)
        detail[scheme] = {
            "c": catalogue[d]["schemes"][scheme]["c"],
            "nash_dominates_div": pairs,
            "nsw_vs_exact": float(ratio_q.mean()),
            "nsw_vs_exact_min_query": float(ratio_q.min()),
            "latency_ratio": at_eta["latency_ms"] / topk["latency_ms"],
            "nash_latency_ms": at_eta["latency_ms"],
            "topk_latency_ms": topk["latency_ms"],
            "nash_select_ms": at_eta["select_ms"],
        }
    first = params.headline_schemes[0]
    nash, topk = _one(table, d, first, "nash-ann", eta), _one(table, d, first, "top-k")
    greedy = _one(table, d, params.multi_scheme, "greedy-nsw", eta)
    worst_latency = max(params.headline_schemes, key=lambda s: detail[s]["latency_ratio"] / (detail[s]["c"] + 1))
    headline = {
        "dataset": d,
        "n": catalogue[d]["n"],
        "k": params.k,
        "eta": eta,
        "nash_vs_div_dominates": all(detail[s]["nash_dominates_div"] for s in params.headline_schemes),
        "nash_vs_div_pairs": "; ".join(
            f"{s}: " + (", ".join(f"k'={x['cap']:g} by eta={x['eta']:g}" for x in detail[s]["nash_dominates_div"]) or "none")
            for s in params.headline_schemes
        ),
        "nash_objective_vs_exact": min(detail[s]["nsw_vs_exact"] for s in params.headline_schemes),
        "nash_latency_ratio": detail[worst_latency]["latency_ratio"],
        "attributes_searched": detail[worst_latency]["c"],
        # the latency claim as one number: Nash-ANN / top-k latency minus its bound (attributes searched + 1), <= 0 holds
        "nash_latency_ratio_minus_bound": detail[worst_latency]["latency_ratio"] - (detail[worst_latency]["c"] + 1),
        "latency_scheme": worst_latency,
        "greedy_ms_per_query": greedy["select_ms"],
        "greedy_candidates": min(catalogue[d]["n"], params.fetch_candidates),
        "nash_approx_ratio": nash["ratio"],
        "nash_entropy": nash["entropy"],
        "topk_entropy": topk["entropy"],
        "nash_distinct": nash["distinct"],
        "topk_distinct": topk["distinct"],
        "headline_scheme": first,
    }
    return headline, detail


def _demo(params: Any, results: pl.DataFrame, products: pl.DataFrame, catalogue: dict[str, Any]) -> dict[str, Any]:
    """The products query `demo_query`: the titles plain top-k and Nash-ANN return (the one-colour failure)."""
    if "products" not in catalogue or params.demo_query not in catalogue["products"]["query_texts"]:
        return {}
    query = catalogue["products"]["query_texts"].index(params.demo_query)
    mine = results.filter((pl.col("dataset") == "products") & (pl.col("scheme") == "colour") & (pl.col("query") == query))
    titles, colours = products["title"].to_list(), products["colour"].to_list()
    demo: dict[str, Any] = {"query": params.demo_query}
    for name, method, param in (("top-k", "top-k", None), ("nash-ann", "nash-ann", params.eta)):
        row = mine.filter((pl.col("method") == method) & (pl.col("param").is_null() if param is None else pl.col("param") == param))
        demo[name] = [titles[i] for i in row["ids"][0]]
        demo[f"{name} colours"] = [colours[i] for i in row["ids"][0]]
    return demo

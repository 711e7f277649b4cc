"""The search protocol of the evaluation: every method on every query of a dataset, one query at a time as a service
answers them, each search and each selection timed best of N (paperdag.timing). Indexes come from paperdag.retrieval;
the selections (Nash-ANN, greedy, baselines) are this package's.

`p` below is the infer params: k, eta_sweep, caps, mmr_lambdas, mmr_candidates, p_sweep, p_eta, fetch_candidates,
topk_ef_sweep, similarity, tau, delta, timing_repeats.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl
from rich.progress import track

from paperdag.methods.welfare_nns.baselines import div_ann, mmr
from paperdag.methods.welfare_nns.greedy import welfare_greedy
from paperdag.methods.welfare_nns.nash import nash_select
from paperdag.methods.welfare_nns.welfare import cosine_from_scores, one_hot, sigma_of_cosine
from paperdag.timing import best_of, best_of_interleaved

RESULT_SCHEMA = {
    "dataset": pl.String,
    "scheme": pl.String,
    "method": pl.String,
    "param": pl.Float64,  # eta, k', lambda, p or the beam width ef (top-k-ef); null for plain top-k
    "query": pl.Int64,
    "ids": pl.List(pl.Int64),
    "sims": pl.List(pl.Float64),  # sigma(q, v) of the chosen items
    "cos": pl.List(pl.Float64),  # their raw cosine (relevance is reported on it)
    "latency_ms": pl.Float64,
    "select_ms": pl.Float64,
}

Search = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]  # (1, d) query -> (scores (1, k), ids (1, k))
Selector = Callable[[np.ndarray, np.ndarray], np.ndarray]  # (candidate ids, their sigma) -> chosen positions
Cosine = Callable[[np.ndarray], np.ndarray]  # index scores -> cos(q, v)
Sigma = Callable[[np.ndarray], np.ndarray]  # cos(q, v) -> sigma(q, v)


@dataclass
class Searched:
    """One search per query: the hits (ids, sigma, raw cosine), its wall time, and that of a search timed alongside it."""

    ids: list[np.ndarray]
    sims: list[np.ndarray]
    cos: list[np.ndarray]
    ms: np.ndarray
    alongside_ms: np.ndarray | None = None


def search_each_query(search: Search, queries: np.ndarray, cosine: Cosine, sigma: Sigma, repeats: int,
                      alongside: Search | None = None) -> Searched:
    """search(q) one query at a time, best of `repeats` wall times; padding (-1) dropped. `alongside(q)`, when given,
    is timed right after each run of search(q) (its results are not kept)."""
    ids, sims, cos, ms, other_ms = [], [], [], [], []
    for q in queries:
        fns = [lambda q=q: search(q[None, :])] + ([lambda q=q: alongside(q[None, :])] if alongside is not None else [])
        results, seconds = best_of_interleaved(fns, repeats)
        scores, found = results[0]
        ms.append(1e3 * seconds[0])
        other_ms.append(1e3 * seconds[-1])
        keep = found[0] >= 0
        ids.append(found[0][keep])
        cos.append(cosine(scores[0][keep]))
        sims.append(sigma(cos[-1]))
    return Searched(ids, sims, cos, np.asarray(ms), np.asarray(other_ms) if alongside is not None else None)


def emitter(rows: list[dict[str, Any]], dataset: str, scheme: str, repeats: int) -> Callable[..., None]:
    """emit(method, param, searched, select): run select(ids, sims) -> positions on every query's candidates (best
    of `repeats` wall times) and append one row per query (select None: the search's hits are the result)."""

    def emit(method: str, param: float | None, searched: Searched, select: Selector | None = None) -> None:
        for query, (ids, sims, cos, search_ms) in enumerate(zip(searched.ids, searched.sims, searched.cos, searched.ms, strict=True)):
            select_ms = 0.0
            chosen = np.arange(len(ids))
            if select is not None:
                chosen, seconds = best_of(lambda ids=ids, sims=sims: select(ids, sims), repeats)
                select_ms = 1e3 * seconds
            rows.append({
                "dataset": dataset, "scheme": scheme, "method": method, "param": None if param is None else float(param),
                "query": query, "ids": ids[chosen].tolist(), "sims": sims[chosen].tolist(), "cos": cos[chosen].tolist(),
                "latency_ms": float(search_ms) + select_ms, "select_ms": select_ms,
            })

    return emit


def run_dataset(p: Any, rows: list[dict[str, Any]], dataset: str, info: dict[str, Any], items: np.ndarray, queries: np.ndarray,
                attributes: dict[str, np.ndarray], ann: Any, per_attribute: Callable[[str], Any]) -> None:
    """Every method on every query of one dataset, a row per (scheme, method, param, query) appended to `rows`.

    ann: the dataset's global AnnIndex; per_attribute(scheme): its PerAttributeIndex. On single-attribute schemes
    top-k's search is timed interleaved with the per-attribute searches, query by query, so that the latency ratio
    compares runs under the same load."""
    from paperdag.retrieval import AnnIndex

    cosine = lambda scores: cosine_from_scores(scores, ann.metric)
    sigma = lambda cos: sigma_of_cosine(cos, p.similarity, p.tau, p.delta)
    exact = AnnIndex.build(items, kind="flat", metric=ann.metric)
    reps = p.timing_repeats
    exact_top_k = search_each_query(lambda q, ix=exact: ix.search(q, p.k), queries, cosine, sigma, reps)
    top_k_search = lambda q, ix=ann: ix.search(q, p.k)
    plain = search_each_query(top_k_search, queries, cosine, sigma, reps)
    pool = search_each_query(lambda q, ix=ann: ix.search(q, min(p.mmr_candidates, len(items))), queries, cosine, sigma, reps)
    fetch = search_each_query(lambda q, ix=ann: ix.search(q, min(p.fetch_candidates, len(items))), queries, cosine, sigma, reps)
    # the global index at several beam widths: the latency of plain top-k at the recall the per-attribute indexes reach
    widths = {ef: search_each_query(lambda q, ix=ann, ef=ef: ix.search(q, p.k, ef_search=ef), queries, cosine, sigma, reps)
              for ef in p.topk_ef_sweep}
    for scheme, spec in track(info["schemes"].items(), description=f"welfare_nns infer: {dataset}"):
        emit = emitter(rows, dataset, scheme, reps)
        emit("exact-top-k", None, exact_top_k)
        for ef, searched in widths.items():
            emit("top-k-ef", ef, searched)
        for lam in p.mmr_lambdas:
            emit("mmr", lam, pool, lambda i, s, lam=lam: mmr(s, items[i], p.k, lam))
        if spec["kind"] == "single":
            labels = attributes[f"{dataset}.{scheme}"]
            index = per_attribute(scheme)
            approx = search_each_query(lambda q, ix=index: _concat(ix.search_each(q, p.k)), queries, cosine, sigma, reps,
                                       alongside=top_k_search)
            emit("top-k", None, Searched(plain.ids, plain.sims, plain.cos, approx.alongside_ms))
            _single_attribute(p, emit, queries, labels, spec["c"], items, ann.metric, cosine, sigma, approx, fetch)
        else:
            emit("top-k", None, plain)
            membership = attributes[f"{dataset}.{scheme}"].astype(bool)
            for eta in p.eta_sweep:
                emit("greedy-nsw", eta, fetch, lambda i, s, eta=eta: welfare_greedy(s, membership[i], p.k, eta))
            for power in p.p_sweep:
                emit("p-fetch-union", power, fetch, lambda i, s, power=power: welfare_greedy(s, membership[i], p.k, p.p_eta, power))


def _single_attribute(p: Any, emit: Callable[..., None], queries: np.ndarray, labels: np.ndarray, c: int, items: np.ndarray,
                      metric: str, cosine: Cosine, sigma: Sigma, approx: Searched, fetch: Searched) -> None:
    """Nash-ANN over the per-attribute ANN lists (approx: each attribute's k nearest, concatenated) and over the
    exact oracle's, Div-ANN over the same lists, the per-attribute p-sweep and p-FetchUnion over the global fetch."""
    from paperdag.retrieval import PerAttributeIndex

    flat = PerAttributeIndex.build(items, labels, kind="flat", metric=metric)
    oracle = search_each_query(lambda q: _concat(flat.search_each(q, p.k)), queries, cosine, sigma, p.timing_repeats)
    for eta in p.eta_sweep:
        emit("nash-ann", eta, approx, lambda i, s, eta=eta: nash_select(s, labels[i], p.k, eta))
        emit("nash-ann-exact", eta, oracle, lambda i, s, eta=eta: nash_select(s, labels[i], p.k, eta))
    for cap in p.caps:
        emit("div-ann", cap, approx, lambda i, s, cap=cap: div_ann(s, labels[i], p.k, cap))
    for power in p.p_sweep:
        emit("p-mean", power, approx, lambda i, s, power=power: nash_select(s, labels[i], p.k, p.p_eta, power))
        emit("p-fetch-union", power, fetch, lambda i, s, power=power: welfare_greedy(s, one_hot(labels[i], c), p.k, p.p_eta, power))


def _concat(hits: dict[int, tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """search_each's per-attribute hits side by side: the candidates of Nash-ANN and Div-ANN alike."""
    scores = np.concatenate([s for s, _ in hits.values()], axis=1)
    ids = np.concatenate([i for _, i in hits.values()], axis=1)
    return scores, ids

"""Glue between the paperdag engine and the welfare_nns method: synthesize -> index -> infer -> evaluate.

The method (objectives, Nash-ANN, greedy, baselines) lives in paperdag.methods.welfare_nns and the ANN indexes in
paperdag.retrieval; these functions build the datasets, run every method per query with its wall time, and score.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl
from matplotlib.figure import Figure
from pydantic import NonNegativeFloat, PositiveFloat, PositiveInt
from rich.progress import track
from threadpoolctl import threadpool_limits

from paperdag.engine.params import Fraction
from paperdag.methods.welfare_nns import (
    CATEGORIES,
    COLOURS,
    clus_attributes,
    div_ann,
    gaussian_mixture,
    mmr,
    multi_label_membership,
    nash_select,
    nsw,
    one_hot,
    prob_attributes,
    product_queries,
    product_titles,
    sigma_from_scores,
    top_k,
    unit_rows,
    welfare_greedy,
)
from paperdag.retrieval import attribute_entropy, distinct_attributes, encode, inverse_simpson, load_encoder, recall_at_k_per_query

if TYPE_CHECKING:
    from paperdag.retrieval import AnnIndex, PerAttributeIndex

# The ANN indexes need faiss: they are imported inside index and infer, so that importing this module (every
# welfare_nns stage process does) stays cheap for synthesize and evaluate (tests/engine/test_imports.py).

DATASETS = ("gauss", "products", "digits")
# One BLAS / OpenMP thread for index builds (faiss's parallel HNSW insertion is not deterministic, and on 2 cores
# barely faster) and for every timed search, so that per-query latencies are not skewed by oversubscription.
THREADS = 1


# ---------------------------------------------------------------- synthesize


@dataclass(frozen=True)
class SynthesizeParams:
    datasets: list[str]
    gauss_n: PositiveInt
    gauss_dim: PositiveInt
    gauss_components: PositiveInt
    gauss_separation: NonNegativeFloat
    clus_attributes: PositiveInt
    prob_attributes: PositiveInt
    prob_skew: NonNegativeFloat
    n_queries: PositiveInt
    products_n: PositiveInt
    colour_skew: NonNegativeFloat
    encoder: str
    points_file: str
    seed: int


def synthesize(params: SynthesizeParams) -> dict[str, object]:
    """Unit-norm item vectors and queries per dataset, their attribute schemes, and a catalogue describing them.

    gauss: Gaussian mixture with schemes clus (k-means cluster), prob (skewed draw) and multi (both at once);
    products: MiniLM-embedded titles with colour (single) and colour+category (multi); digits: load_digits with its
    labels; file: a user's points (points_file) with their `attribute` column, or clus when it has none.
    """
    unknown = sorted(set(params.datasets) - set(DATASETS))
    if unknown:
        raise ValueError(f"params.yaml welfare_nns.synthesize.datasets: unknown {unknown}; choose from {DATASETS}")
    p = params
    vectors: dict[str, np.ndarray] = {}
    attributes: dict[str, np.ndarray] = {}
    catalogue: dict[str, Any] = {}
    products = pl.DataFrame(schema={"title": pl.String, "colour": pl.String, "category": pl.String})

    def add(name: str, items: np.ndarray, queries: np.ndarray, schemes: dict[str, tuple[np.ndarray, list[str]]], **extra: Any) -> None:
        vectors[f"{name}.items"], vectors[f"{name}.queries"] = unit_rows(items), unit_rows(queries)
        catalogue[name] = {"n": len(items), "dim": items.shape[1], "queries": len(queries), "schemes": {}, **extra}
        for scheme, (values, names) in schemes.items():
            attributes[f"{name}.{scheme}"] = values.astype(np.uint8 if values.ndim == 2 else np.int64)
            kind = "multi" if values.ndim == 2 else "single"
            catalogue[name]["schemes"][scheme] = {"kind": kind, "c": len(names), "names": names}

    if "gauss" in p.datasets:
        points = gaussian_mixture(p.gauss_n + p.n_queries, p.gauss_dim, p.gauss_components, p.gauss_separation, p.seed)
        items, queries = points[: p.gauss_n], points[p.gauss_n :]  # queries: fresh draws from the same mixture
        clus = clus_attributes(unit_rows(items), p.clus_attributes, p.seed)
        prob = prob_attributes(p.gauss_n, p.prob_attributes, p.prob_skew, p.seed + 1)
        clus_names = [f"cluster {i}" for i in range(p.clus_attributes)]
        prob_names = [f"p{i}" for i in range(p.prob_attributes)]
        multi = multi_label_membership((clus, p.clus_attributes), (prob, p.prob_attributes))
        add("gauss", items, queries, {"clus": (clus, clus_names), "prob": (prob, prob_names), "multi": (multi, clus_names + prob_names)})
    if "products" in p.datasets:
        titles, colours, categories = product_titles(p.products_n, p.colour_skew, p.seed + 2)
        texts = product_queries()
        encoder = load_encoder(p.encoder)
        items, queries = encode(encoder, titles), encode(encoder, texts, progress=False)
        both = multi_label_membership((colours, len(COLOURS)), (categories, len(CATEGORIES)))
        add("products", items, queries, {"colour": (colours, list(COLOURS)), "colour+category": (both, list(COLOURS + CATEGORIES))},
            query_texts=texts, encoder=p.encoder)
        products = pl.DataFrame(
            {"title": titles, "colour": [COLOURS[i] for i in colours], "category": [CATEGORIES[i] for i in categories]}
        )
    if "digits" in p.datasets:
        from sklearn.datasets import load_digits

        digits = load_digits()  # (1797, 64), ships offline; held-out digits are the queries
        order = np.random.default_rng(p.seed + 3).permutation(len(digits.target))
        held_out = min(p.n_queries, len(order) // 5)
        rows, query_rows = order[held_out:], order[:held_out]
        add("digits", digits.data[rows], digits.data[query_rows], {"label": (digits.target[rows], [str(d) for d in range(10)])})
    if p.points_file:
        items, labels = _read_points_file(p.points_file)
        order = np.random.default_rng(p.seed + 4).permutation(len(items))
        held_out = min(p.n_queries, len(items) // 5)
        rows, query_rows = order[held_out:], order[:held_out]
        if labels is None:
            scheme, labels, c = "clus", clus_attributes(unit_rows(items), p.clus_attributes, p.seed), p.clus_attributes
        else:
            scheme, c = "attribute", int(labels.max()) + 1
        add("file", items[rows], items[query_rows], {scheme: (labels[rows], [str(a) for a in range(c)])}, source=p.points_file)
    return {"vectors": vectors, "attributes": attributes, "catalogue": catalogue, "products": products}


def _read_points_file(path: str) -> tuple[np.ndarray, np.ndarray | None]:
    """A user's points: .npy (n, d), or Parquet with a list column `vector` (or only numeric columns) and an
    optional integer column `attribute`."""
    source = Path(path)
    if not source.exists():
        raise FileNotFoundError(f"params.yaml welfare_nns.synthesize.points_file: {path} does not exist (use \"\" for none)")
    if source.suffix == ".npy":
        points, labels = np.load(source, allow_pickle=False), None
    elif source.suffix == ".parquet":
        table = pl.read_parquet(source)
        labels = table["attribute"].to_numpy().astype(np.int64) if "attribute" in table.columns else None
        table = table.drop("attribute", strict=False)
        points = np.array(table["vector"].to_list()) if "vector" in table.columns else table.to_numpy()
    else:
        raise ValueError(f"params.yaml welfare_nns.synthesize.points_file: {path} must end in .npy or .parquet")
    if points.ndim != 2 or len(points) < 10:
        raise ValueError(f"{path}: expected a 2-D array of at least 10 points, got shape {points.shape}")
    if labels is not None and labels.min() < 0:
        raise ValueError(f"{path}: column `attribute` must hold non-negative integers")
    return points.astype(np.float32), labels


def _schemes(catalogue: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for dataset, info in catalogue.items():
        for scheme, spec in info["schemes"].items():
            yield dataset, scheme, spec


# ---------------------------------------------------------------- index


@dataclass(frozen=True)
class IndexParams:
    kind: str
    metric: str
    hnsw_m: PositiveInt
    ef_construction: PositiveInt
    ef_search: PositiveInt
    nlist: PositiveInt
    nprobe: PositiveInt
    seed: int


def index(params: IndexParams, vectors: dict[str, np.ndarray], attributes: dict[str, np.ndarray], catalogue: dict[str, Any]) -> dict[str, object]:
    """One global ANN index per dataset (<dataset>/) and one PerAttributeIndex per single-attribute scheme
    (<dataset>.<scheme>/), with their build times."""
    from paperdag.retrieval import AnnIndex, PerAttributeIndex

    kw = {"metric": params.metric, "hnsw_m": params.hnsw_m, "ef_construction": params.ef_construction,
          "ef_search": params.ef_search, "nlist": params.nlist, "nprobe": params.nprobe, "seed": params.seed}
    global_indexes: dict[str, AnnIndex] = {}
    per_attribute: dict[str, PerAttributeIndex] = {}
    stats: dict[str, dict[str, float]] = {}
    with threadpool_limits(limits=THREADS):
        for dataset in track(list(catalogue), description="welfare_nns index: global"):
            start = time.perf_counter()
            global_indexes[dataset] = AnnIndex.build(vectors[f"{dataset}.items"], kind=params.kind, **kw)
            stats[dataset] = {"n": catalogue[dataset]["n"], "build_s": time.perf_counter() - start}
        for dataset, scheme, spec in _schemes(catalogue):
            if spec["kind"] != "single":
                continue  # multi-attribute items: one global candidate fetch, no per-attribute index
            start = time.perf_counter()
            per_attribute[f"{dataset}.{scheme}"] = PerAttributeIndex.build(
                vectors[f"{dataset}.items"], attributes[f"{dataset}.{scheme}"], kind=params.kind, **kw
            )
            stats[f"{dataset}.{scheme}"] = {"n": catalogue[dataset]["n"], "c": spec["c"], "build_s": time.perf_counter() - start}
    return {
        "global_index": _writer(global_indexes),
        "attribute_index": _writer(per_attribute),
        "index_stats": stats,
    }


def _writer(indexes: dict[str, AnnIndex] | dict[str, PerAttributeIndex]) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        for name, ix in indexes.items():
            ix.save(Path(path) / name)

    return write


# ---------------------------------------------------------------- infer: every method, per query, timed


@dataclass(frozen=True)
class InferParams:
    k: PositiveInt
    eta: PositiveFloat
    eta_sweep: list[PositiveFloat]
    caps: list[PositiveInt]
    mmr_lambdas: list[Fraction]
    mmr_candidates: PositiveInt
    p_sweep: list[float]
    p_eta: PositiveFloat
    fetch_candidates: PositiveInt
    delta: PositiveFloat
    timing_repeats: PositiveInt
    seed: int


@dataclass
class _Searched:
    """One search per query: the hits (ids, sigma), its wall time, and that of a search timed alongside it."""

    ids: list[np.ndarray]
    sims: list[np.ndarray]
    ms: np.ndarray
    alongside_ms: np.ndarray | None = None


def infer(
    params: InferParams,
    vectors: dict[str, np.ndarray],
    attributes: dict[str, np.ndarray],
    catalogue: dict[str, Any],
    global_index: Path,
    attribute_index: Path,
) -> dict[str, object]:
    """Per dataset and scheme, every method on every query: the chosen ids, their sigma, and wall times
    (latency_ms = its searches + its selection; select_ms = the selection step alone), each the best of
    timing_repeats runs. One thread throughout. On single-attribute schemes top-k's search is timed interleaved with
    the per-attribute searches, query by query, so that the latency ratio compares runs under the same load."""
    from paperdag.retrieval import AnnIndex, PerAttributeIndex

    p = params
    if p.eta not in p.eta_sweep:
        raise ValueError(f"params.yaml welfare_nns.infer: eta = {p.eta} must be in eta_sweep {p.eta_sweep} (the headline runs)")
    rows: list[dict[str, Any]] = []
    with threadpool_limits(limits=THREADS):
        for dataset, info in catalogue.items():
            items, queries = vectors[f"{dataset}.items"], vectors[f"{dataset}.queries"]
            ann = AnnIndex.load(global_index / dataset)
            sigma = _sigma(ann.metric, p.delta)
            exact = AnnIndex.build(items, kind="flat", metric=ann.metric)
            reps = p.timing_repeats
            exact_top_k = _search_each_query(lambda q, ix=exact: ix.search(q, p.k), queries, sigma, reps)
            top_k_search = lambda q, ix=ann: ix.search(q, p.k)  # noqa: E731
            plain = _search_each_query(top_k_search, queries, sigma, reps)
            pool = _search_each_query(lambda q, ix=ann: ix.search(q, min(p.mmr_candidates, len(items))), queries, sigma, reps)
            fetch = _search_each_query(lambda q, ix=ann: ix.search(q, min(p.fetch_candidates, len(items))), queries, sigma, reps)
            for scheme, spec in track(info["schemes"].items(), description=f"welfare_nns infer: {dataset}"):
                emit = _emitter(rows, dataset, scheme, reps)
                emit("exact-top-k", None, exact_top_k)
                for lam in p.mmr_lambdas:
                    emit("mmr", lam, pool, lambda i, s, lam=lam: mmr(s, items[i], p.k, lam))
                if spec["kind"] == "single":
                    labels = attributes[f"{dataset}.{scheme}"]
                    per_attribute = PerAttributeIndex.load(attribute_index / f"{dataset}.{scheme}")
                    approx = _search_each_query(lambda q, ix=per_attribute: _concat(ix.search_each(q, p.k)), queries, sigma, reps,
                                                alongside=top_k_search)
                    emit("top-k", None, _Searched(plain.ids, plain.sims, approx.alongside_ms))
                    _single_attribute(p, emit, queries, labels, spec["c"], items, ann.metric, sigma, approx, fetch)
                else:
                    emit("top-k", None, plain)
                    membership = attributes[f"{dataset}.{scheme}"].astype(bool)
                    for eta in p.eta_sweep:
                        emit("greedy-nsw", eta, fetch, lambda i, s, eta=eta: welfare_greedy(s, membership[i], p.k, eta))
                    for power in p.p_sweep:
                        emit("p-fetch-union", power, fetch, lambda i, s, power=power: welfare_greedy(s, membership[i], p.k, p.p_eta, power))
    return {"results": pl.DataFrame(rows, schema=_RESULT_SCHEMA)}


_RESULT_SCHEMA = {
    "dataset": pl.String,
    "scheme": pl.String,
    "method": pl.String,
    "param": pl.Float64,  # eta, k', lambda or p; null for plain top-k
    "query": pl.Int64,
    "ids": pl.List(pl.Int64),
    "sims": pl.List(pl.Float64),
    "latency_ms": pl.Float64,
    "select_ms": pl.Float64,
}


def _sigma(metric: str, delta: float) -> Callable[[np.ndarray], np.ndarray]:
    return lambda scores: sigma_from_scores(scores, metric, delta)


Search = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]  # (1, d) query -> (scores (1, k), ids (1, k))


def _search_each_query(search: Search, queries: np.ndarray, sigma: Callable[[np.ndarray], np.ndarray], repeats: int,
                       alongside: Search | None = None) -> _Searched:
    """search(q) one query at a time (as a service answers them), best of `repeats` wall times; padding (-1)
    dropped. `alongside(q)`, when given, is timed right after each run of search(q) (its results are not kept)."""
    ids, sims, ms, other_ms = [], [], [], []
    for q in queries:
        best, best_other = math.inf, math.inf
        for _ in range(max(1, repeats)):
            start = time.perf_counter()
            scores, found = search(q[None, :])
            best = min(best, time.perf_counter() - start)
            if alongside is not None:
                start = time.perf_counter()
                alongside(q[None, :])
                best_other = min(best_other, time.perf_counter() - start)
        ms.append(1e3 * best)
        other_ms.append(1e3 * best_other)
        keep = found[0] >= 0
        ids.append(found[0][keep])
        sims.append(sigma(scores[0][keep]))
    return _Searched(ids, sims, np.asarray(ms), np.asarray(other_ms) if alongside is not None else None)


Selector = Callable[[np.ndarray, np.ndarray], np.ndarray]  # (candidate ids, their sigma) -> chosen positions


def _emitter(rows: list[dict[str, Any]], dataset: str, scheme: str, repeats: int) -> Callable[..., None]:
    """emit(method, param, searched, select): run select(ids, sims) -> positions on every query's candidates (best
    of `repeats` wall times) and append one row per query (select None: the search's hits are the result)."""

    def emit(method: str, param: float | None, searched: _Searched, select: Selector | None = None) -> None:
        for query, (ids, sims, search_ms) in enumerate(zip(searched.ids, searched.sims, searched.ms, strict=True)):
            select_ms = 0.0
            chosen = np.arange(len(ids))
            if select is not None:
                best = math.inf
                for _ in range(max(1, repeats)):
                    start = time.perf_counter()
                    chosen = select(ids, sims)
                    best = min(best, time.perf_counter() - start)
                select_ms = 1e3 * best
            rows.append({
                "dataset": dataset, "scheme": scheme, "method": method, "param": None if param is None else float(param),
                "query": query, "ids": ids[chosen].tolist(), "sims": sims[chosen].tolist(),
                "latency_ms": float(search_ms) + select_ms, "select_ms": select_ms,
            })

    return emit


def _single_attribute(p: InferParams, emit: Callable[..., None], queries: np.ndarray, labels: np.ndarray, c: int,
                      items: np.ndarray, metric: str, sigma: Callable[[np.ndarray], np.ndarray],
                      approx: _Searched, fetch: _Searched) -> None:
    """Nash-ANN over the per-attribute ANN lists (approx: each attribute's k nearest, concatenated) and over the
    exact oracle's, Div-ANN over the same lists, the per-attribute p-sweep and p-FetchUnion over the global fetch."""
    from paperdag.retrieval import PerAttributeIndex

    flat = PerAttributeIndex.build(items, labels, kind="flat", metric=metric)
    oracle = _search_each_query(lambda q: _concat(flat.search_each(q, p.k)), queries, sigma, p.timing_repeats)
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


# ---------------------------------------------------------------- evaluate


@dataclass(frozen=True)
class EvaluateParams:
    headline_dataset: str
    headline_schemes: list[str]
    multi_scheme: str
    demo_query: str
    eta: PositiveFloat  # welfare_nns.infer.eta: the NSW every row is scored at
    k: PositiveInt  # welfare_nns.infer.k
    fetch_candidates: PositiveInt  # welfare_nns.infer.fetch_candidates: L of the multi-attribute greedy


def evaluate(params: EvaluateParams, results: pl.DataFrame, attributes: dict[str, np.ndarray], catalogue: dict[str, Any],
             products: pl.DataFrame) -> dict[str, object]:
    """Per (dataset, scheme, method, param), means over queries of: ratio = sum sigma(S) / sum sigma(exact top-k),
    recall vs exact top-k, attribute entropy, inverse Simpson, distinct attributes, NSW (at eta), latency; the
    headline (the numbers pipelines/welfare_nns.yaml's claims read); Pareto plots of ratio vs entropy."""
    table: list[dict[str, Any]] = []
    nsw_per_query: dict[tuple[str, str, str, float | None], np.ndarray] = {}
    for (dataset, scheme), rows in results.group_by("dataset", "scheme", maintain_order=True):
        spec = catalogue[dataset]["schemes"][scheme]
        scheme_attrs = attributes[f"{dataset}.{scheme}"]
        membership = scheme_attrs.astype(bool) if spec["kind"] == "multi" else one_hot(scheme_attrs, spec["c"])
        item_labels = _item_labels(membership)
        reference = rows.filter(pl.col("method") == "exact-top-k").sort("query")
        exact_ids = _padded(reference["ids"].to_list(), -1).astype(np.int64)
        exact_mass = np.array([sum(s) for s in reference["sims"].to_list()])
        k = exact_ids.shape[1]
        for (method, param), group in rows.group_by("method", "param", maintain_order=True):
            group = group.sort("query")
            ids = _padded(group["ids"].to_list(), -1, k).astype(np.int64)
            sims = _padded(group["sims"].to_list(), 0.0, k)
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
    metrics = {"headline": headline, "table": table, "detail": detail, "demo": demo}
    return {"metrics": metrics, "pareto": _pareto_plot(table)}


def _padded(lists: list[list[Any]], fill: float, width: int | None = None) -> np.ndarray:
    width = width or max(len(x) for x in lists)
    out = np.full((len(lists), width), fill, dtype=np.float64)
    for i, x in enumerate(lists):
        out[i, : len(x)] = x
    return out


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


def _headline(params: EvaluateParams, table: list[dict[str, Any]], nsw_per_query: dict[tuple, np.ndarray],
              catalogue: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The welfare_nns.md claims' numbers on the headline dataset's schemes, and the per-scheme detail behind them."""
    d, eta = params.headline_dataset, params.eta
    if d not in catalogue or not set(params.headline_schemes) <= set(catalogue[d]["schemes"]):
        raise ValueError(f"params.yaml welfare_nns.evaluate: {d}/{params.headline_schemes} not synthesized; "
                         "check welfare_nns.synthesize.datasets")
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


def _demo(params: EvaluateParams, results: pl.DataFrame, products: pl.DataFrame, catalogue: dict[str, Any]) -> dict[str, Any]:
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


_STYLE = {
    "exact-top-k": ("black", "*"), "top-k": ("gray", "o"), "div-ann": ("tab:orange", "s"), "mmr": ("tab:green", "^"),
    "nash-ann": ("tab:blue", "D"), "nash-ann-exact": ("tab:cyan", "d"), "p-mean": ("tab:purple", "v"),
    "p-fetch-union": ("tab:pink", "P"), "greedy-nsw": ("tab:red", "X"),
}


def _pareto_plot(table: list[dict[str, Any]]) -> Figure:
    """Relevance (ratio) vs diversity (entropy) per dataset/scheme: one point per parameter value, a line per method."""
    panels = list(dict.fromkeys((r["dataset"], r["scheme"]) for r in table))
    cols = 3
    nrows = math.ceil(len(panels) / cols)
    fig = Figure(figsize=(5 * cols, 4 * nrows + 0.6), layout="constrained")
    axes = fig.subplots(nrows, cols, squeeze=False).ravel()
    for ax, (dataset, scheme) in zip(axes, panels, strict=False):
        mine = [r for r in table if (r["dataset"], r["scheme"]) == (dataset, scheme)]
        for method, (color, marker) in _STYLE.items():
            curve = sorted((r for r in mine if r["method"] == method), key=lambda r: r["param"] if r["param"] is not None else 0)
            if not curve:
                continue
            xs, ys = [r["ratio"] for r in curve], [r["entropy"] for r in curve]
            ax.plot(xs, ys, color=color, marker=marker, markersize=5, linewidth=1, label=method,
                    linestyle="--" if method == "nash-ann-exact" else "-", alpha=0.9)
            if len(curve) > 1:
                for r in curve:
                    ax.annotate(f"{r['param']:g}", (r["ratio"], r["entropy"]), fontsize=6, color=color,
                                xytext=(3, 2), textcoords="offset points")
        first = mine[0]
        ax.set_title(f"{dataset} / {scheme} ({first['kind']}, c={first['c']})", fontsize=10, loc="left")
        ax.set_xlabel("approximation ratio (sum sigma / exact top-k)")
        ax.set_ylabel("attribute entropy (nats)")
        ax.grid(alpha=0.3)
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    handles = {}
    for ax in axes[: len(panels)]:
        for h, label in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, h)
    fig.legend(list(handles.values()), list(handles), loc="outside upper center", ncols=len(handles), fontsize=8)
    return fig

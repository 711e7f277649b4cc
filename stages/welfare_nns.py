"""Glue between the paperdag engine and the welfare_nns method: synthesize -> index -> infer -> evaluate.

The method (objectives, Nash-ANN, greedy, baselines) lives in paperdag.methods.welfare_nns and the ANN indexes in
paperdag.retrieval; these functions build the datasets, run every method per query with its wall time, and score.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import numpy as np
import polars as pl
from pydantic import AfterValidator, Field, NonNegativeFloat, PositiveFloat, PositiveInt
from rich.progress import track
from threadpoolctl import threadpool_limits

from paperdag.engine.params import Fraction
from paperdag.points import points_path, read_points

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
    datasets: list[Literal[DATASETS]]
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
    points_file: Annotated[str, AfterValidator(points_path)]
    seed: int


def synthesize(params: SynthesizeParams) -> dict[str, object]:
    """Unit-norm item vectors and queries per dataset, their attribute schemes, a catalogue describing them, and the
    product titles (paperdag.methods.welfare_nns.datasets); a user's points_file is the dataset `file`."""
    from paperdag.methods.welfare_nns.datasets import build_datasets

    user = None
    if params.points_file:
        items, labels = read_points(params.points_file, "params.yaml welfare_nns.synthesize.points_file", min_points=10)
        user = (items.astype(np.float32), labels)
    return build_datasets(params, user)


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
    from paperdag.methods.welfare_nns.indexes import build_indexes

    with threadpool_limits(limits=THREADS):
        global_indexes, per_attribute, stats = build_indexes(
            vectors, attributes, catalogue, params.kind, progress=lambda ds: track(ds, description="welfare_nns index: global"),
            metric=params.metric, hnsw_m=params.hnsw_m, ef_construction=params.ef_construction, ef_search=params.ef_search,
            nlist=params.nlist, nprobe=params.nprobe, seed=params.seed)
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
    topk_ef_sweep: list[PositiveInt]
    # welfare.SIMILARITIES, written out: importing it would make every stage depend on methods/
    similarity: Literal["exp_cos", "one_plus_cos", "inverse_l2"]
    tau: PositiveFloat
    delta: PositiveFloat
    timing_repeats: PositiveInt
    seed: int

    def __post_init__(self) -> None:
        if self.eta not in self.eta_sweep:
            raise ValueError("eta", f"{self.eta} must be in eta_sweep {self.eta_sweep} (the headline runs)")


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
    from paperdag.methods.welfare_nns.protocol import RESULT_SCHEMA, run_dataset
    from paperdag.retrieval import AnnIndex, PerAttributeIndex

    rows: list[dict[str, Any]] = []
    with threadpool_limits(limits=THREADS):
        for dataset, info in catalogue.items():
            run_dataset(params, rows, dataset, info, vectors[f"{dataset}.items"], vectors[f"{dataset}.queries"], attributes,
                        AnnIndex.load(global_index / dataset),
                        lambda scheme, d=dataset: PerAttributeIndex.load(attribute_index / f"{d}.{scheme}"))
    return {"results": pl.DataFrame(rows, schema=RESULT_SCHEMA)}


# ---------------------------------------------------------------- evaluate


@dataclass(frozen=True)
class EvaluateParams:
    headline_dataset: Literal[DATASETS + ("file",)]
    headline_schemes: list[str]
    multi_scheme: str
    demo_query: str
    replicates: Annotated[int, Field(ge=5)]  # disjoint query sets the claims' intervals are over
    eta: PositiveFloat  # welfare_nns.infer.eta: the NSW every row is scored at
    k: PositiveInt  # welfare_nns.infer.k
    fetch_candidates: PositiveInt  # welfare_nns.infer.fetch_candidates: L of the multi-attribute greedy


def evaluate(params: EvaluateParams, results: pl.DataFrame, attributes: dict[str, np.ndarray], catalogue: dict[str, Any],
             products: pl.DataFrame) -> dict[str, object]:
    """Per (dataset, scheme, method, param), means over queries of: ratio = sum sigma(S) / sum sigma(exact top-k),
    recall vs exact top-k, attribute entropy, inverse Simpson, distinct attributes, NSW (at eta), latency; the
    headline (the numbers pipelines/welfare_nns.yaml's claims read); Pareto plots of ratio vs entropy."""
    from paperdag.methods.welfare_nns.evaluation import metrics
    from paperdag.methods.welfare_nns.figures import pareto

    scored = metrics(params, results, attributes, catalogue, products)
    return {"metrics": scored, "pareto": pareto(scored["table"])}

"""The indexes the protocol searches: one global ANN index per dataset, and one per-attribute index (an index per
attribute value, the paper's exact-per-attribute setting) per single-attribute scheme, with their build times."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from paperdag.retrieval import AnnIndex, PerAttributeIndex


def build_indexes(vectors: dict[str, np.ndarray], attributes: dict[str, np.ndarray], catalogue: dict[str, Any], kind: str,
                  progress: Callable[[list], Iterable] = iter, **options: Any,
                  ) -> tuple[dict[str, AnnIndex], dict[str, PerAttributeIndex], dict[str, dict[str, float]]]:
    """{dataset: global index}, {"<dataset>.<scheme>": per-attribute index} for the single-attribute schemes (a
    multi-attribute item has one global candidate fetch, no per-attribute index), and each one's n, c and build_s.
    `options` are paperdag.retrieval's index options (metric, hnsw_m, ef_construction, ef_search, nlist, nprobe, seed)."""
    from paperdag.retrieval import AnnIndex, PerAttributeIndex

    global_indexes: dict[str, AnnIndex] = {}
    per_attribute: dict[str, PerAttributeIndex] = {}
    stats: dict[str, dict[str, float]] = {}
    for dataset in progress(list(catalogue)):
        start = time.perf_counter()
        global_indexes[dataset] = AnnIndex.build(vectors[f"{dataset}.items"], kind=kind, **options)
        stats[dataset] = {"n": catalogue[dataset]["n"], "build_s": time.perf_counter() - start}
    for dataset, info in catalogue.items():
        for scheme, spec in info["schemes"].items():
            if spec["kind"] != "single":
                continue
            start = time.perf_counter()
            per_attribute[f"{dataset}.{scheme}"] = PerAttributeIndex.build(
                vectors[f"{dataset}.items"], attributes[f"{dataset}.{scheme}"], kind=kind, **options)
            stats[f"{dataset}.{scheme}"] = {"n": info["n"], "c": spec["c"], "build_s": time.perf_counter() - start}
    return global_indexes, per_attribute, stats

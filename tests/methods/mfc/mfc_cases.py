"""Small instances of every metric, and brute-force references, for the mfc tests."""

from __future__ import annotations

import numpy as np

from paperdag.methods.mfc import (
    CallableSpace,
    EditSpace,
    EuclideanSpace,
    HammingSpace,
    JaccardSpace,
    LearnedForest,
    MetricSpace,
    bit_strings,
    edited_strings,
    gaussian_mixture,
    item_sets,
    uniform_cube,
)


def manhattan(x: tuple[float, ...], y: tuple[float, ...]) -> float:
    return float(sum(abs(a - b) for a, b in zip(x, y, strict=True)))


def make_space(kind: str, seed: int = 0) -> MetricSpace:
    """A ~60-100 point instance of one metric family."""
    if kind == "gaussian":
        return EuclideanSpace(gaussian_mixture(100, 3, 4, 5.0, seed))
    if kind == "uniform":
        return EuclideanSpace(uniform_cube(90, 2, seed))
    if kind == "hamming":
        return HammingSpace(bit_strings(90, 32, 4, 0.1, seed))
    if kind == "jaccard":
        return JaccardSpace.from_sets(item_sets(80, 60, 4, 6, seed))
    if kind == "edit":
        return EditSpace(edited_strings(70, 10, 4, 3, seed))
    if kind == "callable":
        pts = np.random.default_rng(seed).random((50, 3))
        return CallableSpace([tuple(p) for p in pts], manhattan)
    raise ValueError(kind)


KINDS = ("gaussian", "uniform", "hamming", "jaccard", "edit", "callable")


def full_matrix(space: MetricSpace) -> np.ndarray:
    """All n^2 distances, uncounted."""
    return space._pairwise(space)


def brute_optimal_completion(space: MetricSpace, forest: LearnedForest) -> float:
    """w(F_t) + the least weight of edges joining F_t's components: Kruskal over all n^2 pairs, components pre-merged."""
    dist = full_matrix(space)
    parent = list(forest.labels)  # union-find over components
    comp_parent = list(range(forest.t))

    def find(x: int) -> int:
        while comp_parent[x] != x:
            x = comp_parent[x]
        return x

    iu, ju = np.triu_indices(len(space), k=1)
    added = 0.0
    joins = 0
    for e in np.argsort(dist[iu, ju], kind="stable"):
        a, b = find(parent[iu[e]]), find(parent[ju[e]])
        if a != b:
            comp_parent[a] = b
            added += dist[iu[e], ju[e]]
            joins += 1
            if joins == forest.t - 1:
                break
    return forest.cost + added

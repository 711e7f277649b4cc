"""The learned (predicted) forest F_t: Gonzalez k-center into t clusters P_1..P_t, then an exact MST T_i
inside each cluster; optional noise reassigns a fraction of points at random so that gamma > 1.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from paperdag.methods.mfc.metrics import MetricSpace
from paperdag.methods.mfc.mst import exact_mst


@dataclass(frozen=True)
class LearnedForest:
    """Components P_1..P_t (as labels) and the union of their trees T_1..T_t."""

    labels: np.ndarray  # (n,) component of each point, 0..t-1, every component non-empty
    edges: np.ndarray  # (n - t, 2) point pairs of the trees T_i
    weights: np.ndarray  # (n - t,)

    @property
    def t(self) -> int:
        return int(self.labels.max()) + 1 if len(self.labels) else 0

    @property
    def cost(self) -> float:
        """w(F_t) = sum_i w(T_i)."""
        return float(self.weights.sum())

    def members(self) -> list[np.ndarray]:
        """Point ids of each component P_i, in increasing order."""
        order = np.argsort(self.labels, kind="stable")
        starts = np.searchsorted(self.labels[order], np.arange(self.t + 1))
        return [order[starts[i] : starts[i + 1]] for i in range(self.t)]


def k_center(space: MetricSpace, t: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Gonzalez farthest-first traversal: t centers (a 2-approximate k-center) and each point's nearest center.

    Costs n * t distance calls. Returns (centers (t,), labels (n,) in 0..t-1).
    """
    n = len(space)
    t = min(t, n)
    centers = np.zeros(t, dtype=np.int64)
    centers[0] = rng.integers(n)
    nearest = space.take(centers[:1]).pairwise(space)[0]  # (n,) d(p, closest center)
    labels = np.zeros(n, dtype=np.int64)
    for c in range(1, t):
        centers[c] = int(np.argmax(nearest))
        dist = space.take(centers[c : c + 1]).pairwise(space)[0]
        closer = dist < nearest
        nearest[closer] = dist[closer]
        labels[closer] = c
    return centers, labels


def learned_forest(space: MetricSpace, t: int, noise: float = 0.0, seed: int = 0) -> LearnedForest:
    """F_t: k-center into t clusters, a fraction `noise` of points moved to a random cluster, an MST per cluster."""
    if not 0.0 <= noise <= 1.0:
        raise ValueError(f"noise must be a fraction in [0, 1], got {noise}")
    rng = np.random.default_rng(seed)
    _, labels = k_center(space, t, rng)
    if noise > 0.0:
        moved = rng.random(len(labels)) < noise
        labels[moved] = rng.integers(labels.max() + 1, size=int(moved.sum()))
        labels = np.unique(labels, return_inverse=True)[1]  # drop clusters the noise emptied
    return forest_of(space, labels)


def trained_forest(space: MetricSpace, points_per_cluster: int, noise: float, seed: int) -> tuple[LearnedForest, dict]:
    """The train stage's F_t: t = ceil(n / points_per_cluster) clusters (at least 2), timed and counted; returns the
    forest and its stats (n, t, noise, cost, distance calls, runtime_s)."""
    counted, counter = space.counting()
    t = max(2, math.ceil(len(space) / points_per_cluster))
    start = time.perf_counter()
    forest = learned_forest(counted, t, noise=noise, seed=seed)
    runtime = time.perf_counter() - start
    return forest, {"n": len(space), "t": forest.t, "noise": noise, "cost": forest.cost, "calls": counter.calls,
                    "runtime_s": runtime}


def forest_of(space: MetricSpace, labels: np.ndarray) -> LearnedForest:
    """F_t for a given partition (labels 0..t-1, none empty): an exact MST T_i inside each P_i."""
    forest = LearnedForest(labels=labels, edges=np.zeros((0, 2), np.int64), weights=np.zeros(0))
    all_edges, all_weights = [], []
    for members in forest.members():
        edges, weights = exact_mst(space.take(members))  # T_i = MST(P_i)
        all_edges.append(members[edges])
        all_weights.append(weights)
    return LearnedForest(
        labels=labels,
        edges=np.concatenate(all_edges).reshape(-1, 2),
        weights=np.concatenate(all_weights),
    )

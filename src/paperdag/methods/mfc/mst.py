"""Exact metric MST: Prim's O(n^2) algorithm, one row of distances per step, never an n x n matrix.

This is the quadratic reference every learning-augmented variant is measured against.
"""

from __future__ import annotations

import numpy as np

from paperdag.methods.mfc.metrics import MetricSpace


DENSE_BELOW = 4096  # up to this many points, one dense n x n matrix (n^2 calls) instead of row by row


def exact_mst(space: MetricSpace, dense_below: int = DENSE_BELOW) -> tuple[np.ndarray, np.ndarray]:
    """MST of the complete graph on `space`: edges (n-1, 2) of indices into `space`, and their weights.

    Small sets (n <= dense_below) take one n x n matrix; larger ones run Prim row by row.
    """
    if len(space) <= dense_below:
        return _dense_mst(space)
    return _prim_mst(space)


def _dense_mst(space: MetricSpace) -> tuple[np.ndarray, np.ndarray]:
    """Prim over the full n x n matrix: one matrix product, then O(n) numpy work per step."""
    n = len(space)
    edges = np.zeros((max(n - 1, 0), 2), dtype=np.int64)
    weights = np.zeros(max(n - 1, 0))
    if n <= 1:
        return edges, weights
    dist = space.pairwise(space)  # (n, n)
    best = dist[0].copy()  # d(tree, p)
    parent = np.zeros(n, dtype=np.int64)
    best[0] = np.inf
    in_tree = np.zeros(n, dtype=bool)
    in_tree[0] = True
    for step in range(n - 1):
        v = int(np.argmin(best))
        edges[step] = (parent[v], v)
        weights[step] = best[v]
        in_tree[v] = True
        closer = (dist[v] < best) & ~in_tree
        best[closer] = dist[v][closer]
        parent[closer] = v
        best[v] = np.inf
    return edges, weights


def _prim_mst(space: MetricSpace) -> tuple[np.ndarray, np.ndarray]:
    """Prim's algorithm, O(n^2) time and O(n) memory.

    Each step adds the closest outside point v and evaluates d(v, .) against the points still
    outside the tree; the outside set is compacted whenever half of it has joined, so the work
    is about n^2 / 2 distance calls and O(n) memory per row.
    """
    n = len(space)
    edges = np.zeros((max(n - 1, 0), 2), dtype=np.int64)
    weights = np.zeros(max(n - 1, 0))
    if n <= 1:
        return edges, weights

    outside = np.arange(1, n)  # global ids of points not yet in the tree
    outside_space = space.take(outside)
    alive = np.ones(n - 1, dtype=bool)
    best = space.take([0]).pairwise(outside_space)[0]  # d(tree, p) for p outside
    parent = np.zeros(n - 1, dtype=np.int64)  # tree endpoint realising best
    n_alive = n - 1
    for step in range(n - 1):
        k = int(np.argmin(best))
        v = int(outside[k])
        edges[step] = (parent[k], v)
        weights[step] = best[k]
        best[k] = np.inf
        alive[k] = False
        n_alive -= 1
        if n_alive == 0:
            break
        if 2 * n_alive <= len(outside):  # compact: drop the points already in the tree
            keep = np.flatnonzero(alive)
            outside, best, parent = outside[keep], best[keep], parent[keep]
            outside_space = outside_space.take(keep)
            alive = np.ones(len(keep), dtype=bool)
        dist = space.take([v]).pairwise(outside_space)[0]
        closer = (dist < best) & alive
        best[closer] = dist[closer]
        parent[closer] = v
    return edges, weights

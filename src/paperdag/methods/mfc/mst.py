"""Exact metric MST: Prim's O(n^2) algorithm, over an n x n matrix computed with the completion's blocked kernel
(a block of rows against all points: one matrix product for vectors) while it fits in memory, else one row of
distances per step (O(n) memory).

This is the quadratic reference every learning-augmented variant is measured against: with the same blocked
kernel as the completion (completion._BLOCK_ENTRIES), a wall-time ratio measures the algorithm, not the kernel.
"""

from __future__ import annotations

import numpy as np

from paperdag.methods.mfc.metrics import MetricSpace

_BLOCK_ENTRIES = 1 << 23  # as completion._BLOCK_ENTRIES: distances scored at once
DENSE_BELOW = 4096  # up to this many points, one dense n x n matrix (n^2 calls) instead of row by row


def exact_mst(space: MetricSpace, dense_below: int = DENSE_BELOW) -> tuple[np.ndarray, np.ndarray]:
    """MST of the complete graph on `space`: edges (n-1, 2) of indices into `space`, and their weights.

    Small sets (n <= dense_below) take one n x n matrix; larger ones run Prim row by row.
    """
    if len(space) <= dense_below:
        return _dense_mst(space)
    return _prim_mst(space)


def blocked_distances(space: MetricSpace) -> np.ndarray:
    """The symmetric (n, n) distance matrix, a block of rows at a time against the points from the block's first
    row on (the upper triangle, mirrored): about n^2 / 2 distance calls, as many as row-by-row Prim makes."""
    n = len(space)
    dist = np.empty((n, n))
    block = max(1, _BLOCK_ENTRIES // max(n, 1))
    for lo in range(0, n, block):
        hi = min(n, lo + block)
        rows = space.take(np.arange(lo, hi)).pairwise(space.take(np.arange(lo, n)))  # (hi - lo, n - lo)
        dist[lo:hi, lo:] = rows
        dist[lo:, lo:hi] = rows.T
        square = rows[:, : hi - lo]  # the kernel need not round d(i, j) and d(j, i) alike: keep its upper triangle
        dist[lo:hi, lo:hi] = np.triu(square) + np.triu(square, 1).T
    return dist


def _dense_mst(space: MetricSpace) -> tuple[np.ndarray, np.ndarray]:
    """Prim over the full n x n matrix (blocked_distances), then O(n) numpy work per step."""
    n = len(space)
    edges = np.zeros((max(n - 1, 0), 2), dtype=np.int64)
    weights = np.zeros(max(n - 1, 0))
    if n <= 1:
        return edges, weights
    dist = blocked_distances(space)  # (n, n)
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

"""Exact MST reference: equals scipy's MST on a dense matrix, on both the dense and the row-by-row path."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.sparse.csgraph import minimum_spanning_tree
from scipy.spatial.distance import cdist

from paperdag.methods.mfc import EuclideanSpace, exact_mst, gaussian_mixture, is_spanning_tree


@pytest.mark.parametrize("dense_below", [0, 10_000])
def test_exact_mst_matches_scipy(dense_below: int) -> None:
    """Prim's tree weighs exactly what scipy's MST of the full matrix weighs, and spans all points."""
    points = gaussian_mixture(300, 4, 3, 4.0, seed=3)
    edges, weights = exact_mst(EuclideanSpace(points), dense_below=dense_below)
    reference = minimum_spanning_tree(cdist(points, points)).sum()
    assert weights.sum() == pytest.approx(reference, rel=1e-10)
    assert is_spanning_tree(len(points), edges)
    np.testing.assert_allclose(weights, np.linalg.norm(points[edges[:, 0]] - points[edges[:, 1]], axis=1))


def test_prim_evaluates_at_most_half_of_n_squared_plus_slack() -> None:
    """Row-by-row Prim only scores points still outside the tree (about n^2 / 2 calls, never n^2)."""
    space, counter = EuclideanSpace(np.random.default_rng(0).random((400, 3))).counting()
    exact_mst(space, dense_below=0)
    assert counter.calls <= 0.75 * 400**2


def test_duplicate_points_are_joined_at_zero_cost() -> None:
    """Identical points (distance 0) are still connected: the tree spans and costs the distinct points' MST."""
    points = np.array([[0.0, 0.0], [0.0, 0.0], [1.0, 0.0], [1.0, 0.0]])
    for dense_below in (0, 10):
        edges, weights = exact_mst(EuclideanSpace(points), dense_below=dense_below)
        assert is_spanning_tree(4, edges)
        assert weights.sum() == pytest.approx(1.0)


def test_blocked_matrix_is_the_full_matrix_at_half_the_calls() -> None:
    """The dense path's blocked (n, n) matrix equals cdist's, symmetric, for about n^2 / 2 distance calls, with
    blocks smaller than n rows (the block boundary is exercised)."""
    import paperdag.methods.mfc.mst as mst

    points = gaussian_mixture(500, 3, 3, 4.0, seed=1)
    space, counter = EuclideanSpace(points).counting()
    saved, mst._BLOCK_ENTRIES = mst._BLOCK_ENTRIES, 500 * 64  # 64 rows a block
    try:
        dist = mst.blocked_distances(space)
    finally:
        mst._BLOCK_ENTRIES = saved
    np.testing.assert_allclose(dist, cdist(points, points), atol=1e-6)  # the Gram-trick kernel rounds near 0
    np.testing.assert_array_equal(dist, dist.T)
    assert counter.calls <= 0.5 * 500**2 + 500 * 64

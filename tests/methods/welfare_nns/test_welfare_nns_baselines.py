"""Baselines: top-k, Div-ANN's per-attribute cap, MMR's lambda = 1 limit."""

from __future__ import annotations

import numpy as np
import pytest

from paperdag.methods.welfare_nns import div_ann, mmr, top_k


def test_top_k_is_sorted_by_decreasing_sigma() -> None:
    """top_k returns the positions of the k largest sigma, best first."""
    assert top_k(np.array([0.3, 1.2, 0.9, 1.5]), 3).tolist() == [3, 1, 2]


@pytest.mark.parametrize("cap", [1, 2, 3, 10])
@pytest.mark.parametrize("seed", range(5))
def test_div_ann_respects_the_cap_and_is_greedy_by_similarity(seed: int, cap: int) -> None:
    """No attribute holds more than k' items; the kept items are exactly the sigma-greedy scan under the cap."""
    rng = np.random.default_rng(seed)
    sims, attributes, k = rng.uniform(0, 2, 80), rng.integers(4, size=80), 10
    chosen = div_ann(sims, attributes, k, cap)
    assert np.bincount(attributes[chosen], minlength=4).max() <= cap
    expected, counts = [], np.zeros(4, dtype=int)
    for i in np.argsort(-sims, kind="stable"):
        if counts[attributes[i]] < cap and len(expected) < k:
            expected.append(i)
            counts[attributes[i]] += 1
    assert chosen.tolist() == expected
    assert len(chosen) == min(k, 4 * cap)


def test_div_ann_with_cap_k_is_top_k() -> None:
    """k' = k removes the constraint: Div-ANN = top-k."""
    rng = np.random.default_rng(1)
    sims, attributes = rng.uniform(0, 2, 50), rng.integers(3, size=50)
    assert div_ann(sims, attributes, 7, 7).tolist() == top_k(sims, 7).tolist()


@pytest.mark.parametrize("seed", range(5))
def test_mmr_with_lambda_one_is_top_k(seed: int) -> None:
    """lambda = 1 ignores redundancy: MMR = top-k, same order."""
    rng = np.random.default_rng(seed)
    sims, vectors = rng.uniform(0, 2, 60), rng.normal(size=(60, 8))
    assert mmr(sims, vectors, 10, 1.0).tolist() == top_k(sims, 10).tolist()


def test_mmr_with_low_lambda_avoids_near_duplicates() -> None:
    """Two near-identical best items and one distinct slightly worse one: lambda = 0.3 takes the distinct one second."""
    sims = np.array([2.0, 1.99, 1.8])
    vectors = np.array([[1.0, 0.0], [1.0, 0.001], [0.0, 1.0]])
    assert mmr(sims, vectors, 2, 1.0).tolist() == [0, 1]
    assert mmr(sims, vectors, 2, 0.3).tolist() == [0, 2]

"""Multi-attribute greedy: (1 - 1/e) of the optimum at eta = 1, p = 1 is top-k (its latency is measured by benchmarks/bench_welfare_nns.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from welfare_cases import multi_attribute_instance

from paperdag.methods.welfare_nns import (
    brute_force_best,
    log_nsw,
    p_fetch_union,
    p_mean,
    top_k,
    utilities,
    welfare_greedy,
)


@pytest.mark.parametrize("seed", range(40))
def test_greedy_reaches_one_minus_one_over_e_of_the_optimum(seed: int) -> None:
    """At eta = 1, sum_l log(u_l + 1) is monotone submodular: greedy >= (1 - 1/e) x the brute-force optimum (log scale)."""
    sims, membership = multi_attribute_instance(seed, n=9, c=4)
    k = 1 + seed % 4
    chosen = welfare_greedy(sims, membership, k, eta=1.0)
    best, _ = brute_force_best(sims, membership, k, eta=1.0)
    reached = log_nsw(utilities(sims[chosen], membership[chosen]), 1.0)
    assert len(set(chosen.tolist())) == k
    assert reached >= (1 - 1 / math.e) * math.log(best) - 1e-12


@pytest.mark.parametrize("seed", range(10))
def test_p_one_reproduces_plain_top_k(seed: int) -> None:
    """p = 1 on single-attribute items is plain top-k: the same positions in the same order."""
    rng = np.random.default_rng(seed)
    sims = rng.uniform(0.1, 2.0, size=200)
    membership = np.eye(7, dtype=bool)[rng.integers(7, size=200)]
    assert welfare_greedy(sims, membership, 10, eta=0.5, p=1.0).tolist() == top_k(sims, 10).tolist()


@pytest.mark.parametrize("p", [-10.0, -1.0, -0.5, 0.5])
def test_each_greedy_step_improves_m_p(p: float) -> None:
    """For p != 0 every greedy pick raises M_p (the increase of M_p^p for p > 0, the decrease for p < 0)."""
    sims, membership = multi_attribute_instance(3, n=40, c=6)
    chosen = p_fetch_union(sims, membership, 8, eta=0.5, p=p)
    values = [p_mean(utilities(sims[chosen[:i]], membership[chosen[:i]]), 0.5, p) for i in range(len(chosen) + 1)]
    assert all(b >= a for a, b in zip(values, values[1:], strict=False))


def test_lower_p_spreads_over_more_attributes() -> None:
    """Moving p from 1 to -10 trades relevance for balance: the smallest utility never falls, the sum never rises."""
    rng = np.random.default_rng(0)
    sims = np.sort(rng.uniform(0.5, 2.0, size=300))[::-1]
    membership = np.eye(5, dtype=bool)[np.minimum(rng.geometric(0.5, size=300) - 1, 4)]  # skewed attributes
    rows = []
    for p in (1.0, 0.5, 0.0, -0.5, -1.0, -10.0):
        chosen = welfare_greedy(sims, membership, 10, eta=0.1, p=p)
        u = utilities(sims[chosen], membership[chosen])
        rows.append((sims[chosen].sum(), u.min()))
    relevance, worst = np.array(rows).T
    assert (np.diff(relevance) <= 1e-9).all() and (np.diff(worst) >= -1e-9).all()
    assert worst[-1] > worst[0]


def test_items_without_attributes_and_shape_errors() -> None:
    """An item with no attribute has zero gain; mismatched shapes are refused naming both shapes."""
    sims = np.array([2.0, 1.0])
    membership = np.array([[False, False], [True, False]])
    assert welfare_greedy(sims, membership, 1, eta=1.0).tolist() == [1]
    with pytest.raises(ValueError, match="shape"):
        welfare_greedy(np.ones(3), membership, 1, eta=1.0)


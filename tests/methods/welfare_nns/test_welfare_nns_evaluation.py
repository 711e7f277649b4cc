"""The evaluation's replicate query sets, set recall against the exact oracle, and dominance at equal diversity."""

from __future__ import annotations

import numpy as np
import pytest

from paperdag.methods.welfare_nns.evaluation import dominance_over_caps, replicate_means, set_recall


def test_replicate_sets_are_disjoint_round_robin_and_need_enough_queries() -> None:
    """Query i belongs to set i mod R; fewer queries than sets is an error naming the param."""
    np.testing.assert_allclose(replicate_means(np.arange(10.0), 5), [2.5, 3.5, 4.5, 5.5, 6.5])
    with pytest.raises(ValueError, match="welfare_nns.evaluate.replicates"):
        replicate_means(np.arange(3.0), 5)


def test_set_recall_counts_the_exact_oracle_items_returned() -> None:
    """|S ∩ S*| / |S*| per query, whatever the pick order."""
    found = [frozenset({1, 2, 3}), frozenset({4, 5, 6})]
    exact = [frozenset({3, 2, 1}), frozenset({4, 7, 8})]
    np.testing.assert_allclose(set_recall(found, exact), [1.0, 1 / 3])


def _run(ratio: float, entropy: float, queries: int = 10) -> dict[str, np.ndarray]:
    spread = np.linspace(-0.01, 0.01, queries)  # per-query variation, so that the intervals have a width
    return {"ratio_cos": ratio + spread, "entropy": entropy + spread}


def test_dominance_reads_each_cap_at_the_most_relevant_eta_as_diverse() -> None:
    """Per cap k' < k, the most relevant eta at least as diverse as Div-ANN(k'); an eta less diverse is never used,
    a cap no eta matches is left out, and k' >= k (plain top-k) is skipped."""
    nash = {0.1: _run(0.90, 2.3), 1.0: _run(0.96, 2.0), 10.0: _run(0.99, 1.2)}
    div = {1.0: _run(0.93, 2.3), 2.0: _run(0.95, 1.9), 3.0: _run(0.97, 2.5), 10.0: _run(1.0, 1.0)}
    pairs = {p["cap"]: p for p in dominance_over_caps(nash, div, k=10, replicates=5)}
    assert set(pairs) == {1.0, 2.0}  # cap 3 is more diverse than every eta; cap 10 is top-k
    assert pairs[1.0]["eta"] == 0.1 and pairs[1.0]["ratio_cos_gain"]["mean"] == pytest.approx(-0.03)
    assert pairs[2.0]["eta"] == 1.0 and pairs[2.0]["ratio_cos_gain"]["mean"] == pytest.approx(0.01)
    assert pairs[2.0]["ratio_cos_gain"]["n"] == 5 and pairs[2.0]["entropy_gain"]["mean"] == pytest.approx(0.1)

"""Nash-ANN: optimal with an exact oracle, graceful with short or padded lists."""

from __future__ import annotations

import numpy as np
import pytest
from welfare_cases import single_attribute_instance

from paperdag.methods.welfare_nns import brute_force_best, nash_ann, nash_select, nsw, one_hot, p_mean, utilities, welfare_greedy


@pytest.mark.parametrize("seed", range(60))
def test_nash_ann_with_exact_lists_equals_brute_force(seed: int) -> None:
    """With each attribute's exact ranked list, Nash-ANN's NSW equals the max over all k-subsets (tiny instances)."""
    rng = np.random.default_rng(1000 + seed)
    sims, attributes, lists = single_attribute_instance(seed, c=int(rng.integers(2, 5)))
    k = int(rng.integers(1, min(5, len(sims)) + 1))
    eta = float(rng.choice([1e-4, 0.01, 0.3, 1.0, 5.0, 50.0]))
    c = int(attributes.max()) + 1
    chosen = nash_ann(lists, k, eta)
    best, _ = brute_force_best(sims, one_hot(attributes, c), k, eta)
    assert len(chosen.ids) == k and len(set(chosen.ids.tolist())) == k
    assert nsw(utilities(chosen.sims, one_hot(attributes[chosen.ids], c)), eta) == pytest.approx(best, rel=1e-12)


@pytest.mark.parametrize("p", [-10.0, -1.0, -0.5, 0.5, 1.0])
@pytest.mark.parametrize("seed", range(15))
def test_nash_ann_with_phi_p_is_p_mean_optimal(seed: int, p: float) -> None:
    """The same per-attribute loop with phi_p maximises M_p exactly (separable concave), for every p in the sweep."""
    sims, attributes, lists = single_attribute_instance(seed, c=3)
    c, k, eta = 3, min(4, len(sims)), 0.5
    chosen = nash_ann(lists, k, eta, p=p)
    best, _ = brute_force_best(sims, one_hot(attributes, c), k, eta, p=p)
    assert p_mean(utilities(chosen.sims, one_hot(attributes[chosen.ids], c)), eta, p) == pytest.approx(best, rel=1e-10)


@pytest.mark.parametrize("seed", range(10))
def test_nash_ann_agrees_with_the_greedy_on_single_attribute_items(seed: int) -> None:
    """On one-hot membership the vectorised greedy reaches the same NSW as Nash-ANN (both optimal there)."""
    sims, attributes, lists = single_attribute_instance(seed, c=4, per_attribute=6)
    c, k, eta = 4, 5, 0.2
    via_lists = nash_ann(lists, k, eta)
    via_greedy = welfare_greedy(sims, one_hot(attributes, c), k, eta)
    assert nsw(utilities(via_lists.sims, one_hot(attributes[via_lists.ids], c)), eta) == pytest.approx(
        nsw(utilities(sims[via_greedy], one_hot(attributes[via_greedy], c)), eta)
    )


def test_nash_ann_takes_items_in_rank_order_and_reports_attributes() -> None:
    """Within an attribute items come best first; attributes are reported by their keys; a mapping is accepted."""
    lists = {"red": (np.array([10, 11]), np.array([0.5, 1.9])), "blue": (np.array([20]), np.array([1.0]))}
    chosen = nash_ann(lists, 3, eta=0.1)
    assert chosen.ids.tolist() == [11, 20, 10]
    assert chosen.attributes.tolist() == ["red", "blue", "red"]


def test_nash_ann_spreads_across_attributes_where_top_k_would_not() -> None:
    """Three near-equal items of one attribute and one slightly worse of another: NSW takes the other attribute."""
    lists = [(np.array([0, 1, 2]), np.array([1.9, 1.89, 1.88])), (np.array([3]), np.array([1.7]))]
    assert sorted(nash_ann(lists, 2, eta=0.01).ids.tolist()) == [0, 3]


def test_nash_ann_drops_padding_and_stops_when_lists_run_out() -> None:
    """Ids < 0 (an index's padding) are skipped; fewer than k items come back when the lists hold fewer."""
    lists = [(np.array([4, -1, -1]), np.array([1.0, -np.inf, -np.inf])), (np.array([-1]), np.array([0.0]))]
    chosen = nash_ann(lists, 3, eta=1.0)
    assert chosen.ids.tolist() == [4]


def test_nash_ann_rejects_non_positive_eta() -> None:
    """eta <= 0 would make log(u_l + eta) undefined for an empty attribute: refused with the reason."""
    with pytest.raises(ValueError, match="eta must be > 0"):
        nash_ann([(np.array([0]), np.array([1.0]))], 1, eta=0.0)


@pytest.mark.parametrize("seed", range(10))
def test_nash_select_on_flat_candidates_matches_nash_ann(seed: int) -> None:
    """nash_select over flat (sigma, attribute) arrays picks the same items, in the same order, as nash_ann over lists."""
    sims, attributes, lists = single_attribute_instance(seed, c=5, per_attribute=6)
    shuffled = np.random.default_rng(seed).permutation(len(sims))
    positions = nash_select(sims[shuffled], attributes[shuffled], 6, eta=0.3, p=-0.5)
    assert shuffled[positions].tolist() == nash_ann(lists, 6, eta=0.3, p=-0.5).ids.tolist()

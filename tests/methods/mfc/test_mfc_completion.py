"""Forest completion: the proven bounds against brute force, for every metric and every variant."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from mfc_cases import KINDS, brute_optimal_completion, full_matrix, make_space

from paperdag.methods.mfc import (
    VARIANTS,
    EuclideanSpace,
    LearnedForest,
    MetricSpace,
    RepresentativeCurve,
    allocate_dp,
    allocate_greedy,
    complete_forest,
    completed_tree,
    exact_mst,
    alpha_bound,
    gamma_overlap,
    gamma_weight_ratio,
    is_spanning_tree,
    learned_forest,
    mst_bound,
    tree_cost,
    uniform_cube,
)

OPTIONS = {"r": 3, "budget": 7}


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("noise", [0.0, 0.3])
@pytest.mark.parametrize("kind", KINDS)
def test_every_variant_within_both_bounds(kind: str, noise: float, seed: int) -> None:
    """Each variant spans; w(T) <= 2 w(optimal completion) and w(T) <= 2 gamma w(MST), gamma the weight ratio from
    the exact MST; the brute-force optimal completion is within max(1, gamma) w(MST) (the step the 2 gamma bound
    rests on)."""
    space = make_space(kind, seed=seed)
    forest = learned_forest(space, t=3 + 2 * seed, noise=noise, seed=seed + 10)
    optimal = brute_optimal_completion(space, forest)
    mst_edges, mst_weights = exact_mst(space)
    gamma = gamma_weight_ratio(forest.labels, forest.cost, mst_edges, mst_weights)
    assert optimal <= max(1.0, gamma) * mst_weights.sum() + 1e-9
    for variant in VARIANTS:
        completion = complete_forest(space, forest, variant, **OPTIONS)
        edges, _ = completed_tree(forest, completion)
        cost = tree_cost(forest, completion)
        assert is_spanning_tree(len(space), edges), variant
        assert cost <= 2.0 * optimal + 1e-9, variant
        assert cost <= mst_bound(gamma) * mst_weights.sum() + 1e-9, variant
        assert cost >= mst_weights.sum() - 1e-9, variant


@pytest.mark.parametrize("kind", KINDS)
def test_opt_equals_brute_force_optimal_completion(kind: str) -> None:
    """With every point a representative, the completion is the optimal one."""
    space = make_space(kind, seed=4)
    forest = learned_forest(space, t=5, noise=0.2, seed=5)
    completion = complete_forest(space, forest, "opt")
    assert tree_cost(forest, completion) == pytest.approx(brute_optimal_completion(space, forest), rel=1e-9)


def test_forest_from_the_mst_has_gamma_one_and_opt_recovers_the_mst() -> None:
    """Cutting the MST into t trees gives gamma = 1, and the optimal completion then costs w(MST)."""
    space = EuclideanSpace(uniform_cube(120, 2, seed=0))
    edges, weights = exact_mst(space)
    keep = np.argsort(weights)[: len(weights) - 4]  # drop the 4 heaviest edges -> t = 5 trees
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    graph = coo_matrix((np.ones(len(keep)), (edges[keep, 0], edges[keep, 1])), shape=(120, 120))
    labels = connected_components(graph, directed=False)[1]
    forest = LearnedForest(labels=labels, edges=edges[keep], weights=weights[keep])
    assert gamma_overlap(labels, edges) == 1
    assert gamma_weight_ratio(labels, forest.cost, edges, weights) == pytest.approx(1.0)
    assert tree_cost(forest, complete_forest(space, forest, "opt")) == pytest.approx(weights.sum())


def test_noise_makes_gamma_exceed_one() -> None:
    """Reassigning points at random scatters components across the MST (gamma > 1, and more pieces per component)."""
    space = make_space("gaussian")
    mst_edges, mst_weights = exact_mst(space)
    forest = learned_forest(space, t=4, noise=0.3, seed=0)
    assert gamma_overlap(forest.labels, mst_edges) > 1
    assert gamma_weight_ratio(forest.labels, forest.cost, mst_edges, mst_weights) > 1.0


def test_gamma_is_the_weight_ratio_and_the_2_gamma_bound_can_fail() -> None:
    """gamma = w(F_t) / w(T* inside the components) on a hand-made line: points 0, 1, 2, 10, 11 (MST weight 11);
    components {0, 1, 10} and {2, 11}: T_1 = 0-1-10 (10), T_2 = 2-11 (9); of T*'s edges only 0-1 (1) lies inside one
    component, so gamma = 19 / 1. A tree just above 2 gamma w(MST) is out of the bound, one at it is in; a tree 3x
    the optimal is out whatever gamma."""
    from paperdag.methods.mfc.evaluation import within_bounds

    points = np.array([[0.0], [1.0], [2.0], [10.0], [11.0]])
    mst_edges, mst_weights = exact_mst(EuclideanSpace(points))
    labels = np.array([0, 0, 1, 0, 1])
    gamma = gamma_weight_ratio(labels, 19.0, mst_edges, mst_weights)
    assert mst_weights.sum() == pytest.approx(11.0)
    assert gamma == pytest.approx(19.0 / 1.0)
    assert mst_bound(gamma) == pytest.approx(38.0)
    assert not within_bounds(38.0 * 11.0 * 1.001, True, optimal=1e9, mst_cost=11.0, gamma=gamma)
    assert within_bounds(38.0 * 11.0, True, optimal=1e9, mst_cost=11.0, gamma=gamma)
    assert not within_bounds(3.0 * 11.0, True, optimal=11.0, mst_cost=11.0, gamma=1.0)  # 3x the optimal: out
    assert mst_bound(0.5) == 2.0  # below 1 the optimal completion is the MST: the factor stays 2


def test_more_representatives_never_cost_more() -> None:
    """Candidate sets grow with the representatives, so opt <= dp-B <= simple in tree cost."""
    space = make_space("uniform", seed=7)
    forest = learned_forest(space, t=8, seed=7)
    costs = {v: tree_cost(forest, complete_forest(space, forest, v, budget=10)) for v in ("simple", "dp-B", "opt")}
    assert costs["opt"] <= costs["dp-B"] + 1e-12 <= costs["simple"] + 2e-12


# ---------------------------------------------------------------- allocation of representatives


def curves_for(space: MetricSpace, forest: LearnedForest) -> list[RepresentativeCurve]:
    return [RepresentativeCurve(space, m) for m in forest.members()]


@pytest.mark.parametrize("kind", ["gaussian", "hamming", "edit"])
@pytest.mark.parametrize("budget", [0, 3, 12, 40])
def test_dp_radius_sum_at_most_greedy(kind: str, budget: int) -> None:
    """dp-B's sum of radii <= greedy-B's; both give every component >= 1 rep and use t + B reps in all."""
    space = make_space(kind, seed=3)
    forest = learned_forest(space, t=6, seed=3)
    curves = curves_for(space, forest)
    greedy = allocate_greedy(curves, budget)
    dp = allocate_dp(curves, budget)
    radius = lambda alloc: sum(c.radius(int(k)) for c, k in zip(curves, alloc, strict=True))  # noqa: E731
    assert radius(dp) <= radius(greedy) + 1e-9
    sizes = np.array([len(c) for c in curves])
    for alloc in (greedy, dp):
        assert (alloc >= 1).all() and (alloc <= sizes).all()
        assert alloc.sum() == min(forest.t + budget, len(space))


def test_dp_is_optimal_against_enumeration() -> None:
    """On a tiny instance, dp-B's radius sum equals the best over every allocation of the budget."""
    space = make_space("uniform", seed=9)
    forest = learned_forest(space, t=3, seed=9)
    curves = curves_for(space, forest)
    budget, cap = 5, 4
    best = min(
        sum(c.radius(1 + e) for c, e in zip(curves, extra, strict=True))
        for extra in itertools.product(range(cap), repeat=3)
        if sum(extra) == budget
    )
    dp = allocate_dp(curves, budget, cap=cap)
    assert sum(c.radius(int(k)) for c, k in zip(curves, dp, strict=True)) == pytest.approx(best)
    assert dp.max() <= cap


def test_radii_shrink_and_reach_zero() -> None:
    """Farthest-first covering radii are non-increasing and 0 once every point is a representative."""
    space = make_space("jaccard", seed=2)
    curve = curves_for(space, learned_forest(space, t=3, seed=2))[0]
    radii = [curve.radius(k) for k in range(1, len(curve) + 1)]
    assert all(a >= b for a, b in itertools.pairwise(radii))
    assert radii[-1] == 0.0
    assert len(set(curve.first(len(curve)).tolist())) == len(curve)


def test_allocation_respects_cap() -> None:
    """max_reps_per_component bounds every r_i for the budgeted variants."""
    space = make_space("gaussian", seed=5)
    forest = learned_forest(space, t=4, seed=5)
    for variant in ("greedy-B", "dp-B"):
        completion = complete_forest(space, forest, variant, budget=50, max_reps_per_component=3)
        assert completion.reps_per_component.max() <= 3


# ---------------------------------------------------------------- distance calls


def test_simple_makes_about_n_times_t_calls() -> None:
    """simple: one rep per component scored against all n points (n*t), plus one row into P_j per chosen edge."""
    space, counter = make_space("gaussian", seed=6).counting()
    forest = learned_forest(space, t=7, seed=6)
    before = counter.calls
    completion = complete_forest(space, forest, "simple")
    n, t = len(space), forest.t
    assert completion.selection_calls == 0
    assert n * t <= completion.calls <= n * t + (t - 1) * np.bincount(forest.labels).max()
    assert counter.calls - before == completion.calls


def test_budgeted_calls_are_n_times_reps() -> None:
    """greedy-B/dp-B/fixed-r: candidate calls = n * R plus a row per chosen edge; choosing reps <= |P_i| per rep."""
    space = make_space("hamming", seed=8)
    forest = learned_forest(space, t=6, seed=8)
    n, mapping = len(space), (forest.t - 1) * np.bincount(forest.labels).max()
    for variant in ("greedy-B", "dp-B", "fixed-r"):
        completion = complete_forest(space, forest, variant, r=3, budget=9, max_reps_per_component=5)
        assert n * completion.total_reps <= completion.candidate_calls <= n * completion.total_reps + mapping
        assert completion.selection_calls <= n * (5 + 1)


def test_opt_makes_n_squared_calls() -> None:
    """opt scores every point against every point: n^2 calls (plus a row per chosen edge to map it back)."""
    space = make_space("edit", seed=1)
    forest = learned_forest(space, t=5, seed=1)
    completion = complete_forest(space, forest, "opt")
    n = len(space)
    assert n * n <= completion.calls <= n * n + (forest.t - 1) * np.bincount(forest.labels).max()


def test_unknown_variant_is_rejected_with_the_choices() -> None:
    """A misspelt variant names the valid ones."""
    space = make_space("uniform")
    with pytest.raises(ValueError, match="greedy-B"):
        complete_forest(space, learned_forest(space, t=3), "greedy")


def test_full_matrix_helper_is_uncounted() -> None:
    """The brute-force helper does not touch the counter (so counts above are the method's own)."""
    space, counter = make_space("uniform").counting()
    full_matrix(space)
    assert counter.calls == 0


@pytest.mark.parametrize("kind", ["gaussian", "hamming", "edit"])
def test_radius_sum_is_the_covering_radii_of_the_reps_used_and_alpha_at_most_2(kind: str) -> None:
    """Every variant's radius_sum (read off the candidate blocks, no extra calls) is sum_i rho_i(r_i) of its reps:
    the farthest-first curve's radii for fixed-r / greedy-B / dp-B, 0 for opt; alpha = 1 + sum rho / w(F_t) is in
    [1, 2] (rho_i <= w(T_i)), falls as reps are added, and dp-B's is the least at its budget."""
    space = make_space(kind, seed=11)
    forest = learned_forest(space, t=5, seed=11)
    curves = curves_for(space, forest)
    alphas = {}
    for variant, options in [("simple", {}), ("fixed-r", {"r": 3}), ("greedy-B", {"budget": 10}), ("dp-B", {"budget": 10}),
                             ("opt", {})]:
        completion = complete_forest(space, forest, variant, **options)
        expected = 0.0 if variant == "opt" else sum(c.radius(int(k)) for c, k in zip(curves, completion.reps_per_component, strict=True))
        assert completion.radius_sum == pytest.approx(expected), variant
        alphas[variant] = alpha_bound(completion.radius_sum, forest.cost)
        assert 1.0 <= alphas[variant] <= 2.0 + 1e-12, variant
    assert alphas["opt"] == 1.0 and alphas["dp-B"] <= alphas["greedy-B"] + 1e-12 <= alphas["simple"] + 2e-12
    assert alphas["fixed-r"] <= alphas["simple"] + 1e-12

"""NSW, M_p, sigma and utilities on hand-computed cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from paperdag.methods.welfare_nns import (
    SIMILARITIES,
    cosine_from_scores,
    log_nsw,
    nsw,
    one_hot,
    p_mean,
    sigma_cosine,
    sigma_from_scores,
    sigma_l2,
    sigma_of_cosine,
    utilities,
    welfare_gain,
    welfare_phi,
)


def test_utilities_sum_sigma_per_attribute() -> None:
    """u_l(S) sums sigma over the items of S carrying l; an item with two attributes counts for both."""
    membership = np.array([[1, 0, 0], [1, 0, 0], [0, 1, 1]], dtype=bool)
    assert utilities(np.array([0.5, 1.0, 2.0]), membership).tolist() == [1.5, 2.0, 2.0]
    assert utilities(np.array([0.5, 1.0]), one_hot(np.array([2, 0]), 3)).tolist() == [1.0, 0.0, 0.5]


def test_nsw_is_the_geometric_mean_of_smoothed_utilities() -> None:
    """NSW(u = (1, 3, 0), eta = 1) = (2 * 4 * 1)^(1/3) = 2; log NSW = log 2."""
    assert nsw(np.array([1.0, 3.0, 0.0]), 1.0) == pytest.approx(2.0)
    assert log_nsw(np.array([1.0, 3.0, 0.0]), 1.0) == pytest.approx(math.log(2.0))


def test_p_mean_hand_cases() -> None:
    """M_1 = arithmetic mean, M_-1 = harmonic mean, M_0 = NSW, M_-inf = min, on x = u + eta = (1, 2, 4)."""
    u, eta = np.array([0.5, 1.5, 3.5]), 0.5
    assert p_mean(u, eta, 1.0) == pytest.approx(7 / 3)
    assert p_mean(u, eta, -1.0) == pytest.approx(3 / (1 + 0.5 + 0.25))
    assert p_mean(u, eta, 0.0) == pytest.approx(2.0)
    assert p_mean(u, eta, -math.inf) == pytest.approx(1.0)
    assert p_mean(u, eta, 0.5) == pytest.approx(((1 + math.sqrt(2) + 2) / 3) ** 2)


def test_p_mean_limits_and_order() -> None:
    """M_p is increasing in p, tends to NSW as p -> 0 and to the minimum as p -> -inf; p > 1 is refused."""
    u, eta = np.array([0.1, 2.0, 5.0, 0.7]), 0.3
    ps = [-50.0, -10.0, -1.0, -0.5, 0.0, 0.5, 1.0]
    values = [p_mean(u, eta, p) for p in ps]
    assert values == sorted(values)
    assert p_mean(u, eta, 1e-7) == pytest.approx(nsw(u, eta), rel=1e-5)
    assert p_mean(u, eta, -400.0) == pytest.approx(0.4, rel=1e-2)
    with pytest.raises(ValueError, match="p <= 1"):
        p_mean(u, eta, 2.0)


def test_welfare_gain_matches_phi_differences() -> None:
    """welfare_gain(base, s, p) = phi_p(base + s) - phi_p(base); at p = 0 the Nash-ANN step log(w+eta+s) - log(w+eta)."""
    base, s = np.array([0.5, 1.0, 3.0]), np.array([1.5, 0.2, 2.0])
    for p in (-10.0, -1.0, -0.5, 0.0, 0.5, 1.0):
        np.testing.assert_allclose(welfare_gain(base, s, p), welfare_phi(base + s, p) - welfare_phi(base, p), rtol=1e-9)
    np.testing.assert_allclose(welfare_gain(base, s, 0.0), np.log(base + s) - np.log(base))
    np.testing.assert_array_equal(welfare_gain(base, s, 1.0), s)


def test_sigma_is_positive_and_ordered_like_distance() -> None:
    """1 + cos and 1 / (||q - v|| + delta) are > 0 and decrease with the distance; index scores map to the same values."""
    q = np.array([1.0, 0.0])
    v = np.array([[2.0, 0.0], [1.0, 1.0], [0.0, 1.0], [-1.0, 0.1]])
    cos = sigma_cosine(q, v)
    assert cos[0] == pytest.approx(2.0) and cos[2] == pytest.approx(1.0) and (cos > 0).all()
    assert list(np.argsort(-cos)) == [0, 1, 2, 3]
    l2 = sigma_l2(q, v, delta=0.5)
    assert l2[0] == pytest.approx(1 / 1.5) and (l2 > 0).all()
    np.testing.assert_allclose(sigma_from_scores(np.sum((v - q) ** 2, axis=1), "l2", 0.5), l2)
    unit = v / np.linalg.norm(v, axis=1, keepdims=True)
    np.testing.assert_allclose(sigma_from_scores(unit @ q, "ip"), cos)


def test_exp_cos_spreads_near_neighbours_and_every_similarity_reads_either_metric() -> None:
    """exp((cos - 1) / tau) lies in (0, 1] (1 at the query itself) and turns a cosine gap g into a factor exp(g / tau);
    the cosine, hence sigma, is the same whether the index scores inner products or squared L2 distances."""
    unit = np.array([[1.0, 0.0], [0.8, 0.6], [0.6, 0.8], [-1.0, 0.0]])
    q = np.array([1.0, 0.0])
    via_ip, via_l2 = cosine_from_scores(unit @ q, "ip"), cosine_from_scores(np.sum((unit - q) ** 2, axis=1), "l2")
    np.testing.assert_allclose(via_ip, via_l2, atol=1e-12)
    sigma = sigma_of_cosine(via_ip, "exp_cos", tau=0.1)
    assert sigma[0] == pytest.approx(1.0) and (sigma > 0).all()
    assert sigma[1] / sigma[2] == pytest.approx(math.exp(0.2 / 0.1))
    np.testing.assert_allclose(sigma_of_cosine(via_ip, "one_plus_cos"), sigma_cosine(q, unit), atol=1e-11)  # the antipode: 1e-12, not 0
    np.testing.assert_allclose(sigma_of_cosine(via_l2, "inverse_l2", delta=0.5), sigma_l2(q, unit, delta=0.5))
    with pytest.raises(ValueError, match="similarity"):
        sigma_of_cosine(via_ip, "cos")


def test_the_stage_offers_every_similarity() -> None:
    """stages/welfare_nns.py's similarity choices are welfare.SIMILARITIES (written out there, not imported)."""
    import typing

    from stages.welfare_nns import InferParams

    assert typing.get_args(typing.get_type_hints(InferParams)["similarity"]) == SIMILARITIES

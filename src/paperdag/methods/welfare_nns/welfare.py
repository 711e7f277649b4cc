"""The welfare objectives of the paper: similarity sigma, attribute utilities u_l, Nash social welfare and p-means.

Notation (paper, Sec. 2): items v with attributes l = 1..c; sigma(q, v) > 0; u_l(S) = sum_{v in S, v has l} sigma(q, v);
NSW(S) = (prod_l (u_l(S) + eta))^(1/c); M_p(S) = ((1/c) sum_l (u_l(S) + eta)^p)^(1/p), p in (-inf, 1].
"""

from __future__ import annotations

import math

import numpy as np

# ---------------------------------------------------------------- sigma(q, v) > 0


def sigma_cosine(q: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """sigma(q, v) = 1 + cos(q, v), in (0, 2] except for exact antipodes. q (d,), vectors (n, d) -> (n,)."""
    norms = np.linalg.norm(vectors, axis=1) * np.linalg.norm(q)
    return 1.0 + (vectors @ q) / np.maximum(norms, 1e-12)


def sigma_l2(q: np.ndarray, vectors: np.ndarray, delta: float = 1.0) -> np.ndarray:
    """sigma(q, v) = 1 / (||q - v|| + delta). q (d,), vectors (n, d) -> (n,)."""
    if delta <= 0:
        raise ValueError(f"delta must be > 0 so that sigma stays finite, got {delta}")
    return 1.0 / (np.linalg.norm(vectors - q, axis=1) + delta)


# The evaluation's sigma is a function of the raw cosine of unit vectors, whatever the index's metric (an "l2" index
# scores ||q - v||^2 = 2 - 2 cos). exp_cos is the default: near neighbours' cosines differ by a few hundredths, so
# 1 + cos puts every candidate within a few per cent of the others and every eta of the paper's range (1e-4 .. 50)
# then fills one item per attribute (Div-ANN with cap 1). exp((cos - 1) / tau) lies in (0, 1] (1 = the query itself)
# and turns a cosine gap g into a factor exp(g / tau) between similarities, so eta ~ sigma lies inside 1e-4 .. 50
# and eta traces the trade-off from one item per attribute (small eta) to plain top-k (large eta).
SIMILARITIES = ("exp_cos", "one_plus_cos", "inverse_l2")


def cosine_from_scores(scores: np.ndarray, metric: str) -> np.ndarray:
    """The raw cosine of unit vectors from an ANN index's scores: inner products ("ip") or squared L2 distances
    ("l2": cos = 1 - ||q - v||^2 / 2)."""
    scores = np.asarray(scores, dtype=np.float64)
    if metric == "ip":
        return scores
    if metric == "l2":
        return 1.0 - scores / 2.0
    raise ValueError(f"metric must be 'ip' or 'l2', got {metric!r}")


def sigma_of_cosine(cos: np.ndarray, similarity: str, tau: float = 0.2, delta: float = 1.0) -> np.ndarray:
    """sigma(q, v) > 0 from cos(q, v) of unit vectors: "exp_cos" exp((cos - 1) / tau) in (0, 1]; "one_plus_cos"
    1 + cos in (0, 2]; "inverse_l2" 1 / (||q - v|| + delta) with ||q - v|| = sqrt(2 - 2 cos)."""
    cos = np.asarray(cos, dtype=np.float64)
    if similarity == "exp_cos":
        if tau <= 0:
            raise ValueError(f"tau must be > 0, got {tau}")
        return np.exp((np.minimum(cos, 1.0) - 1.0) / tau)
    if similarity == "one_plus_cos":
        return np.maximum(1.0 + cos, 1e-12)  # cos > -1 up to rounding: sigma stays > 0
    if similarity == "inverse_l2":
        if delta <= 0:
            raise ValueError(f"delta must be > 0 so that sigma stays finite, got {delta}")
        return 1.0 / (np.sqrt(np.maximum(2.0 - 2.0 * cos, 0.0)) + delta)
    raise ValueError(f"similarity must be one of {', '.join(SIMILARITIES)}, got {similarity!r}")


def sigma_from_scores(scores: np.ndarray, metric: str, delta: float = 1.0) -> np.ndarray:
    """sigma from an ANN index's raw scores: inner products of unit vectors ("ip": 1 + score) or squared L2
    distances ("l2": 1 / (sqrt(score) + delta))."""
    scores = np.asarray(scores, dtype=np.float64)
    if metric == "ip":
        return np.maximum(1.0 + scores, 1e-12)  # cos > -1 up to rounding: sigma stays > 0
    if metric == "l2":
        return 1.0 / (np.sqrt(np.maximum(scores, 0.0)) + delta)
    raise ValueError(f"metric must be 'ip' or 'l2', got {metric!r}")


# ---------------------------------------------------------------- u_l(S)


def one_hot(attributes: np.ndarray, c: int) -> np.ndarray:
    """(n,) attribute ids in [0, c) -> (n, c) membership matrix of a single-attribute instance."""
    attributes = np.asarray(attributes, dtype=np.int64)
    if attributes.size and (attributes.min() < 0 or attributes.max() >= c):
        raise ValueError(f"attribute ids must lie in [0, {c}), got range [{attributes.min()}, {attributes.max()}]")
    membership = np.zeros((attributes.size, c), dtype=bool)
    membership[np.arange(attributes.size), attributes] = True
    return membership


def utilities(sims: np.ndarray, membership: np.ndarray) -> np.ndarray:
    """u_l(S) for every attribute l: sims (|S|,) of the chosen items, membership (|S|, c) -> (c,)."""
    return np.asarray(membership, dtype=np.float64).T @ np.asarray(sims, dtype=np.float64)


# ---------------------------------------------------------------- NSW and M_p


def log_nsw(u: np.ndarray, eta: float) -> float:
    """log NSW(S) = (1/c) sum_l log(u_l + eta)."""
    return float(np.mean(np.log(np.asarray(u, dtype=np.float64) + eta)))


def nsw(u: np.ndarray, eta: float) -> float:
    """NSW(S) = (prod_l (u_l + eta))^(1/c), the geometric mean of the smoothed utilities."""
    return math.exp(log_nsw(u, eta))


def p_mean(u: np.ndarray, eta: float, p: float) -> float:
    """M_p(S) = ((1/c) sum_l (u_l + eta)^p)^(1/p); p = 0 is NSW, p = -inf the minimum (egalitarian), p = 1 the mean."""
    if p > 1:
        raise ValueError(f"p-mean welfare needs p <= 1 (concave), got {p}")
    x = np.asarray(u, dtype=np.float64) + eta
    if p == 0:
        return nsw(u, eta)
    if math.isinf(p):
        return float(x.min())
    scale = x.min() if p < 0 else x.max()  # factor out the dominant term: x^p overflows for p = -10 and small x
    return float(scale * np.mean((x / scale) ** p) ** (1.0 / p))


def welfare_phi(x: np.ndarray | float, p: float) -> np.ndarray:
    """phi_p(x) = (x^p - 1) / p, and log x at p = 0: increasing and concave for p <= 1, and sum_l phi_p(u_l + eta)
    orders result sets exactly as M_p does (a monotone transform of M_p for fixed c). The greedy maximises it."""
    x = np.asarray(x, dtype=np.float64)
    if p == 0:
        return np.log(x)
    return (x**p - 1.0) / p


def welfare_gain(base: np.ndarray, s: np.ndarray, p: float) -> np.ndarray:
    """phi_p(base + s) - phi_p(base): the gain of adding similarity s to an attribute at smoothed utility base = w + eta.

    p = 0 is the Nash-ANN step log(w + eta + s) - log(w + eta); p = 1 is exactly s (so greedy = top-k);
    p > 0 is the increase of M_p^p / p, p < 0 the decrease of M_p^p over |p|.
    """
    base = np.asarray(base, dtype=np.float64)
    s = np.asarray(s, dtype=np.float64)
    if p == 0:
        return np.log1p(s / base)
    if p == 1:
        return np.broadcast_to(s, np.broadcast_shapes(base.shape, s.shape)).copy()
    return (np.power(base + s, p) - np.power(base, p)) / p

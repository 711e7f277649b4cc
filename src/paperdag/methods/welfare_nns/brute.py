"""Brute force over all k-subsets of a small candidate set: the exact optimum the tests hold the algorithms to."""

from __future__ import annotations

import itertools

import numpy as np

from paperdag.methods.welfare_nns.welfare import p_mean, utilities


def brute_force_best(sims: np.ndarray, membership: np.ndarray, k: int, eta: float, p: float = 0.0) -> tuple[float, tuple[int, ...]]:
    """max over |S| = k of M_p(S) (NSW at p = 0), and one maximiser (positions). C(L, k) evaluations: tiny L only."""
    sims = np.asarray(sims, dtype=np.float64)
    membership = np.asarray(membership, dtype=np.float64)
    best, best_set = -np.inf, ()
    for subset in itertools.combinations(range(len(sims)), min(k, len(sims))):
        idx = list(subset)
        value = p_mean(utilities(sims[idx], membership[idx]), eta, p)
        if value > best:
            best, best_set = value, subset
    return best, best_set

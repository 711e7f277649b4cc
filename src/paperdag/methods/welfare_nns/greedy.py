"""Greedy welfare maximisation over one candidate set, for items with several attributes (paper, Sec. 4).

Maximising NSW with multi-attribute items is NP-hard. Fetch L candidates (e.g. 10k) with one ANN search, then take k
greedy steps on the marginal gain of sum_l phi_p(u_l + eta) (log NSW at p = 0): for eta = 1, log(u_l + 1) is
monotone submodular with f(empty) = 0, so the greedy is a (1 - 1/e)-approximation. For p != 0 the same greedy
maximises the increase of M_p^p (p > 0) or its decrease (p < 0); run over one large global candidate set it is the
paper's "p-FetchUnion-ANN".

Vectorised: gains for all L candidates at once; after a pick only the picked item's attributes change, so only the
members of those attributes are updated (O(nnz of their columns) per step, not O(L c)).
"""

from __future__ import annotations

import numpy as np

from paperdag.methods.welfare_nns.welfare import welfare_gain


def welfare_greedy(sims: np.ndarray, membership: np.ndarray, k: int, eta: float, p: float = 0.0) -> np.ndarray:
    """Positions (into the candidate arrays) of k greedily chosen items, in pick order.

    sims (L,) sigma(q, v) of the candidates; membership (L, c) bool, item v has attribute l. Ties go to the earlier
    candidate (pass candidates in decreasing sigma to break them towards relevance).
    """
    if eta <= 0:
        raise ValueError(f"eta must be > 0, got {eta}")
    sims = np.asarray(sims, dtype=np.float64)
    membership = np.asarray(membership, dtype=bool)
    n_candidates, c = membership.shape
    if sims.shape != (n_candidates,):
        raise ValueError(f"sims has shape {sims.shape}, membership {membership.shape}: one sigma per candidate row")
    rows, cols = np.nonzero(membership.T)  # column-major: rows = attribute l, cols = its member candidates
    bounds = np.searchsorted(rows, np.arange(c + 1))
    members = [cols[bounds[l] : bounds[l + 1]] for l in range(c)]  # candidates carrying attribute l

    w = np.zeros(c)  # u_l of the partial S
    gains = np.zeros(n_candidates)  # (L,) marginal gain of every candidate
    for l in range(c):
        gains[members[l]] += welfare_gain(eta, sims[members[l]], p)
    gains[~membership.any(axis=1)] = 0.0  # an item with no attribute adds nothing to any u_l

    picked = []
    for _ in range(min(k, n_candidates)):
        j = int(np.argmax(gains))
        picked.append(j)
        for l in np.flatnonzero(membership[j]):
            m = members[l]
            old = welfare_gain(w[l] + eta, sims[m], p)
            w[l] += sims[j]
            gains[m] += welfare_gain(w[l] + eta, sims[m], p) - old
        gains[j] = -np.inf
    return np.asarray(picked, dtype=np.int64)


def p_fetch_union(sims: np.ndarray, membership: np.ndarray, k: int, eta: float, p: float) -> np.ndarray:
    """p-FetchUnion-ANN's selection step: the p-mean greedy inside one large candidate set (sims, membership)."""
    return welfare_greedy(sims, membership, k, eta, p)

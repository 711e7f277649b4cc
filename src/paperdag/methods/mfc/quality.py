"""How good a completed tree is: its cost, whether it spans, the learned forest's quality gamma and the
instance-specific bound alpha.

Guarantees checked against these (Veldt et al., ICLR 2026):
  w(F_t + completion) <= 2 * w(F_t + optimal completion)      (MFC, any number of reps >= 1 per component)
  w(F_t + completion) <= 2 * gamma * w(MST)                   (metric MST; gamma = w(F_t) / w(T* inside the P_i))
  w(F_t + completion) <= alpha * w(F_t + optimal completion)  (alpha = 1 + sum_i rho_i / w(F_t), per allocation)
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from paperdag.methods.mfc.completion import Completion
from paperdag.methods.mfc.forest import LearnedForest

MFC_FACTOR = 2.0  # w(T) <= 2 * w(optimal completion)


def completed_tree(forest: LearnedForest, completion: Completion) -> tuple[np.ndarray, np.ndarray]:
    """Edges (n-1, 2) and weights of F_t plus the completion edges."""
    return (
        np.concatenate([forest.edges, completion.edges]).reshape(-1, 2),
        np.concatenate([forest.weights, completion.weights]),
    )


def tree_cost(forest: LearnedForest, completion: Completion) -> float:
    """w(F_t) + w(completion): the objective both bounds are stated for."""
    return forest.cost + completion.cost


def is_spanning_tree(n: int, edges: np.ndarray) -> bool:
    """True when `edges` has n - 1 pairs and connects all n points."""
    if len(edges) != max(n - 1, 0):
        return False
    if n <= 1:
        return True
    graph = sp.coo_matrix((np.ones(len(edges)), (edges[:, 0], edges[:, 1])), shape=(n, n))
    return connected_components(graph, directed=False)[0] == 1


def gamma_weight_ratio(labels: np.ndarray, forest_cost: float, mst_edges: np.ndarray, mst_weights: np.ndarray) -> float:
    """gamma = w(F_t) / w(T* restricted to the components): the paper's and the official code's forest quality.

    T* is an exact MST; its edges with both ends in one P_i form the denominator. The edges of T* between
    components then complete F_t, so w(F_t + optimal completion) <= w(F_t) + w(T* between) <= max(1, gamma) w(T*),
    and a 2-approximate completion is within 2 max(1, gamma) w(T*) (`mst_bound`). With every component a single
    point both weights are 0 and gamma is 1; a forest of positive weight over a zero-weight restriction is inf.
    """
    inside = labels[mst_edges[:, 0]] == labels[mst_edges[:, 1]]
    restricted = float(mst_weights[inside].sum())
    if restricted > 0:
        return forest_cost / restricted
    return 1.0 if forest_cost <= 0 else float("inf")


def gamma_overlap(labels: np.ndarray, mst_edges: np.ndarray) -> int:
    """The largest number of pieces any component P_i breaks into under the MST T*: a combinatorial overlap count,
    reported beside gamma (it is not the paper's gamma, and 2 x it is no useful bound: 57 at n = 5000).

    The restriction of T* to P_i is a forest with |P_i| - (edges of T* inside P_i) trees; gamma = 1 iff F_t's
    partition is a sub-forest partition of T*. With ties several MSTs exist and gamma is their minimum, so the
    value for the given T* is an upper bound and 2 * gamma * w(MST) stays a valid bound.
    """
    sizes = np.bincount(labels)
    inside = labels[mst_edges[:, 0]] == labels[mst_edges[:, 1]]
    internal = np.bincount(labels[mst_edges[inside, 0]], minlength=len(sizes))
    return int((sizes - internal).max())


def mst_bound(gamma: float) -> float:
    """The metric-MST factor 2 * max(1, gamma) (gamma from `gamma_weight_ratio`; below 1 the optimal completion is
    the MST itself, so the factor is 2)."""
    return MFC_FACTOR * max(1.0, gamma)


def alpha_bound(radius_sum: float, forest_cost: float) -> float:
    """alpha = 1 + sum_i rho_i(r_i) / w(F_t): the instance-specific factor of a completion with covering radii rho_i
    (the quantity greedy-B and dp-B minimise; <= 2 whatever the allocation, since rho_i <= w(T_i))."""
    if forest_cost > 0:
        return 1.0 + radius_sum / forest_cost
    return 1.0 if radius_sum <= 0 else float("inf")

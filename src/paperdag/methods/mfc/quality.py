"""How good a completed tree is: its cost, whether it spans, and the learned forest's quality gamma.

Guarantees checked against these (Veldt et al., ICLR 2026):
  w(F_t + completion) <= 2 * w(F_t + optimal completion)      (MFC, any number of reps >= 1 per component)
  w(F_t + completion) <= 2 * gamma * w(MST)                   (metric MST, when each T_i is an MST of P_i)
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


def gamma_overlap(labels: np.ndarray, mst_edges: np.ndarray) -> int:
    """gamma: the largest number of pieces any component P_i breaks into under the MST T* (Veldt et al. 2025).

    The restriction of T* to P_i is a forest with |P_i| - (edges of T* inside P_i) trees; gamma = 1 iff F_t's
    partition is a sub-forest partition of T*. With ties several MSTs exist and gamma is their minimum, so the
    value for the given T* is an upper bound and 2 * gamma * w(MST) stays a valid bound.
    """
    sizes = np.bincount(labels)
    inside = labels[mst_edges[:, 0]] == labels[mst_edges[:, 1]]
    internal = np.bincount(labels[mst_edges[inside, 0]], minlength=len(sizes))
    return int((sizes - internal).max())


def mst_bound(gamma: int) -> float:
    """The metric-MST factor 2 * gamma."""
    return 2.0 * gamma

"""The paper's baselines over one candidate set: plain top-k, Div-ANN (a per-attribute cap k'), MMR (lambda)."""

from __future__ import annotations

import numpy as np


def top_k(sims: np.ndarray, k: int) -> np.ndarray:
    """Positions of the k largest sigma, in decreasing order (ties: the earlier candidate first)."""
    return np.argsort(-np.asarray(sims, dtype=np.float64), kind="stable")[:k]


def div_ann(sims: np.ndarray, attributes: np.ndarray, k: int, cap: int) -> np.ndarray:
    """Div-ANN: scan candidates by decreasing sigma, keep one unless its attribute already holds k' = cap items.

    Single-attribute items. Returns fewer than k positions when the candidates cannot fill k under the cap;
    cap >= k is plain top-k.
    """
    if cap < 1:
        raise ValueError(f"the per-attribute cap k' must be >= 1, got {cap}")
    order = np.argsort(-np.asarray(sims, dtype=np.float64), kind="stable")
    attrs = np.asarray(attributes)[order]
    # rank of each candidate among the earlier-scanned candidates of its attribute
    by_attr = np.argsort(attrs, kind="stable")
    sorted_attrs = attrs[by_attr]
    starts = np.flatnonzero(np.r_[True, sorted_attrs[1:] != sorted_attrs[:-1]])
    group_start = np.repeat(starts, np.diff(np.r_[starts, len(attrs)]))
    rank = np.empty(len(attrs), dtype=np.int64)
    rank[by_attr] = np.arange(len(attrs)) - group_start
    return order[rank < cap][:k]


def mmr(sims: np.ndarray, vectors: np.ndarray, k: int, lam: float) -> np.ndarray:
    """Maximal marginal relevance: k picks of argmax lam * sigma(q, v) - (1 - lam) * max_{s in S} cos(v, s).

    sims (L,) relevance, vectors (L, d) candidate embeddings (normalised here). lam = 1 is plain top-k.
    """
    if not 0.0 <= lam <= 1.0:
        raise ValueError(f"MMR lambda must lie in [0, 1], got {lam}")
    sims = np.asarray(sims, dtype=np.float64)
    unit = np.asarray(vectors, dtype=np.float64)
    unit = unit / np.maximum(np.linalg.norm(unit, axis=1, keepdims=True), 1e-12)
    redundancy = np.full(len(sims), -np.inf)  # max cos to the picked set; -inf = nothing picked yet (counts as 0)
    available = np.ones(len(sims), dtype=bool)
    picked = []
    for _ in range(min(k, len(sims))):
        penalty = np.where(np.isinf(redundancy), 0.0, redundancy)
        score = np.where(available, lam * sims - (1.0 - lam) * penalty, -np.inf)
        j = int(np.argmax(score))
        picked.append(j)
        available[j] = False
        redundancy = np.maximum(redundancy, unit @ unit[j])  # (L,)
    return np.asarray(picked, dtype=np.int64)

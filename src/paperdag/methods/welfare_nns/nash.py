"""Nash-ANN (paper, Alg. 1): NSW-optimal k items when every item carries one attribute.

Given, for each attribute a, its k nearest items ranked by sigma (from any per-attribute or filtered ANN search),
take k steps; each picks the attribute maximising log(w_a + eta + sigma(q, next_a)) - log(w_a + eta) and takes a's
next item (w_a += its sigma). log NSW is separable and concave in each attribute's prefix, so with an exact oracle
this greedy is optimal; with an alpha-approximate ANN it is alpha-approximate. Cost beyond the searches: O(k c).
The same loop with phi_p in place of log maximises any p-mean M_p, p <= 1 (welfare_gain).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

RankedList = tuple[np.ndarray, np.ndarray]  # (ids (m,), sigma (m,)) of one attribute's nearest items


@dataclass(frozen=True)
class Selection:
    """A result set S in pick order: item ids, sigma(q, v), and the attribute each item was taken for."""

    ids: np.ndarray  # (k,) int64
    sims: np.ndarray  # (k,) float64
    attributes: np.ndarray  # (k,) the attribute keys, as given


def nash_ann(lists: Mapping[Hashable, RankedList] | Sequence[RankedList], k: int, eta: float, p: float = 0.0) -> Selection:
    """S maximising NSW (p = 0) or M_p (p <= 1) over the union of per-attribute ranked lists, |S| = min(k, total).

    lists: attribute -> (ids, sigma); a sequence is read as attributes 0..c-1. Ids < 0 (an ANN index's padding) are
    dropped; each list is (re)sorted by decreasing sigma, ties kept in the given order.
    """
    by_attribute = dict(lists) if isinstance(lists, Mapping) else dict(enumerate(lists))
    keys = list(by_attribute)
    ids = np.concatenate([np.asarray(by_attribute[key][0], dtype=np.int64).ravel() for key in keys] or [np.zeros(0, np.int64)])
    sims = np.concatenate([np.asarray(by_attribute[key][1], dtype=np.float64).ravel() for key in keys] or [np.zeros(0)])
    owner = np.repeat(np.arange(len(keys)), [np.asarray(by_attribute[key][0]).size for key in keys])
    keep = ids >= 0
    ids, sims, owner = ids[keep], sims[keep], owner[keep]
    chosen = nash_select(sims, owner, k, eta, p)
    return Selection(ids=ids[chosen], sims=sims[chosen], attributes=np.asarray([keys[a] for a in owner[chosen]]))


def nash_select(sims: np.ndarray, attributes: np.ndarray, k: int, eta: float, p: float = 0.0) -> np.ndarray:
    """Nash-ANN's k steps over candidates given flat: positions (into sims) in pick order.

    sims (L,) sigma of every candidate, attributes (L,) its single attribute; the candidates of one attribute are
    its ranked list (sorted here by decreasing sigma, ties in the given order). O(L log L + k c) scalar work.
    """
    if eta <= 0:
        raise ValueError(f"eta must be > 0 (log(u_l + eta) must be finite at u_l = 0), got {eta}")
    sims = np.asarray(sims, dtype=np.float64)
    attributes = np.asarray(attributes)
    order = np.lexsort((-sims, attributes))  # attribute by attribute, each by decreasing sigma (stable)
    grouped = attributes[order]
    starts = np.flatnonzero(np.r_[True, grouped[1:] != grouped[:-1]]) if len(order) else np.zeros(0, np.int64)
    ranked = sims[order].tolist()
    nxt = starts.tolist()  # per attribute a: position (in `ranked`) of a's next item
    end = [*starts[1:].tolist(), len(order)]
    w = [0.0] * len(nxt)  # w_a: sigma mass taken from attribute a so far (u_a of the partial S)
    gains = [_gain(eta, ranked[i], p) for i in nxt]  # log(w_a + eta + sigma(q, next_a)) - log(w_a + eta)
    picked = []
    for _ in range(min(k, len(order))):
        a = max(range(len(gains)), key=gains.__getitem__)  # first maximum, as argmax
        picked.append(order[nxt[a]])
        w[a] += ranked[nxt[a]]
        nxt[a] += 1
        gains[a] = _gain(w[a] + eta, ranked[nxt[a]], p) if nxt[a] < end[a] else -math.inf
    return np.asarray(picked, dtype=np.int64)


def _gain(base: float, s: float, p: float) -> float:
    """welfare_gain for one attribute, in plain floats (the loop runs k times; numpy's per-call cost would dominate)."""
    if p == 0:
        return math.log1p(s / base)
    if p == 1:
        return s
    return ((base + s) ** p - base**p) / p

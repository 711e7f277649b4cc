"""Nash-ANN (paper, Alg. 1): NSW-optimal k items when every item carries one attribute.

Given, for each attribute a, its k nearest items ranked by sigma (from any per-attribute or filtered ANN search),
take k steps; each picks the attribute maximising log(w_a + eta + sigma(q, next_a)) - log(w_a + eta) and takes a's
next item (w_a += its sigma). log NSW is separable and concave in each attribute's prefix, so with an exact oracle
this greedy is optimal; with an alpha-approximate ANN it is alpha-approximate. Cost beyond the searches: O(k c).
The same loop with phi_p in place of log maximises any p-mean M_p, p <= 1 (welfare_gain).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from paperdag.methods.welfare_nns.welfare import welfare_gain

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
    if eta <= 0:
        raise ValueError(f"eta must be > 0 (log(u_l + eta) must be finite at u_l = 0), got {eta}")
    by_attribute = dict(lists) if isinstance(lists, Mapping) else dict(enumerate(lists))
    keys = list(by_attribute)
    ranked_ids, ranked_sims = [], []
    for key in keys:
        ids, sims = (np.asarray(x) for x in by_attribute[key])
        keep = ids >= 0
        ids, sims = ids[keep].astype(np.int64), sims[keep].astype(np.float64)
        order = np.argsort(-sims, kind="stable")
        ranked_ids.append(ids[order])
        ranked_sims.append(sims[order])

    c = len(keys)
    w = np.zeros(c)  # w_a: sigma mass taken from attribute a so far (u_a of the partial S)
    nxt = np.zeros(c, dtype=np.int64)  # position of a's next item in its ranked list
    lengths = np.array([len(s) for s in ranked_sims], dtype=np.int64)
    heads = np.array([s[0] if len(s) else 0.0 for s in ranked_sims])  # sigma(q, next_a)
    gains = np.where(lengths > 0, welfare_gain(w + eta, heads, p), -np.inf)

    picked_ids, picked_sims, picked_attrs = [], [], []
    for _ in range(k):
        a = int(np.argmax(gains))  # argmax_a log(w_a + eta + sigma(q, next_a)) - log(w_a + eta)
        if gains[a] == -np.inf:
            break  # every list exhausted
        s = ranked_sims[a][nxt[a]]
        picked_ids.append(ranked_ids[a][nxt[a]])
        picked_sims.append(s)
        picked_attrs.append(keys[a])
        w[a] += s
        nxt[a] += 1
        gains[a] = welfare_gain(w[a] + eta, ranked_sims[a][nxt[a]], p) if nxt[a] < lengths[a] else -np.inf
    return Selection(
        ids=np.asarray(picked_ids, dtype=np.int64),
        sims=np.asarray(picked_sims, dtype=np.float64),
        attributes=np.asarray(picked_attrs),
    )

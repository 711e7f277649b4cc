"""Tiny random instances for the welfare_nns tests: per-attribute ranked lists and multi-attribute candidate sets."""

from __future__ import annotations

import numpy as np

from paperdag.methods.welfare_nns import RankedList


def single_attribute_instance(seed: int, c: int = 3, per_attribute: int = 4) -> tuple[np.ndarray, np.ndarray, list[RankedList]]:
    """(sims (n,), attributes (n,), ranked lists per attribute) with sigma in (0, 2], ids 0..n-1."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, per_attribute + 1, size=c)
    attributes = np.repeat(np.arange(c), sizes)
    sims = rng.uniform(0.05, 2.0, size=len(attributes))
    lists = []
    for a in range(c):
        ids = np.flatnonzero(attributes == a)
        lists.append((ids, sims[ids]))  # unsorted on purpose: nash_ann ranks each list
    return sims, attributes, lists


def multi_attribute_instance(seed: int, n: int = 9, c: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """(sims (n,), membership (n, c)) with 1..3 attributes per item."""
    rng = np.random.default_rng(seed)
    membership = np.zeros((n, c), dtype=bool)
    for i in range(n):
        membership[i, rng.choice(c, size=int(rng.integers(1, min(3, c) + 1)), replace=False)] = True
    return rng.uniform(0.05, 2.0, size=n), membership

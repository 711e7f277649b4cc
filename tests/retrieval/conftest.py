"""Shared data for the retrieval tests: seeded vectors, clustered like the embeddings the indexes serve."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def mixture(n: int, dim: int, centers: int, seed: int) -> np.ndarray:
    """n float32 points around `centers` Gaussian centres (unit spread), cluster scale 3."""
    rng = np.random.default_rng(seed)
    mu = rng.standard_normal((centers, dim)) * 3.0
    return (mu[rng.integers(0, centers, n)] + rng.standard_normal((n, dim))).astype(np.float32)


@pytest.fixture(scope="module")
def points() -> tuple[np.ndarray, np.ndarray]:
    """5000 base vectors and 200 queries (dim 32) from the same mixture."""
    x = mixture(5200, 32, centers=40, seed=0)
    return x[:5000], x[5000:]


@pytest.fixture(scope="module")
def built(points):
    """build(kind, metric, **kw) -> AnnIndex over the 5000 base points, each distinct build made once per module."""
    from paperdag.retrieval import AnnIndex

    cache: dict[tuple, AnnIndex] = {}

    def build(kind: str, metric: str = "ip", **kw) -> AnnIndex:
        if kind != "ivf":  # nlist / nprobe do not change other kinds
            kw = {k: v for k, v in kw.items() if k not in ("nlist", "nprobe")}
        key = (kind, metric, tuple(sorted(kw.items())))
        if key not in cache:
            cache[key] = AnnIndex.build(points[0], kind=kind, metric=metric, **kw)
        return cache[key]

    return build

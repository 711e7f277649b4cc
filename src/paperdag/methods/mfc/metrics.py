"""Metric spaces over a fixed point set, each counting its distance calls.

Every space answers one question, `a.pairwise(b)`: the (len(a), len(b)) matrix of distances,
and adds len(a) * len(b) to its shared `CallCounter` -- one "distance call" per point pair evaluated,
the unit in which the paper measures cost (Veldt et al. 2025; 2026). Vector metrics are vectorised;
`CallableSpace` is the generic per-pair path for any metric d(x, y).
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Self

import numpy as np
import scipy.sparse as sp
from rapidfuzz import process
from rapidfuzz.distance import Levenshtein

IndexLike = Sequence[int] | np.ndarray


@dataclass
class CallCounter:
    """Number of point pairs whose distance has been evaluated."""

    calls: int = 0


class MetricSpace(ABC):
    """A finite point set with a distance; subsets made by `take` share the parent's counter."""

    metric: str = "abstract"

    def __init__(self, counter: CallCounter | None = None) -> None:
        self.counter = counter if counter is not None else CallCounter()

    @abstractmethod
    def __len__(self) -> int: ...

    @abstractmethod
    def _take(self, idx: np.ndarray) -> Self:
        """The points at `idx`, as a new space (counter is attached by `take`)."""

    @abstractmethod
    def _pairwise(self, other: Self) -> np.ndarray:
        """Distances (len(self), len(other)), float64, without counting."""

    def take(self, idx: IndexLike) -> Self:
        """The sub-space of the points at `idx` (same counter)."""
        sub = self._take(np.asarray(idx, dtype=np.int64))
        sub.counter = self.counter
        return sub

    def pairwise(self, other: Self) -> np.ndarray:
        """Distance matrix (len(self), len(other)); counts len(self) * len(other) calls."""
        self.counter.calls += len(self) * len(other)
        return self._pairwise(other)

    def counting(self) -> tuple[Self, CallCounter]:
        """The counting wrapper: the same points with a fresh counter, and that counter."""
        counted = copy.copy(self)
        counted.counter = CallCounter()
        return counted, counted.counter


class EuclideanSpace(MetricSpace):
    """Points in R^d; a block of distances is one matrix product (||a||^2 + ||b||^2 - 2 a.b)."""

    metric = "euclidean"

    def __init__(self, points: np.ndarray, counter: CallCounter | None = None) -> None:
        super().__init__(counter)
        self.points = np.ascontiguousarray(points, dtype=np.float64)  # (n, d)
        if self.points.ndim != 2:
            raise ValueError(f"EuclideanSpace needs an (n, d) array, got shape {self.points.shape}")
        self.sq_norms = np.einsum("ij,ij->i", self.points, self.points)  # (n,)

    def __len__(self) -> int:
        return self.points.shape[0]

    def _take(self, idx: np.ndarray) -> EuclideanSpace:
        return EuclideanSpace(self.points[idx])

    def _pairwise(self, other: EuclideanSpace) -> np.ndarray:
        if len(self) == 1:  # one row (Prim, k-center): a single-threaded matrix-vector product, which BLAS
            # threads do not speed up and which they slow down severalfold when the cores are shared
            sq = np.einsum("ij,j->i", other.points, self.points[0])[None, :]  # (1, b)
        else:
            sq = self.points @ other.points.T  # (a, b)
        sq *= -2.0
        sq += self.sq_norms[:, None]
        sq += other.sq_norms[None, :]
        np.maximum(sq, 0.0, out=sq)
        return np.sqrt(sq, out=sq)


class HammingSpace(MetricSpace):
    """Bit strings of equal length; d = number of differing bits = |a| + |b| - 2 a.b."""

    metric = "hamming"

    def __init__(self, bits: np.ndarray, counter: CallCounter | None = None) -> None:
        super().__init__(counter)
        bits = np.asarray(bits)
        if bits.ndim != 2 or not np.isin(bits, (0, 1)).all():
            raise ValueError("HammingSpace needs an (n, m) array of 0/1 bits")
        self.bits = np.ascontiguousarray(bits, dtype=np.float32)  # (n, m); exact up to m < 2**24
        self.ones = self.bits.sum(axis=1, dtype=np.float64)  # (n,)

    def __len__(self) -> int:
        return self.bits.shape[0]

    def _take(self, idx: np.ndarray) -> HammingSpace:
        return HammingSpace(self.bits[idx])

    def _pairwise(self, other: HammingSpace) -> np.ndarray:
        shared = (self.bits @ other.bits.T).astype(np.float64)  # (a, b) bits set in both
        return self.ones[:, None] + other.ones[None, :] - 2.0 * shared


class JaccardSpace(MetricSpace):
    """Finite sets of integer items; d = 1 - |A & B| / |A | B| (0 for two empty sets)."""

    metric = "jaccard"

    def __init__(self, incidence: sp.csr_matrix, counter: CallCounter | None = None) -> None:
        super().__init__(counter)
        self.incidence = sp.csr_matrix(incidence, dtype=np.float64)  # (n, vocabulary) 0/1
        self.sizes = np.asarray(self.incidence.sum(axis=1)).ravel()  # (n,)

    @classmethod
    def from_sets(cls, sets: Sequence[Sequence[int]], vocabulary: int | None = None) -> JaccardSpace:
        """Build from item lists (duplicates inside a set are ignored)."""
        uniq = [np.unique(np.asarray(s, dtype=np.int64)) for s in sets]
        cols = np.concatenate(uniq) if uniq else np.zeros(0, np.int64)
        rows = np.repeat(np.arange(len(uniq)), [len(u) for u in uniq])
        width = vocabulary if vocabulary is not None else int(cols.max(initial=-1)) + 1
        data = np.ones(len(cols), dtype=np.float64)
        return cls(sp.csr_matrix((data, (rows, cols)), shape=(len(uniq), width)))

    def __len__(self) -> int:
        return self.incidence.shape[0]

    def _take(self, idx: np.ndarray) -> JaccardSpace:
        return JaccardSpace(self.incidence[idx])

    def _pairwise(self, other: JaccardSpace) -> np.ndarray:
        inter = (self.incidence @ other.incidence.T).toarray()  # (a, b) |A & B|
        union = self.sizes[:, None] + other.sizes[None, :] - inter
        with np.errstate(invalid="ignore", divide="ignore"):
            dist = 1.0 - inter / union
        dist[union == 0] = 0.0
        return dist


class EditSpace(MetricSpace):
    """Strings under Levenshtein (unit-cost edit) distance, one-to-many via rapidfuzz."""

    metric = "edit"

    def __init__(self, strings: Sequence[str], counter: CallCounter | None = None) -> None:
        super().__init__(counter)
        self.strings = list(strings)

    def __len__(self) -> int:
        return len(self.strings)

    def _take(self, idx: np.ndarray) -> EditSpace:
        return EditSpace([self.strings[i] for i in idx])

    def _pairwise(self, other: EditSpace) -> np.ndarray:
        if len(self) == 0 or len(other) == 0:
            return np.zeros((len(self), len(other)))
        return process.cdist(
            self.strings, other.strings, scorer=Levenshtein.distance, dtype=np.int32, workers=-1
        ).astype(np.float64)


class CallableSpace(MetricSpace):
    """Any objects with any metric `distance(x, y)`: the generic path, one Python call per pair."""

    metric = "callable"

    def __init__(
        self,
        items: Sequence[Any],
        distance: Callable[[Any, Any], float],
        counter: CallCounter | None = None,
    ) -> None:
        super().__init__(counter)
        self.items = list(items)
        self.distance = distance

    def __len__(self) -> int:
        return len(self.items)

    def _take(self, idx: np.ndarray) -> CallableSpace:
        return CallableSpace([self.items[i] for i in idx], self.distance)

    def _pairwise(self, other: CallableSpace) -> np.ndarray:
        out = np.empty((len(self), len(other)))
        for a, x in enumerate(self.items):
            for b, y in enumerate(other.items):
                out[a, b] = self.distance(x, y)
        return out

"""Approximate nearest-neighbour search on faiss: one index (flat, HNSW or IVF) and one index per attribute value.

Scores are similarities (inner product, higher is better) for metric "ip" and squared Euclidean distances
(lower is better, faiss's convention) for metric "l2". Missing results are id -1 with score -inf ("ip") or +inf ("l2").
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import faiss
import numpy as np

KINDS = ("flat", "hnsw", "ivf")
METRICS = ("ip", "l2")
_FAISS_METRIC = {"ip": faiss.METRIC_INNER_PRODUCT, "l2": faiss.METRIC_L2}
# a subset at most this large is searched exactly (vectors reconstructed from the index, scored with numpy):
# filtered HNSW/IVF search loses recall, and returns fewer than k hits, when the subset is a small fraction of the index
EXACT_SUBSET_MAX = 4096


@dataclass(frozen=True)
class AnnConfig:
    """What built an AnnIndex; written next to the index as config.json."""

    kind: str
    metric: str
    dim: int
    hnsw_m: int = 32  # HNSW: graph degree M (2M links on layer 0)
    ef_construction: int = 200  # HNSW: beam width while inserting
    ef_search: int = 64  # HNSW: beam width while searching (raised to k when k is larger)
    nlist: int = 256  # IVF: number of k-means cells (lowered to the number of vectors when fewer)
    nprobe: int = 16  # IVF: cells visited per query
    seed: int = 0  # IVF k-means seed; HNSW level-assignment seed (HNSW insertion is multi-threaded, so two builds
    # may still differ slightly; faiss.omp_set_num_threads(1) makes them identical)


def _check_choice(value: str, allowed: tuple[str, ...], what: str) -> None:
    if value not in allowed:
        raise ValueError(f"unknown {what} {value!r}: use one of {', '.join(map(repr, allowed))}")


def _as_matrix(x: np.ndarray, dim: int | None, what: str) -> np.ndarray:
    """A C-contiguous float32 (n, dim) matrix; a single vector (dim,) becomes (1, dim)."""
    a = np.asarray(x)
    if a.ndim == 1:
        a = a[None, :]
    if a.ndim != 2:
        raise ValueError(f"{what} must be a 2-D array (n, dim); got shape {a.shape}")
    if dim is not None and a.shape[1] != dim:
        raise ValueError(f"{what} have dimension {a.shape[1]} but the index holds vectors of dimension {dim}")
    if not np.issubdtype(a.dtype, np.number):
        raise ValueError(f"{what} must be numeric; got dtype {a.dtype}")
    return np.ascontiguousarray(a, dtype=np.float32)


def _pad_scores(scores: np.ndarray, ids: np.ndarray, metric: str) -> np.ndarray:
    scores[ids < 0] = -np.inf if metric == "ip" else np.inf
    return scores


class AnnIndex:
    """A faiss index over vectors with ids 0..n-1 (the row numbers of the vectors it was built from).

    >>> index = AnnIndex.build(vectors, kind="hnsw", metric="ip")
    >>> scores, ids = index.search(queries, k=10)                 # (m, 10), (m, 10)
    >>> scores, ids = index.search(queries, k=10, subset=rows)    # only ids in `rows`
    """

    def __init__(self, index: faiss.Index, config: AnnConfig) -> None:
        self.index = index
        self.config = config

    @property
    def ntotal(self) -> int:
        return int(self.index.ntotal)

    @property
    def dim(self) -> int:
        return self.config.dim

    @property
    def kind(self) -> str:
        return self.config.kind

    @property
    def metric(self) -> str:
        return self.config.metric

    def __repr__(self) -> str:
        return f"AnnIndex(kind={self.kind!r}, metric={self.metric!r}, ntotal={self.ntotal}, dim={self.dim})"

    @classmethod
    def build(
        cls,
        vectors: np.ndarray,
        kind: str = "hnsw",
        metric: str = "ip",
        *,
        hnsw_m: int = 32,
        ef_construction: int = 200,
        ef_search: int = 64,
        nlist: int = 256,
        nprobe: int = 16,
        seed: int = 0,
    ) -> AnnIndex:
        """Index `vectors` (n, d); row i gets id i. For cosine similarity, L2-normalise the vectors and use "ip"."""
        _check_choice(kind, KINDS, "index kind")
        _check_choice(metric, METRICS, "metric")
        x = _as_matrix(vectors, None, "vectors")
        n, d = x.shape
        if d == 0:
            raise ValueError("vectors have dimension 0")
        if kind == "ivf" and n == 0:
            raise ValueError("an IVF index needs at least one vector to train its k-means cells")
        config = AnnConfig(kind=kind, metric=metric, dim=d, hnsw_m=hnsw_m, ef_construction=ef_construction,
                           ef_search=ef_search, nlist=min(nlist, max(n, 1)) if kind == "ivf" else nlist,
                           nprobe=nprobe, seed=seed)
        fmetric = _FAISS_METRIC[metric]
        if kind == "flat":
            index: faiss.Index = faiss.IndexFlat(d, fmetric)
            index.add(x)
        elif kind == "hnsw":
            index = faiss.IndexHNSWFlat(d, hnsw_m, fmetric)
            index.hnsw.efConstruction = ef_construction
            index.hnsw.efSearch = ef_search
            index.hnsw.rng = faiss.RandomGenerator(seed)
            index.add(x)
        else:
            quantizer = faiss.IndexFlat(d, fmetric)
            index = faiss.IndexIVFFlat(quantizer, d, config.nlist, fmetric)
            index.cp.seed = seed
            index.train(x)
            index.add(x)
            index.nprobe = min(nprobe, config.nlist)
            index.make_direct_map()  # lets reconstruct() fetch vectors by id, for the exact small-subset search
            # the IVF index owns its quantizer only through this Python reference unless told otherwise
            index.own_fields = True
            quantizer.this.disown()
        return cls(index, config)

    def _params(self, sel: faiss.IDSelector | None, k: int, ef_search: int | None,
                nprobe: int | None) -> faiss.SearchParameters:
        if self.kind == "hnsw":
            return faiss.SearchParametersHNSW(sel=sel, efSearch=max(ef_search or self.config.ef_search, k))
        if self.kind == "ivf":
            return faiss.SearchParametersIVF(sel=sel, nprobe=min(nprobe or self.config.nprobe, self.config.nlist))
        return faiss.SearchParameters(sel=sel)

    def search(
        self,
        queries: np.ndarray,
        k: int,
        subset: np.ndarray | None = None,
        *,
        ef_search: int | None = None,
        nprobe: int | None = None,
        exact_subset_max: int = EXACT_SUBSET_MAX,
    ) -> tuple[np.ndarray, np.ndarray]:
        """The k best ids per query: (scores float32 (m, k), ids int64 (m, k)), best first, -1 where fewer exist.

        subset: ids to search among (others are never returned). A subset of at most `exact_subset_max` ids is
        searched exactly whatever the index kind; a larger one by faiss filtered search (IDSelectorBatch).
        ef_search / nprobe override the build-time values for this call (HNSW / IVF).
        """
        if k < 1:
            raise ValueError(f"k must be >= 1; got {k}")
        q = _as_matrix(queries, self.dim, "queries")
        if subset is None:
            scores, ids = self.index.search(q, k, params=self._params(None, k, ef_search, nprobe))
            return _pad_scores(scores, ids, self.metric), ids
        sub = np.unique(np.asarray(subset, dtype=np.int64).ravel())
        if sub.size and (sub[0] < 0 or sub[-1] >= self.ntotal):
            raise ValueError(f"subset holds ids outside 0..{self.ntotal - 1} (min {sub[0]}, max {sub[-1]})")
        if sub.size <= exact_subset_max:
            return self._exact_search(q, k, sub)
        sel = faiss.IDSelectorBatch(sub)
        scores, ids = self.index.search(q, k, params=self._params(sel, k, ef_search, nprobe))
        return _pad_scores(scores, ids, self.metric), ids

    def _exact_search(self, q: np.ndarray, k: int, sub: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Brute force over the ids `sub` (sorted, unique), with faiss's flat kernels for identical scores."""
        m = q.shape[0]
        ids = np.full((m, k), -1, dtype=np.int64)
        scores = _pad_scores(np.zeros((m, k), dtype=np.float32), ids, self.metric)
        if sub.size == 0:
            return scores, ids
        flat = faiss.IndexFlat(self.dim, _FAISS_METRIC[self.metric])
        flat.add(self.index.reconstruct_batch(sub))
        kk = min(k, sub.size)
        s, local = flat.search(q, kk)
        scores[:, :kk] = s
        ids[:, :kk] = np.where(local >= 0, sub[np.maximum(local, 0)], -1)
        return _pad_scores(scores, ids, self.metric), ids

    def save(self, path: Path) -> None:
        """Write the directory `path` with index.faiss (faiss.write_index) and config.json."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        faiss.write_index(self.index, str(path / "index.faiss"))
        (path / "config.json").write_text(json.dumps(asdict(self.config), indent=2) + "\n")

    @classmethod
    def load(cls, path: Path) -> AnnIndex:
        """Read a directory written by save()."""
        path = Path(path)
        for name in ("index.faiss", "config.json"):
            if not (path / name).exists():
                raise FileNotFoundError(f"{path / name} is missing: {path} is not a directory written by AnnIndex.save")
        config = AnnConfig(**json.loads((path / "config.json").read_text()))
        index = faiss.read_index(str(path / "index.faiss"))
        if index.d != config.dim:
            raise ValueError(f"{path}: index.faiss holds dimension {index.d} but config.json says {config.dim}")
        return cls(index, config)


class PerAttributeIndex:
    """One AnnIndex per attribute value, each over the rows carrying that value; searches return global row ids.

    >>> per = PerAttributeIndex.build(vectors, attributes)       # attributes: (n,) int labels
    >>> scores, ids = per.search(queries, k=10, attribute=3)      # ids are rows of `vectors` with attributes == 3
    >>> results = per.search_each(queries, k=10)                  # {attribute: (scores, ids)}
    """

    def __init__(self, indexes: dict[int, AnnIndex], ids: dict[int, np.ndarray]) -> None:
        self.indexes = indexes
        self.ids = ids  # attribute -> int64 global ids, aligned with that index's local ids

    @property
    def attributes(self) -> list[int]:
        return sorted(self.indexes)

    @property
    def ntotal(self) -> int:
        return sum(ix.ntotal for ix in self.indexes.values())

    @property
    def dim(self) -> int:
        return next(iter(self.indexes.values())).dim

    def __repr__(self) -> str:
        sizes = {a: self.indexes[a].ntotal for a in self.attributes}
        return f"PerAttributeIndex(sizes={sizes})"

    @classmethod
    def build(cls, vectors: np.ndarray, attributes: np.ndarray, kind: str = "hnsw", metric: str = "ip",
              **kw: Any) -> PerAttributeIndex:
        """Split `vectors` (n, d) by `attributes` (n,) integer labels; kw goes to AnnIndex.build."""
        x = _as_matrix(vectors, None, "vectors")
        attrs = np.asarray(attributes)
        if attrs.ndim != 1 or attrs.shape[0] != x.shape[0]:
            raise ValueError(f"attributes must be one integer label per vector, shape ({x.shape[0]},); got {attrs.shape}")
        if attrs.size and not np.issubdtype(attrs.dtype, np.integer):
            raise ValueError(f"attributes must be integer labels; got dtype {attrs.dtype} (map values to ints first)")
        if attrs.size == 0:
            raise ValueError("no vectors to index: PerAttributeIndex needs at least one vector")
        indexes, ids = {}, {}
        for a in np.unique(attrs):
            rows = np.flatnonzero(attrs == a).astype(np.int64)
            indexes[int(a)] = AnnIndex.build(x[rows], kind=kind, metric=metric, **kw)
            ids[int(a)] = rows
        return cls(indexes, ids)

    def search(self, queries: np.ndarray, k: int, attribute: int, *, ef_search: int | None = None,
               nprobe: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The k best rows carrying `attribute`: (scores (m, k), global ids (m, k)), -1 padded.

        ef_search / nprobe override the build-time values for this call, as in AnnIndex.search.
        """
        if attribute not in self.indexes:
            raise KeyError(f"attribute {attribute!r} has no vectors in this index; attributes present: {self.attributes}")
        scores, local = self.indexes[attribute].search(queries, k, ef_search=ef_search, nprobe=nprobe)
        rows = self.ids[attribute]
        return scores, np.where(local >= 0, rows[np.maximum(local, 0)], -1)

    def search_each(self, queries: np.ndarray, k: int, *, ef_search: int | None = None,
                    nprobe: int | None = None) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """search() for every attribute: {attribute: (scores (m, k), global ids (m, k))}."""
        return {a: self.search(queries, k, a, ef_search=ef_search, nprobe=nprobe) for a in self.attributes}

    def save(self, path: Path) -> None:
        """Write `path`/attributes.json and, per attribute a, `path`/attr_<a>/ (an AnnIndex) with ids.npy beside it."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        for a in self.attributes:
            sub = path / f"attr_{a}"
            self.indexes[a].save(sub)
            np.save(sub / "ids.npy", self.ids[a], allow_pickle=False)
        (path / "attributes.json").write_text(json.dumps({"attributes": self.attributes}) + "\n")

    @classmethod
    def load(cls, path: Path) -> PerAttributeIndex:
        """Read a directory written by save()."""
        path = Path(path)
        manifest = path / "attributes.json"
        if not manifest.exists():
            raise FileNotFoundError(f"{manifest} is missing: {path} is not a directory written by PerAttributeIndex.save")
        indexes, ids = {}, {}
        for a in json.loads(manifest.read_text())["attributes"]:
            sub = path / f"attr_{a}"
            indexes[a] = AnnIndex.load(sub)
            ids[a] = np.load(sub / "ids.npy", allow_pickle=False)
            if ids[a].shape != (indexes[a].ntotal,):
                raise ValueError(f"{sub}/ids.npy holds {ids[a].shape} ids for an index of {indexes[a].ntotal} vectors")
        return cls(indexes, ids)

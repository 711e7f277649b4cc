"""Sparse document vectors after training: post-hoc mass pruning and an inverted index searched term at a time.

Rows are scipy CSR matrices (n, V) with non-negative weights; the index stores, per term, the ids of the
documents holding it (int32) and their weights (float32).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import scipy.sparse as sp

K = 100  # the evaluation's rankings are cut at this depth (Recall@100)


def prune_by_mass(matrix: sp.csr_matrix, rho: float) -> sp.csr_matrix:
    """Per row: sort weights in decreasing order and keep the shortest prefix whose sum reaches rho x the row's
    total mass (within a relative 1e-6, float32 sums being inexact; ties broken by column); rho >= 1 keeps every
    non-zero weight."""
    if not 0 < rho <= 1:
        raise ValueError(f"pruning mass rho must be in (0, 1]; got {rho}")
    m = sp.csr_matrix(matrix, dtype=np.float32, copy=True)
    m.eliminate_zeros()
    if rho >= 1:
        return m
    indptr, indices, data = [0], [], []
    for i in range(m.shape[0]):
        lo, hi = m.indptr[i], m.indptr[i + 1]
        cols, vals = m.indices[lo:hi], m.data[lo:hi]
        order = np.lexsort((cols, -vals))  # weight descending, then column ascending
        mass = np.cumsum(vals[order], dtype=np.float64)
        keep = int(np.searchsorted(mass, rho * mass[-1] * (1 - 1e-6), side="left")) + 1 if len(vals) else 0
        chosen = np.sort(order[:keep])
        indices.append(cols[chosen])
        data.append(vals[chosen])
        indptr.append(indptr[-1] + len(chosen))
    cat = (lambda parts, dt: np.concatenate(parts).astype(dt) if parts else np.zeros(0, dt))
    return sp.csr_matrix((cat(data, np.float32), cat(indices, np.int32), np.array(indptr)), shape=m.shape)


def active_dims(matrix: sp.csr_matrix) -> float:
    """Average number of non-zero weights per row."""
    return float(matrix.getnnz(axis=1).mean()) if matrix.shape[0] else 0.0


class InvertedIndex:
    """Term -> postings (document ids, weights); a query's score for document d is sum_term q_term * w_{term,d}.

    >>> index = InvertedIndex.build(doc_matrix)          # (n, V) CSR, non-negative
    >>> scores, ids = index.search(query_matrix, k=10)   # (m, 10) each, best first; id -1 past the matches
    """

    def __init__(self, offsets: np.ndarray, doc_ids: np.ndarray, weights: np.ndarray, n_docs: int) -> None:
        self.offsets = offsets  # (V + 1,) int64: postings of term t are [offsets[t], offsets[t+1])
        self.doc_ids = doc_ids  # (nnz,) int32
        self.weights = weights  # (nnz,) float32
        self.n_docs = n_docs

    @classmethod
    def build(cls, docs: sp.csr_matrix) -> InvertedIndex:
        csc = sp.csc_matrix(docs, dtype=np.float32)
        csc.eliminate_zeros()
        csc.sort_indices()
        return cls(csc.indptr.astype(np.int64), csc.indices.astype(np.int32), csc.data.astype(np.float32), docs.shape[0])

    @property
    def vocab_size(self) -> int:
        return len(self.offsets) - 1

    @property
    def nbytes(self) -> int:
        """Bytes of the postings and the term offsets."""
        return int(self.offsets.nbytes + self.doc_ids.nbytes + self.weights.nbytes)

    def score_one(self, terms: np.ndarray, values: np.ndarray) -> np.ndarray:
        """Scores of every document (n_docs,) for one query given as (term ids, weights): term-at-a-time accumulation."""
        starts, ends = self.offsets[terms], self.offsets[terms + 1]
        lengths = ends - starts
        if lengths.sum() == 0:
            return np.zeros(self.n_docs, dtype=np.float32)
        # positions of every posting of the query's terms, without a Python loop over terms
        base = np.repeat(starts - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
        pos = base + np.arange(lengths.sum())
        contrib = self.weights[pos] * np.repeat(values.astype(np.float32), lengths)
        return np.bincount(self.doc_ids[pos], weights=contrib, minlength=self.n_docs).astype(np.float32)

    def search(self, queries: sp.csr_matrix, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-k documents per query row: (scores float32 (m, k), ids int64 (m, k)); documents sharing no term with
        the query are not hits (id -1, score 0)."""
        if queries.shape[1] != self.vocab_size:
            raise ValueError(f"queries have {queries.shape[1]} terms but the index was built over {self.vocab_size}")
        q = sp.csr_matrix(queries)
        m = q.shape[0]
        scores = np.zeros((m, k), dtype=np.float32)
        ids = np.full((m, k), -1, dtype=np.int64)
        for i in range(m):
            lo, hi = q.indptr[i], q.indptr[i + 1]
            top_scores, top = self.search_one(q.indices[lo:hi], q.data[lo:hi], k)
            scores[i, : len(top)], ids[i, : len(top)] = top_scores, top
        return scores, ids

    def search_one(self, terms: np.ndarray, values: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-k (scores, ids) of one query given as (term ids, weights); only documents sharing a term."""
        s = self.score_one(terms, values)
        top = top_k(s, k)
        top = top[s[top] > 0]
        return s[top], top

    def save(self, path: Path) -> None:
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        for name in ("offsets", "doc_ids", "weights"):
            np.save(path / f"{name}.npy", getattr(self, name), allow_pickle=False)
        (path / "index.json").write_text(json.dumps({"n_docs": self.n_docs, "vocab_size": self.vocab_size}) + "\n")

    @classmethod
    def load(cls, path: Path) -> InvertedIndex:
        path = Path(path)
        if not (path / "index.json").exists():
            raise FileNotFoundError(f"{path / 'index.json'} is missing: {path} is not a directory written by InvertedIndex.save")
        meta = json.loads((path / "index.json").read_text())
        arrays = [np.load(path / f"{n}.npy", allow_pickle=False) for n in ("offsets", "doc_ids", "weights")]
        return cls(*arrays, n_docs=meta["n_docs"])


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k largest scores, best first (ties by index)."""
    k = min(k, len(scores))
    part = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
    return part[np.lexsort((part, -scores[part]))]


def brute_force_search(queries: sp.csr_matrix, docs: sp.csr_matrix, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The exact reference for InvertedIndex.search: the full (m, n) score matrix, then top-k per row."""
    full = (sp.csr_matrix(queries) @ sp.csr_matrix(docs).T).toarray().astype(np.float32)
    m = full.shape[0]
    scores = np.zeros((m, k), dtype=np.float32)
    ids = np.full((m, k), -1, dtype=np.int64)
    for i in range(m):
        top = top_k(full[i], k)
        top = top[full[i][top] > 0]
        scores[i, : len(top)], ids[i, : len(top)] = full[i][top], top
    return scores, ids

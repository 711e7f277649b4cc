"""The evaluation's retrieval protocol: the test queries' top-K rankings from each method, each search timed one
query at a time on one thread (best of N, paperdag.timing), query encoding timed apart; and the sparse indexes
at every pruning level they search."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import scipy.sparse as sp
from threadpoolctl import threadpool_limits

from paperdag.methods.milco.model import Milco
from paperdag.methods.milco.sparse import InvertedIndex, K, active_dims, prune_by_mass
from paperdag.methods.milco.training import encode_sparse, tokenize
from paperdag.methods.milco.translate import learn_dictionary, translate
from paperdag.retrieval import AnnIndex, BM25Index, encode, load_encoder, ndcg_at_k_per_query
from paperdag.timing import best_of


def sparse_indexes(model: Milco, variant: str, texts: list[str], rhos: list[float], max_length: int) -> tuple[dict[str, InvertedIndex], list[dict]]:
    """The documents encoded once, mass-pruned at each rho, an inverted index each ("<variant>/rho_<rho>"), and a
    stats row each (active / pivot / echo dims, index bytes, encoding time)."""
    start = time.perf_counter()
    matrix = encode_sparse(model, tokenize(model.tokenizer, texts, max_length), description=f"milco index: encode {variant}")
    encode_s = time.perf_counter() - start
    built, stats = {}, []
    for rho in sorted(rhos):
        pruned = prune_by_mass(matrix, rho)
        inverted = InvertedIndex.build(pruned)
        pivot_dims = float(pruned[:, : model.en_vocab_size].getnnz(axis=1).mean())
        built[f"{variant}/rho_{rho:g}"] = inverted
        stats.append({"variant": variant, "rho": rho, "active_dims": active_dims(pruned), "pivot_dims": pivot_dims,
                      "echo_dims": active_dims(pruned) - pivot_dims, "index_bytes": inverted.nbytes, "encode_s": encode_s})
    return built, stats


@dataclass
class Indexes:
    """Every index the retrieval searches: the sparse ones ("<variant>/rho_<rho>", by variant in rho order), exact
    dense search over the packaged MiniLM and over the fair dense baseline, BM25 and translate-then-BM25 with its word
    dictionary; one directory each under a root."""

    sparse: dict[str, InvertedIndex]
    dense: AnnIndex
    dense_trained: AnnIndex
    bm25: BM25Index
    translate_bm25: BM25Index
    dictionary: dict[str, str]

    def save(self, path: Path) -> None:
        for name, inverted in self.sparse.items():
            inverted.save(path / name)
        self.dense.save(path / "dense")
        self.dense_trained.save(path / "dense_trained")
        self.bm25.save(path / "bm25")
        self.translate_bm25.save(path / "translate_bm25")
        (path / "translate_bm25" / "dictionary.json").write_text(json.dumps(self.dictionary, ensure_ascii=False, sort_keys=True) + "\n")

    @classmethod
    def load(cls, path: Path, variants: list[str]) -> Indexes:
        sparse = {f"{v}/{sub.name}": InvertedIndex.load(sub) for v in variants for sub in sorted((path / v).iterdir())}
        return cls(sparse, AnnIndex.load(path / "dense"), AnnIndex.load(path / "dense_trained"), BM25Index.load(path / "bm25"),
                   BM25Index.load(path / "translate_bm25"), json.loads((path / "translate_bm25" / "dictionary.json").read_text()))

    def pruned(self, variant: str) -> list[tuple[float, InvertedIndex]]:
        """(rho, index) of one variant, in the order saved."""
        return [(float(key.rpartition("/rho_")[2]), ix) for key, ix in self.sparse.items() if key.startswith(f"{variant}/")]


def minilm(name: str, max_length: int) -> Any:
    """The packaged sentence encoder reading at most max_length tokens, as the students do (its English WordPiece
    splits a cipher script's word into many pieces: uncapped, a document costs it ~100 tokens)."""
    model = load_encoder(name)
    model.max_seq_length = max_length
    return model


def tuned_bm25(docs: list[str], queries: list[str], relevant: list[list[int]], k1s: list[float], bs: list[float]) -> tuple[BM25Index, dict]:
    """BM25 (English stopwords) over `docs` at the (k1, b) of the grid with the best nDCG@10 on the tuning queries
    (the train queries: the baseline at its best, tuned on data the test never sees), and the grid's scores."""
    grid = []
    for k1 in k1s:
        for b in bs:
            index = BM25Index.build(docs, k1=k1, b=b, stopwords="en")
            ranked = index.search(queries, K)[1]
            grid.append((float(np.nanmean(ndcg_at_k_per_query(ranked, relevant, 10))), k1, b, index))
    best = max(grid, key=lambda g: g[0])  # first of equals: the grid's order
    return best[3], {"k1": best[1], "b": best[2], "tuning_ndcg10": best[0],
                     "grid": [{"k1": k1, "b": b, "ndcg10": v} for v, k1, b, _ in grid]}


def baseline_indexes(texts: list[str], parallel: pl.DataFrame, tuning: pl.DataFrame, dense_encoder: str, dense_trained: Any,
                     k1s: list[float], bs: list[float], max_length: int) -> tuple[dict[str, Any], dict]:
    """The baselines' indexes over the documents: dense (the packaged sentence encoder, and the fair dense baseline;
    exact flat inner product), BM25 on the source text, translate-then-BM25 with its word dictionary learned from
    the parallel text and (k1, b) tuned on `tuning` (the train queries); and their stats."""
    start = time.perf_counter()
    with threadpool_limits(limits=2):
        vectors = encode(minilm(dense_encoder, max_length), texts)
    dense = AnnIndex.build(vectors, kind="flat", metric="ip")
    stats: dict[str, Any] = {"dense": {"dim": dense.dim, "index_bytes": int(vectors.nbytes), "encode_s": time.perf_counter() - start}}
    start = time.perf_counter()
    trained = dense_trained.encode(texts, max_length)
    stats["dense_trained"] = {"dim": int(trained.shape[1]), "index_bytes": int(trained.nbytes), "encode_s": time.perf_counter() - start}
    k1, b = k1s[0], bs[0]
    bm25 = BM25Index.build(texts, k1=k1, b=b, stopwords=None)
    dictionary = learn_dictionary(zip(parallel["source"], parallel["english"], strict=True))
    translate_bm25, stats["translate"] = tuned_bm25([translate(t, dictionary) for t in texts],
                                                    [translate(t, dictionary) for t in tuning["text"]],
                                                    tuning["relevant"].to_list(), k1s, bs)
    stats["translate"]["dictionary_entries"] = len(dictionary)
    built = {"dense": dense, "dense_trained": AnnIndex.build(trained, kind="flat", metric="ip"), "bm25": bm25,
             "translate_bm25": translate_bm25, "dictionary": dictionary}
    return built, stats


def timed_search(search_one: Callable[[int], np.ndarray], n: int, repeats: int) -> tuple[np.ndarray, np.ndarray]:
    """Ids (n, K) of search_one(i) -> (1, k') ids per query, and the fastest of `repeats` wall times per query, one
    BLAS / OpenMP thread."""
    ids = np.full((n, K), -1, dtype=np.int64)
    best = np.full(n, np.inf)
    with threadpool_limits(limits=1):
        for i in range(n):
            found, best[i] = best_of(lambda i=i: search_one(i), repeats)
            ids[i, : found.shape[1]] = found[0]
    return ids, best


class Runs:
    """The rankings of every method on the test queries (one frame per method, variant and rho) and their latencies."""

    def __init__(self, query_ids: list[int]) -> None:
        self.query_ids = query_ids
        self.frames: list[pl.DataFrame] = []
        self.latency: dict[str, dict[str, float]] = {}

    def record(self, method: str, variant: str, rho: float | None, ids: np.ndarray, search_s: np.ndarray, encode_s: float) -> None:
        self.frames.append(pl.DataFrame({"method": method, "variant": variant, "rho": rho, "query_id": self.query_ids,
                                         "ranking": [row[row >= 0].tolist() for row in ids], "search_ms": search_s * 1e3},
                                        schema_overrides={"rho": pl.Float64, "ranking": pl.List(pl.Int64)}))
        self.latency[f"{variant}" if rho is None else f"{variant}/rho_{rho:g}"] = {
            "search_ms_mean": float(search_s.mean() * 1e3), "search_ms_median": float(np.median(search_s) * 1e3),
            "encode_ms_per_query": encode_s * 1e3 / max(1, len(self.query_ids))}

    def sparse(self, model: Milco, variant: str, indexes: list[tuple[float, InvertedIndex]], texts: list[str], max_length: int,
               repeats: int, prune_queries: bool) -> None:
        """One variant's queries encoded once, searched in each of its pruned indexes (queries pruned at the same
        rho with prune_queries)."""
        start = time.perf_counter()
        q = encode_sparse(model, tokenize(model.tokenizer, texts, max_length))
        encode_s = time.perf_counter() - start
        for rho, inverted in indexes:
            qp = prune_by_mass(q, rho) if prune_queries else q
            rows = _rows(qp)
            ids, search_s = timed_search(lambda i, inv=inverted, rows=rows: inv.search_one(*rows[i], K)[1][None, :], len(texts), repeats)
            self.record("milco", variant, rho, ids, search_s, encode_s)
            self.latency[f"{variant}/rho_{rho:g}"]["query_active_dims"] = active_dims(qp)

    def baselines(self, texts: list[str], dense_encoder: str, dense_trained: Any, max_length: int, indexes: Indexes, repeats: int) -> None:
        """Dense exact search, packaged MiniLM and the fair dense baseline (queries encoded apart, timed best of
        `repeats`), BM25 and translate-then-BM25."""
        import faiss

        start = time.perf_counter()
        with threadpool_limits(limits=2):
            qv = encode(minilm(dense_encoder, max_length), texts, progress=False)
        encode_s = time.perf_counter() - start
        start = time.perf_counter()
        qt = dense_trained.encode(texts, max_length)
        trained_s = time.perf_counter() - start
        faiss.omp_set_num_threads(1)
        ix = indexes
        self.record("dense", "dense", None, *timed_search(lambda i: ix.dense.search(qv[i : i + 1], K)[1], len(texts), repeats), encode_s)
        self.record("dense_trained", "dense_trained", None,
                    *timed_search(lambda i: ix.dense_trained.search(qt[i : i + 1], K)[1], len(texts), repeats), trained_s)
        self.record("bm25", "bm25", None, *timed_search(lambda i: ix.bm25.search([texts[i]], K)[1], len(texts), 1), 0.0)
        translated = [translate(t, ix.dictionary) for t in texts]
        self.record("translate_bm25", "translate_bm25", None,
                    *timed_search(lambda i: ix.translate_bm25.search([translated[i]], K)[1], len(texts), 1), 0.0)


def _rows(matrix: sp.csr_matrix) -> list[tuple[np.ndarray, np.ndarray]]:
    """(terms, weights) of each row of a CSR matrix."""
    return [(matrix.indices[matrix.indptr[i] : matrix.indptr[i + 1]], matrix.data[matrix.indptr[i] : matrix.indptr[i + 1]])
            for i in range(matrix.shape[0])]

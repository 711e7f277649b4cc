"""Benchmark MILCO's inverted index against exact dense search: index bytes and per-query search latency at the
reported pruning level, in one process (milco.md: at ~30 active dims, index >= 5x smaller and latency lower).

The MILCO side encodes a fresh synthetic corpus of --n-docs documents with the pipeline's trained model
(data/milco/0/models/milco, from `dvc repro milco-train`) and mass-prunes it at --rho. The dense side holds
--n-docs 384-d float32 vectors (all-MiniLM-L6-v2's size) searched exactly with faiss flat inner product: its cost
depends only on n and d, so random unit vectors stand in for the MiniLM encoding unless --dense-encode is given.

    .venv/bin/python benchmarks/bench_milco.py            # writes benchmarks/results/milco.json, prints a table
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import faiss
import numpy as np
import torch
import yaml
from threadpoolctl import threadpool_limits

from paperdag.methods.milco import InvertedIndex, Milco, active_dims, build_world, encode_sparse, prune_by_mass, tokenize
from paperdag.retrieval import AnnIndex, encode, load_encoder

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).parent / "results" / "milco.json"


def per_query_ms(search_one, n: int, repeats: int) -> float:
    """Mean over queries of the fastest of `repeats` wall times, one query at a time, one thread."""
    best = np.full(n, np.inf)
    with threadpool_limits(limits=1):
        for _ in range(repeats):
            for i in range(n):
                start = time.perf_counter()
                search_one(i)
                best[i] = min(best[i], time.perf_counter() - start)
    return float(best.mean() * 1e3)


def main() -> None:
    params = yaml.safe_load((ROOT / "params.yaml").read_text())["milco"]
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, default=ROOT / "data/milco/0/models/milco", help="a trained Milco directory")
    ap.add_argument("--n-docs", type=int, default=20000, help="documents indexed on both sides")
    ap.add_argument("--n-queries", type=int, default=300, help="queries timed")
    ap.add_argument("--rho", type=float, default=params["evaluate"]["headline_rho"], help="mass-pruning level")
    ap.add_argument("--k", type=int, default=100, help="results per query")
    ap.add_argument("--repeats", type=int, default=3, help="timed runs per query; the fastest counts")
    ap.add_argument("--dense-encode", action="store_true", help="encode the documents with MiniLM instead of random vectors")
    args = ap.parse_args()
    if not (args.model / "milco_config.json").exists():
        raise SystemExit(f"{args.model} holds no trained model: run `dvc repro milco-train` first")
    torch.set_num_threads(2)
    faiss.omp_set_num_threads(1)

    s = params["synthesize"]
    world = build_world(s["languages"], args.n_docs, s["twin_fraction"], s["twin_size"], 1, 0, args.n_queries, 0,
                        s["query_terms"], s["synonym_rate"], 0.5, seed=20260, forms_per_word=s["forms_per_word"],
                        homonym_rate=s["homonym_rate"], n_suffixes=s["n_suffixes"], compound_languages=s["compound_languages"],
                        shuffle_order=s["shuffle_order"])
    docs = [d["text"] for d in world.docs]
    queries = [q["text"] for q in world.queries if q["split"] == "test"][: args.n_queries]
    model = Milco.from_pretrained(args.model)
    max_length = params["model"]["max_length"]
    start = time.perf_counter()
    doc_matrix = prune_by_mass(encode_sparse(model, tokenize(model.tokenizer, docs, max_length)), args.rho)
    sparse_encode_s = time.perf_counter() - start
    q_matrix = encode_sparse(model, tokenize(model.tokenizer, queries, max_length))
    if params["retrieve"]["prune_queries"]:  # as the pipeline's retrieve stage: queries pruned at the same rho
        q_matrix = prune_by_mass(q_matrix, args.rho)
    rows = [(q_matrix.indices[q_matrix.indptr[i] : q_matrix.indptr[i + 1]], q_matrix.data[q_matrix.indptr[i] : q_matrix.indptr[i + 1]])
            for i in range(len(queries))]
    inverted = InvertedIndex.build(doc_matrix)

    if args.dense_encode:
        encoder = load_encoder(params["index"]["dense_encoder"])
        vectors, q_vectors = encode(encoder, docs), encode(encoder, queries)
    else:
        rng = np.random.default_rng(0)
        vectors = rng.standard_normal((args.n_docs, 384)).astype(np.float32)
        q_vectors = rng.standard_normal((len(queries), 384)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        q_vectors /= np.linalg.norm(q_vectors, axis=1, keepdims=True)
    dense = AnnIndex.build(vectors, kind="flat", metric="ip")

    sparse_ms = per_query_ms(lambda i: inverted.search_one(*rows[i], args.k), len(queries), args.repeats)
    dense_ms = per_query_ms(lambda i: dense.search(q_vectors[i : i + 1], args.k), len(queries), args.repeats)
    result = {
        "n_docs": args.n_docs, "n_queries": len(queries), "rho": args.rho, "k": args.k,
        "active_dims": active_dims(doc_matrix), "query_active_dims": active_dims(q_matrix),
        "milco_index_bytes": inverted.nbytes, "dense_index_bytes": int(vectors.nbytes),
        "index_size_ratio_dense_over_milco": vectors.nbytes / inverted.nbytes,
        "milco_search_ms": sparse_ms, "dense_search_ms": dense_ms, "latency_ratio_dense_over_milco": dense_ms / sparse_ms,
        "milco_encode_docs_s": sparse_encode_s, "dense_vectors": "MiniLM" if args.dense_encode else "random unit 384-d",
        "prune_queries": params["retrieve"]["prune_queries"],
        "note": "search only (query encoding excluded), one query at a time, one thread; same process",
        "machine": {"python": platform.python_version(), "processor": platform.processor() or platform.machine()},
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"{'':8s} {'bytes':>12s} {'ms/query':>9s}")
    print(f"{'milco':8s} {inverted.nbytes:12d} {sparse_ms:9.3f}   ({result['active_dims']:.1f} active dims at rho={args.rho})")
    print(f"{'dense':8s} {vectors.nbytes:12d} {dense_ms:9.3f}")
    print(f"ratios dense/milco: size {result['index_size_ratio_dense_over_milco']:.2f}x, latency {result['latency_ratio_dense_over_milco']:.2f}x")


if __name__ == "__main__":
    main()

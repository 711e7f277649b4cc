"""Shared retrieval building blocks: sentence encoding, ANN indexes (faiss), BM25 (bm25s) and retrieval metrics.

encode(load_encoder(), texts) -> vectors -> AnnIndex.build / PerAttributeIndex.build -> .search -> ids,
scored with recall_at_k / ndcg_at_k / mrr against exact ids and attribute_entropy / inverse_simpson on labels.
No method-specific code lives here.
"""

from __future__ import annotations

from paperdag.retrieval.ann import EXACT_SUBSET_MAX, KINDS, METRICS, AnnConfig, AnnIndex, PerAttributeIndex
from paperdag.retrieval.bm25 import BM25Index
from paperdag.retrieval.encode import PACKAGED_MINILM, encode, load_encoder
from paperdag.retrieval.metrics import (
    attribute_entropy,
    distinct_attributes,
    inverse_simpson,
    labels_at,
    mrr,
    ndcg_at_k,
    ndcg_at_k_per_query,
    recall_at_k,
    recall_at_k_per_query,
    reciprocal_rank,
)

__all__ = [
    "EXACT_SUBSET_MAX",
    "KINDS",
    "METRICS",
    "PACKAGED_MINILM",
    "AnnConfig",
    "AnnIndex",
    "BM25Index",
    "PerAttributeIndex",
    "attribute_entropy",
    "distinct_attributes",
    "encode",
    "inverse_simpson",
    "labels_at",
    "load_encoder",
    "mrr",
    "ndcg_at_k",
    "ndcg_at_k_per_query",
    "recall_at_k",
    "recall_at_k_per_query",
    "reciprocal_rank",
]

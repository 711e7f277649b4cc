"""Shared retrieval building blocks: sentence encoding, ANN indexes (faiss), BM25 (bm25s) and retrieval metrics.

encode(load_encoder(), texts) -> vectors -> AnnIndex.build / PerAttributeIndex.build -> .search -> ids,
scored with recall_at_k / ndcg_at_k / mrr against exact ids and attribute_entropy / inverse_simpson on labels.
No method-specific code lives here.
"""

from __future__ import annotations

from paperdag._lazy import attach

# each submodule is imported on first use of one of its names: the package alone imports neither faiss (ann) nor
# bm25s, and metrics need numpy only
__getattr__, __dir__, __all__ = attach(__name__, {
    "ann": ["EXACT_SUBSET_MAX", "KINDS", "METRICS", "AnnConfig", "AnnIndex", "PerAttributeIndex"],
    "bm25": ["BM25Index"],
    "encode": ["PACKAGED_MINILM", "encode", "load_encoder"],
    "metrics": ["attribute_entropy", "distinct_attributes", "inverse_simpson", "labels_at", "mrr", "ndcg_at_k",
                "ndcg_at_k_per_query", "padded", "recall_at_k", "recall_at_k_per_query", "reciprocal_rank"],
})

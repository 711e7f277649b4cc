"""LookaheadKV (ICLR 2026): learned KV-cache eviction without draft generation, against full cache, StreamingLLM,
H2O, SnapKV, a draft-based method and the oracle, all at fixed per-head token budgets through one cache code path.

data.py (key-value retrieval splits) -> scores.py (each method's importance rule, per-head top-C) -> lookahead.py
(lookahead embeddings + masked LoRA, KL loss) -> eviction.py (prefill, evict in the transformers Cache, decode).
"""

from __future__ import annotations

from paperdag._lazy import attach

# each submodule is imported on first use of one of its names (eviction, lookahead and scores need torch and
# transformers; data does not): importing the package alone imports none of them
__getattr__, __dir__, __all__ = attach(__name__, {
    "data": ["METHODS", "SPLITS", "TaskSizes", "encode", "make_example", "vocabulary_text"],
    "eviction": ["Prepared", "Setting", "decode", "evict", "prefill", "prepare"],
    "lookahead": ["LookaheadKV", "attach", "kl_per_layer_head", "lookahead_forward", "lookahead_loss", "normalised"],
    "scores": ["h2o_scores", "kv_head_scores", "overlap", "rows_after_prompt", "snapkv_scores", "streaming_keep",
               "top_c"],
})

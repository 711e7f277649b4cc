"""LookaheadKV (ICLR 2026): learned KV-cache eviction without draft generation, against full cache, StreamingLLM,
H2O, SnapKV, a draft-based method and the oracle, all at fixed per-head token budgets through one cache code path.

data.py (key-value retrieval splits) -> scores.py (each method's importance rule, per-head top-C) -> lookahead.py
(lookahead embeddings + masked LoRA, KL loss) -> eviction.py (prefill, evict in the transformers Cache, decode).
"""

from __future__ import annotations

from paperdag.methods.lookaheadkv.data import SPLITS, TaskSizes, encode, make_example, vocabulary_text
from paperdag.methods.lookaheadkv.eviction import METHODS, Prepared, Setting, decode, evict, prefill, prepare
from paperdag.methods.lookaheadkv.lookahead import (
    LookaheadKV,
    attach,
    kl_per_layer_head,
    lookahead_forward,
    lookahead_loss,
    normalised,
)
from paperdag.methods.lookaheadkv.scores import (
    h2o_scores,
    kv_head_scores,
    overlap,
    rows_after_prompt,
    snapkv_scores,
    streaming_keep,
    top_c,
)

__all__ = [
    "METHODS",
    "SPLITS",
    "LookaheadKV",
    "Prepared",
    "Setting",
    "TaskSizes",
    "attach",
    "decode",
    "encode",
    "evict",
    "h2o_scores",
    "kl_per_layer_head",
    "kv_head_scores",
    "lookahead_forward",
    "lookahead_loss",
    "make_example",
    "normalised",
    "overlap",
    "prefill",
    "prepare",
    "rows_after_prompt",
    "snapkv_scores",
    "streaming_keep",
    "top_c",
    "vocabulary_text",
]

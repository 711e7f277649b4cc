"""LookaheadKV (ICLR 2026): learned KV-cache eviction without draft generation, against full cache, StreamingLLM,
H2O, SnapKV, a draft-based method and the oracle, all at fixed per-head token budgets through one cache code path.

data.py (key-value retrieval splits with filler; the LM's drills) -> model.py (word-level tokenizer, tiny Llama) ->
scores.py (each method's importance rule, only the query rows it needs, per-head selection) -> lookahead.py
(lookahead embeddings + masked LoRA, KL loss) -> eviction.py (prefill, evict in the transformers Cache, decode);
protocol.py runs them (the LM's curriculum, s_GT targets, training, every method at every budget), metrics.py
scores the run.
"""

from __future__ import annotations

from paperdag._lazy import attach

# each submodule is imported on first use of one of its names (eviction, lookahead, protocol and scores need
# torch and transformers; data and metrics do not): importing the package alone imports none of them
__getattr__, __dir__, __all__ = attach(__name__, {
    "figures": ["STYLE", "accuracy_vs_budget"],
    "data": ["KINDS", "METHODS", "SPLITS", "Kind", "TaskSizes", "encode", "make_copy", "make_example", "make_rows",
             "question_tokens", "task_words"],
    "model": ["SPECIAL_TOKENS", "build_lm", "word_tokenizer"],
    "eviction": ["Prepared", "Setting", "decode", "evict", "prefill", "prepare"],
    "lookahead": ["LookaheadKV", "attach", "kl_per_layer_head", "lookahead_forward", "lookahead_loss", "normalised"],
    "metrics": ["cost", "exact_match_grid", "exact_match_table", "headline", "over_replicates", "replicate_numbers"],
    "protocol": ["batches", "budget_tokens", "checked_full_cache_exact_match", "compare", "fit_lookahead", "full_cache_exact_match",
                 "greedy_responses", "held_out_kl", "stack", "targets", "train_curriculum", "tune_snapkv", "tuned_comparison"],
    "scores": ["RowAttention", "ground_truth_importance", "h2o_keep", "kv_head_scores", "overlap", "pool", "snapkv_keep",
               "streaming_keep", "top_c"],
})

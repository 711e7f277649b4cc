"""ckplug: controlling parametric vs contextual knowledge reliance at decoding time (CK-PLUG, Bi et al., ICLR 2026).

Two views per example (with / without the retrieved context) -> confidence gain CG = H(p_par) - H(p_ctx) ->
on conflict steps softmax over V_head of alpha log p_par + (1 - alpha) (log p_ctx - log p_par); adaptive alpha
= H(p_ctx) / (H(p_par) + H(p_ctx)). Metrics: ConR, ParR, MR = ParR / (ParR + ConR).
"""

from __future__ import annotations

from paperdag._lazy import attach

# each submodule is imported on first use of one of its names (decoding and protocol need torch; data and metrics do not):
# importing the package alone imports none of them
__getattr__, __dir__, __all__ = attach(__name__, {
    "figures": ["accuracy_vs_noise", "mr_vs_alpha"],
    "data": ["KINDS", "ConflictRule", "EntropyOver", "Kind", "WorldSizes", "build", "level_counts", "context_prompt", "encode", "parametric_prompt",
             "training_arm", "training_pools", "training_texts", "TrainingArm"],
    "decoding": ["CONFLICT_RULES", "ENTROPY_OVER", "adaptive_alpha", "filtered", "adjusted_distribution", "cad_rule", "ckplug_rule",
                 "ckplug_step", "confidence_gain", "entropy", "head_mask", "is_conflict"],
    "metrics": ["arm_headline", "headline", "interval_table", "is_monotone", "memory_ratio", "memory_recall_table", "mr_sweep", "recall",
                "replicate_numbers", "seconds_per_token"],
    "protocol": ["closed_book_recall", "decode_views", "method_rules", "run_methods"],
})

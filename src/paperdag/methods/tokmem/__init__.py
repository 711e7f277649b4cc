"""TokMem (ICLR 2026, arXiv 2510.00444): procedures stored as memory tokens of a frozen LM, added in rounds.

data: the synthetic procedure world and prompts. memory: the memory bank (tied rows, loss on m_i + response,
renormalisation of new rows), read-out of routing from the emitted token. protocol: the continual rounds (memory
and calls tracks) and the baselines of both tracks. metrics: EM, ROUGE-L, F1, forgetting, the score table and headline.
"""

from __future__ import annotations

from paperdag._lazy import attach

# each submodule is imported on first use of one of its names (memory and protocol need torch and transformers;
# data and metrics do not): importing the package alone imports none of them
__getattr__, __dir__, __all__ = attach(__name__, {
    "figures": ["metric_vs_procedures"],
    "data": ["LETTERS", "PARAPHRASES", "RULES", "SPLITS", "Procedure", "atomic_examples", "call_examples", "call_text",
             "described_prompt", "make_procedures", "make_world", "named_call_text", "paraphrased_query", "parse_named_calls", "procedures_from",
             "procedures_table", "query_prompt", "response", "spaced"],
    "memory": ["MemoryBank", "fit_bank", "routed", "split_at_memory"],
    "metrics": ["CALL_METHODS", "METHODS", "PAIRED", "calls_table", "check_budget", "exact_match", "forgetting", "headline", "lcs_length", "multiset_f1",
                "replicated_headline", "rouge_l", "score_table"],
    "protocol": ["ALL_LINEAR", "PROC_TOKEN", "add_qv_lora", "atomic_lora", "backbone_pools", "backbone_scores", "backbone_texts", "calls_baselines",
                 "calls_rows", "calls_target", "check_sets", "description_index", "greedy", "ids", "lora_pool", "memory_rounds", "named_calls_target",
                 "named_tools", "procedure_ids", "procedure_rows", "prediction_rows", "prompt_tuning", "rag", "reading_lines", "retrieval_by_round",
                 "round_calls", "rounds", "run_baselines", "sequential_lora", "text", "tool_track", "tune_lora_lr"],
    "settings": ["BaselineSettings", "MemorySettings", "budget"],
})

"""ProofBridge (ICLR 2026, arXiv 2510.15681): NL-to-formal theorem and proof translation with a joint embedding of
NL and formal proofs for retrieval, retrieval-augmented generation and checker-guided repair.

logic: the formal language (linear integer arithmetic, forward proof steps) and its checker, the ground truth.
equiv: the z3 judge of semantic equivalence between statements. world: theorem families, NL paraphrases, splits
by family. embed: the joint embedding (MiniLM top layers | byte-level encoder, projection heads, symmetric InfoNCE).
gen: prompts, near misses, sampling and the repair chains. metrics: Recall@k / MRR, pass@k, headline, figures.
protocol: the experiment over tables (both retrievers ranked, the generator trained and checked, each arm's chains).
"""

from __future__ import annotations

from paperdag._lazy import attach

# each submodule is imported on first use of one of its names: the package alone imports none of them
__getattr__, __dir__, __all__ = attach(__name__, {
    "logic": ["CheckError", "Checked", "Fact", "Linear", "SEP", "Statement", "apply_rule", "check", "check_error", "parse_statement"],
    "equiv": ["equivalent"],
    "world": ["FAMILIES", "SKELETONS", "SPLITS", "Theorem", "assign_families", "check_world", "draw_theorem", "make_split",
              "number_nl", "theorems_table"],
    "gen": ["ARMS", "METHOD", "Attempt", "corrupt", "near_misses", "prompt", "run_chains", "sampler", "target", "training_pools",
            "uses_repair", "uses_retrieval"],
    "metrics": ["generation_scores", "headline", "pass_at_k", "pass_figure", "recall_figure", "retrieval_scores"],
    "protocol": ["FROZEN_VIEWS", "example_proofs", "greedy_scores", "holdout_split", "joint_retrieval", "repair_arms", "run_arm",
                 "train_generator"],
})

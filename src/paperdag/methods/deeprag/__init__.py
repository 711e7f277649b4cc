"""DeepRAG (ICLR 2026, arXiv 2502.01142): retrieval-augmented reasoning as an MDP; binary tree search for the
minimal-retrieval correct path, imitation on those paths, chain of calibration (DPO on the atomic decisions).

world: the fact world, questions and their decompositions. search: the tree search and walks. policy: the step
formats, BM25 retriever, answering, the tree expansion, loss-masked and preference examples. training: knowledge
boundary, imitation, calibration. baselines / protocol: the arms on the same test questions. metrics: EM,
retrievals, boundary MCC, headline. tables: rows <-> tables. figures: the plots.
"""

from __future__ import annotations

from paperdag._lazy import attach

# torch-backed submodules (policy, training, protocol) are imported on first use only
__getattr__, __dir__, __all__ = attach(__name__, {
    "world": ["ALL_RELATIONS", "ATTRIBUTES", "BRIDGES", "GROUPS", "QUESTION_SPLITS", "World", "chains", "check_questions",
              "decompose", "document", "make_questions", "make_world", "question_text", "subquery"],
    "search": ["PARAMETRIC", "RETRIEVE", "all_prefixes", "best_paths", "minimal_retrieval_path", "retrievals", "walk"],
    "policy": ["SPECIAL_TOKENS", "Retriever", "Steps", "answer", "collate_labelled", "decision_pairs", "expand_tree",
               "labelled", "matches", "retrieve_probability"],
    "training": ["answer_accuracy", "base_pools", "calibrate", "check_boundary", "choose_memorised", "imitate", "imitation_rows",
                 "rehearsal_rows"],
    "baselines": ["STRATEGIES", "by_question", "fit_classifier", "strategy_labels", "strategy_path", "threshold_path",
                  "tune_threshold"],
    "protocol": ["record", "run_baselines", "run_policy", "tree_walk"],
    "metrics": ["ARMS", "PAIRED", "arm_scores", "decision_matrix", "headline", "mcc", "replicated"],
    "settings": ["CalibrateSettings", "ImitateSettings", "InferSettings", "SearchSettings", "SynthesizeSettings", "TrainLMSettings",
                 "TuneSettings"],
    "tables": ["check_disjoint", "documents_table", "fact_dict", "facts_table", "memorised_set", "path_steps", "questions_of"],
    "figures": ["decision_heatmap", "em_vs_retrievals", "mcc_bars"],
})

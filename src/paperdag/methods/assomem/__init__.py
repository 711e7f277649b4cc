"""AssoMem (ICLR 2026, arXiv 2510.10397): an associative memory graph for conversational recall.

memory: the paper's equations (TF-IDF clues and their merging at delta, the graph of utterances and clues,
personalised PageRank importance, temporal alignment, CMI fusion weights softmax(CMI / T)). protocol: per-dialogue
memories, the retriever, its ablations and the baselines, tuning on dev with one budget, per-query timing.
evaluation: R@k / nDCG@10 and the headline over replicates. figures: the plots. The dialogues come from
paperdag.dialogue (shared).
"""

from __future__ import annotations

from paperdag._lazy import attach

# each submodule is imported on first use of one of its names (memory imports networkx and scipy): importing the
# package alone imports none of them
__getattr__, __dir__, __all__ = attach(__name__, {
    "memory": ["SIGNALS", "build_graph", "conditional_mi", "fuse", "fusion_weights", "group_embeddings", "merge_clues",
               "mutual_information", "normalise", "parse_time", "personalised_pagerank", "session_clues", "teleport_vector",
               "temporal_alignment", "tertile_edges", "to_bins", "transition"],
    "protocol": ["BASELINES", "FUSED", "METHODS", "TOP", "Dialogue", "Grids", "Memory", "Queries", "attach_graphs",
                 "candidate_recall", "dialogues", "graph_tables", "grid", "grids_from", "queries", "run_method", "split_memories", "subgraph_example",
                 "timed_assomem", "timed_flat", "tune"],
    "evaluation": ["CLAIM_SET", "KS", "PAIRED", "check_rankings", "headline", "replicated", "score", "weights_per_type"],
    "figures": ["example_subgraph", "recall_curves", "weight_bars"],
})

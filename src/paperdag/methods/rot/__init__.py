"""Retrieval-of-Thought (RoT, ICLR 2026, arXiv 2509.21743): reusing reasoning steps through a thought graph.

world: the synthetic multi-step problems (store / train / val / test splits). query: how a query meets a node (the
whole problem, its opening clause, or clause by clause). graph: the thought graph, the start node and the
reward-guided traversal. task: the reasoning format and where a template enters it. training: what the LM learns
from, and its learnability check. protocol: the retrieval tuned on the validation split, the three arms, interleaved
and timed. metrics: per-replicate scores, the headline, retrieval scores. figures: the two plots.
"""

from __future__ import annotations

from paperdag._lazy import attach

# each submodule is imported on first use of one of its names: the package alone imports none of them
__getattr__, __dir__, __all__ = attach(__name__, {
    "world": ["CHAINS", "FAMILIES", "SPLITS", "STEP_TYPES", "TYPES", "Problem", "check_splits", "draw_problem", "make_splits",
              "problem_of", "problems_table", "store_windows", "windows"],
    "query": ["VIEWS", "Query", "clauses", "encode_queries", "encode_query", "query_texts", "similarity"],
    "graph": ["SEMANTIC", "SEQUENTIAL", "Path", "RoTConfig", "ThoughtGraph", "build_graph", "graph_from_rows", "start_node", "traverse"],
    "task": ["parse_answer", "prompt", "target"],
    "protocol": ["ARMS", "STATIC_KEYS", "StaticIndex", "greedy_solve", "rot_path", "run_arms", "tune_rot", "tune_static"],
    "training": ["accuracy_without_template", "training_pools"],
    "metrics": ["headline", "replicate_scores", "retrieval_scores"],
    "figures": ["path_figure", "tradeoff_figure"],
})

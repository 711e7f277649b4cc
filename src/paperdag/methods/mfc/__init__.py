"""mfc: learning-augmented metric MST by Metric Forest Completion (Veldt et al., ICLR 2026).

learned_forest -> complete_forest(variant) -> a spanning tree within 2x the optimal completion and 2*gamma x the MST.
"""

from __future__ import annotations

from paperdag.methods.mfc.completion import (
    VARIANTS,
    Completion,
    RepresentativeCurve,
    allocate_dp,
    allocate_greedy,
    complete_forest,
)
from paperdag.methods.mfc.forest import LearnedForest, k_center, learned_forest
from paperdag.methods.mfc.instances import (
    bit_strings,
    edited_strings,
    item_sets,
    uniform_cube,
)
from paperdag.methods.mfc.metrics import (
    CallableSpace,
    CallCounter,
    EditSpace,
    EuclideanSpace,
    HammingSpace,
    JaccardSpace,
    MetricSpace,
)
from paperdag.methods.mfc.mst import exact_mst
from paperdag.methods.mfc.quality import (
    MFC_FACTOR,
    alpha_bound,
    completed_tree,
    gamma_overlap,
    gamma_weight_ratio,
    is_spanning_tree,
    mst_bound,
    tree_cost,
)
from paperdag.points import gaussian_mixture  # the shared mixture, re-exported

__all__ = [
    "MFC_FACTOR",
    "VARIANTS",
    "CallCounter",
    "CallableSpace",
    "Completion",
    "EditSpace",
    "EuclideanSpace",
    "HammingSpace",
    "JaccardSpace",
    "LearnedForest",
    "MetricSpace",
    "RepresentativeCurve",
    "allocate_dp",
    "alpha_bound",
    "allocate_greedy",
    "bit_strings",
    "complete_forest",
    "completed_tree",
    "edited_strings",
    "exact_mst",
    "gamma_overlap",
    "gamma_weight_ratio",
    "gaussian_mixture",
    "is_spanning_tree",
    "item_sets",
    "k_center",
    "learned_forest",
    "mst_bound",
    "tree_cost",
    "uniform_cube",
]

"""welfare_nns: welfare-based diverse nearest neighbour search (ICLR 2026; arXiv 2602.08742).

Maximise Nash social welfare NSW(S) = (prod_l (u_l(S) + eta))^(1/c) (or a p-mean M_p) over k-item result sets S,
u_l(S) = sum of sigma(q, v) over the items of S with attribute l. Single attribute: nash_ann / nash_select (exact with an
exact oracle). Several attributes per item: welfare_greedy over L ANN candidates ((1 - 1/e) at eta = 1). Baselines: top_k,
div_ann (per-attribute cap k'), mmr (lambda). Everything here takes candidate arrays: no index, no I/O.
"""

from __future__ import annotations

from paperdag.methods.welfare_nns.baselines import div_ann, mmr, top_k
from paperdag.methods.welfare_nns.brute import brute_force_best
from paperdag.methods.welfare_nns.greedy import p_fetch_union, welfare_greedy
from paperdag.methods.welfare_nns.instances import (
    CATEGORIES,
    COLOURS,
    clus_attributes,
    multi_label_membership,
    perturbed_queries,
    prob_attributes,
    product_queries,
    product_titles,
    skewed_probabilities,
    unit_rows,
)
from paperdag.methods.welfare_nns.nash import (
    RankedList,
    Selection,
    nash_ann,
    nash_select,
)
from paperdag.methods.welfare_nns.welfare import (
    SIMILARITIES,
    cosine_from_scores,
    log_nsw,
    nsw,
    one_hot,
    p_mean,
    sigma_cosine,
    sigma_from_scores,
    sigma_l2,
    sigma_of_cosine,
    utilities,
    welfare_gain,
    welfare_phi,
)
from paperdag.points import gaussian_mixture  # the shared mixture, re-exported

__all__ = [
    "CATEGORIES",
    "COLOURS",
    "RankedList",
    "SIMILARITIES",
    "Selection",
    "brute_force_best",
    "clus_attributes",
    "cosine_from_scores",
    "div_ann",
    "gaussian_mixture",
    "log_nsw",
    "mmr",
    "multi_label_membership",
    "nash_ann",
    "nash_select",
    "nsw",
    "one_hot",
    "p_fetch_union",
    "p_mean",
    "perturbed_queries",
    "prob_attributes",
    "product_queries",
    "product_titles",
    "sigma_cosine",
    "sigma_from_scores",
    "sigma_l2",
    "sigma_of_cosine",
    "skewed_probabilities",
    "top_k",
    "unit_rows",
    "utilities",
    "welfare_gain",
    "welfare_greedy",
    "welfare_phi",
]

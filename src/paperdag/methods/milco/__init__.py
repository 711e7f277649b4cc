"""milco: multilingual learned sparse retrieval with a connector and a LexEcho head (Nguyen et al., ICLR 2026).

build_world -> English teacher (train_english_teacher) -> Milco.from_teacher -> align (stage 1, SMSE) ->
distill (stage 2, KL + FLOPS) -> encode_sparse -> prune_by_mass -> InvertedIndex.search.
"""

from __future__ import annotations

from paperdag._lazy import attach

# each submodule is imported on first use of one of its names (model, losses and training need torch and transformers;
# data, sparse and translate do not): importing the package alone imports none of them
__getattr__, __dir__, __all__ = attach(__name__, {
    "data": ["CONTENT_SLOTS", "SCRIPTS", "SLOTS", "SYNONYMS", "CipherLanguage", "Fact", "World", "build_world",
             "english_vocabulary", "make_language", "real_parallel_names"],
    "losses": ["alignment_loss", "flops", "kl_distillation", "smse"],
    "model": ["Milco", "MilcoConfig", "SparseRep", "ZeroPad", "masked_max", "path_free", "soft_max_pool", "echo_match", "group_scores", "score", "to_sparse_matrix"],
    "sparse": ["InvertedIndex", "active_dims", "brute_force_search", "prune_by_mass", "top_k"],
    "training": ["Groups", "align", "align_on_parallel", "collate", "distill", "distill_on_groups", "encode_sparse", "groups_data", "loss_summary", "teacher_max_logits",
                 "teacher_pivot", "tfidf_targets", "tokenize", "train_english_teacher"],
    "translate": ["learn_dictionary", "translate"],
})

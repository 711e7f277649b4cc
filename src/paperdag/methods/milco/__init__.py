"""milco: multilingual learned sparse retrieval with a connector and a LexEcho head (Nguyen et al., ICLR 2026).

build_world -> English teacher (train_english_teacher) -> Milco.from_teacher -> align (stage 1, SMSE) ->
distill (stage 2, KL + FLOPS) -> encode_sparse -> prune_by_mass -> InvertedIndex.search.
"""

from __future__ import annotations

from paperdag.methods.milco.data import (
    CONTENT_SLOTS,
    SCRIPTS,
    SLOTS,
    SYNONYMS,
    CipherLanguage,
    Fact,
    World,
    build_world,
    english_vocabulary,
    make_language,
    real_parallel_names,
)
from paperdag.methods.milco.losses import alignment_loss, flops, kl_distillation, smse
from paperdag.methods.milco.model import Milco, MilcoConfig, SparseRep, echo_match, group_scores, score, to_sparse_matrix
from paperdag.methods.milco.sparse import InvertedIndex, active_dims, brute_force_search, prune_by_mass, top_k
from paperdag.methods.milco.training import (
    Groups,
    align,
    collate,
    distill,
    encode_sparse,
    teacher_max_logits,
    teacher_pivot,
    tfidf_targets,
    tokenize,
    train_english_teacher,
)
from paperdag.methods.milco.translate import learn_dictionary, translate

__all__ = [
    "CONTENT_SLOTS",
    "SCRIPTS",
    "SLOTS",
    "SYNONYMS",
    "CipherLanguage",
    "Fact",
    "Groups",
    "InvertedIndex",
    "Milco",
    "MilcoConfig",
    "SparseRep",
    "World",
    "active_dims",
    "align",
    "alignment_loss",
    "brute_force_search",
    "build_world",
    "collate",
    "distill",
    "echo_match",
    "encode_sparse",
    "english_vocabulary",
    "flops",
    "group_scores",
    "kl_distillation",
    "learn_dictionary",
    "make_language",
    "prune_by_mass",
    "real_parallel_names",
    "score",
    "smse",
    "teacher_max_logits",
    "teacher_pivot",
    "tfidf_targets",
    "to_sparse_matrix",
    "tokenize",
    "top_k",
    "train_english_teacher",
    "translate",
]

"""SynthKG and Distill-SynthKG (ICLR 2026, arXiv 2410.16597): document-level KG synthesis in several steps, its
one-step distillation, and graph retrieval for multi-hop RAG.

world: the generated KG of fictional entities, its pages (pronouns, short names, aliases) and multi-hop questions.
teacher: the multi-step pipeline (chunk, decontextualise under a ROUGE-1 filter, entities, quadruples); the same
extractor on raw chunks is the single-step baseline. distill: the one-pass linearised KG of the tiny LM. graph: the
proposition-entity graph, SynthKG's retrieval (top-M, N-hop filter, top-K chunks) and the HippoRAG-like PPR baseline.
metrics: coverage at theta, Hits@k, the deterministic multi-hop reader, the headline. figures: the two plots.
protocol: the experiment over tables (worlds per replicate, the teacher over pages, each method's tuned rankings,
the per-replicate scores) that the stages call.
"""

from __future__ import annotations

from paperdag._lazy import attach

# each submodule is imported on first use of one of its names: the package alone imports none of them
__getattr__, __dir__, __all__ = attach(__name__, {
    "world": ["QUESTION_TEMPLATES", "REL", "RELATIONS", "NameBank", "all_questions", "make_world", "render_page", "triple_text"],
    "teacher": ["ROUGE_MIN", "Rewrite", "chunk", "decontextualise", "decontextualise_page", "entities", "extract", "rouge1_f1"],
    "distill": ["linearise", "parse", "triple_f1"],
    "graph": ["EntityGraph", "PropositionGraph", "graph_retrieve", "n_hop_filter", "ppr_retrieve", "question_entities", "rank_by"],
    "metrics": ["EXTRACTORS", "METHODS", "coverage", "headline", "hits_at_k", "parse_question", "read_answer", "semantic_scores"],
    "figures": ["coverage_figure", "hits_figure"],
    "protocol": ["Vectors", "coverage_scores", "kg_by_page", "proposition_table", "rank_replicate", "replicate_scores", "score_replicates",
                 "support_chunks", "synthesize_worlds", "teach", "teacher_triples", "texts_to_encode", "triple_texts"],
})

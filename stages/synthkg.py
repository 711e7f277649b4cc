"""Glue between the paperdag engine and the synthkg method: synthesize -> teacher -> distill (x replicate) ->
build_graph -> retrieve -> evaluate. The method (worlds, teacher, distillation format, retrievers, the protocol over
tables, metrics, figures) lives in paperdag.methods.synthkg, the tiny LM in paperdag.lm, the encoder and BM25 in
paperdag.retrieval. A replicate is a world: its own train world (the pages the distilled model learns from) and eval
world (retrieval corpus, questions, held-out coverage pages), and its own distilled model."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Annotated

import numpy as np
import polars as pl
from pydantic import Field, NonNegativeInt, PositiveInt

from paperdag.engine import Item
from paperdag.lm import TinyLMConfig
from paperdag.methods.synthkg import (Vectors, headline, kg_by_page, proposition_table, rank_replicate, score_replicates,
                                      support_chunks, synthesize_worlds, teach, texts_to_encode)

Unit = Annotated[float, Field(ge=0, le=1)]
Counts = dict[str, PositiveInt]  # torch, transformers, the encoder and bm25s: imported inside the stage functions

# ---- synthesize -----------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SynthesizeParams:
    replicates: list[NonNegativeInt]  # one world pair per replicate
    train_world: Counts  # entities per type of the train world (person, org, city, country): the distillation pages
    eval_world: Counts  # entities per type of the eval world: retrieval corpus, questions, held-out coverage pages
    check_pages: PositiveInt  # train-world pages held out of distillation: the learnability check
    coref_share: Unit  # share of a page's later sentences that name its entity other than in full
    fillers: NonNegativeInt  # sentences per page that state no fact
    mentor_share: Unit  # share of people with a mentor
    questions: dict[str, PositiveInt]  # questions per template and split (val, test)
    seed: int


def synthesize(params: SynthesizeParams) -> dict[str, object]:
    """Per replicate a train and an eval world (no name shared), their pages and facts, and the eval world's
    multi-hop questions: `questions[split]` per template and split, distinct; too few answerable ones raise."""
    p = params
    pages, facts, questions = synthesize_worlds(p.replicates, p.train_world, p.eval_world, p.check_pages, p.coref_share, p.fillers,
                                                p.mentor_share, p.questions, p.seed)
    return {"pages": pl.DataFrame(pages), "facts": pl.DataFrame(facts), "questions": pl.DataFrame(questions)}


# ---- teacher ------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class TeacherParams:
    chunk_words: PositiveInt  # sentence-aligned chunks of at least this many words
    rouge_min: Unit  # a decontextualised rewrite is kept only if its ROUGE-1 F1 against the chunk reaches this


def teacher(params: TeacherParams, pages: pl.DataFrame) -> dict[str, object]:
    """Every page chunked and decontextualised chunk by chunk; the teacher's entities and quadruples from the
    decontextualised chunks, the single-step baseline's from the raw chunks (the same extractor)."""
    start = time.perf_counter()
    chunks, kg, ents, stats = teach(pages, params.chunk_words, params.rouge_min)
    return {"chunks": chunks, "kg": kg, "entities": ents, "teacher_stats": {**stats, "seconds": time.perf_counter() - start}}


# ---- distill ------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class DistillParams(TinyLMConfig):
    max_new_tokens: PositiveInt  # generation cap per page (the longest linearised KG is well under it)
    eval_batch_size: PositiveInt  # pages decoded together
    min_check_f1: Unit  # exact-triple F1 against the teacher on the check pages the model must reach
    item: Item  # the matrix element: item.replicate (its world and its seed)


def distill(params: DistillParams, pages: pl.DataFrame, kg: pl.DataFrame) -> dict[str, object]:
    """A byte-level BPE tokenizer and a tiny Llama trained from scratch on the replicate's train-world pages and the
    teacher's KGs of them (never the gold facts, never an eval page); its exact-triple F1 against the teacher on the
    check pages is checked; then one-pass KGs of every eval-world page."""
    import torch

    from paperdag.lm import build_or_load, checkpoint_writer, fit_pools, lm_stats
    from paperdag.methods.synthkg.distill import examples, linearise, predict, prompt_text, triple_f1

    start = time.perf_counter()
    r = params.item.replicate
    mine = pages.filter(pl.col("replicate") == r).sort("page")
    teacher_kg = kg_by_page(kg.filter(pl.col("replicate") == r), "teacher")
    train = mine.filter(pl.col("split") == "train")
    texts, kgs = train["text"].to_list(), [teacher_kg.get(i, []) for i in train["page"]]
    model, tokenizer = build_or_load(params, [prompt_text(t) + linearise(k) for t, k in zip(texts, kgs)], max_positions=512)
    pool = examples(tokenizer, texts, kgs)
    longest = max(len(a) + len(b) for a, b in pool)
    report = fit_pools(model, {"pages": pool}, {"pages": 1.0}, params, tokenizer.pad_token_id, f"synthkg distill {params.item}")
    check = mine.filter(pl.col("split") == "check")
    with torch.inference_mode():
        check_pred = predict(model, tokenizer, check["text"].to_list(), params.max_new_tokens, params.eval_batch_size)
    f1 = triple_f1(check_pred, [teacher_kg.get(i, []) for i in check["page"]])
    if f1 < params.min_check_f1:
        raise ValueError(f"synthkg distill {params.item}: exact-triple F1 against the teacher on the check pages is {f1:.3f} < "
                         f"distill.min_check_f1 = {params.min_check_f1}: the model did not learn one-pass extraction; raise "
                         "distill.steps or the model size")
    evals = mine.filter(pl.col("split") == "eval")
    with torch.inference_mode():
        pred = predict(model, tokenizer, evals["text"].to_list(), params.max_new_tokens, params.eval_batch_size)
    rows = [{"replicate": r, "page": pid, "source": s, "relation": rel, "target": t}
            for pid, triples in zip(evals["page"], pred) for s, rel, t in triples]
    stats = {"replicate": r, "check_f1_vs_teacher": f1, "train_pages": train.height, "longest_example_tokens": longest,
             **lm_stats(model, tokenizer, params, report.losses["loss"], time.perf_counter() - start)}
    schema = {"replicate": pl.Int64, "page": pl.Int64, "source": pl.String, "relation": pl.String, "target": pl.String}
    return {"model": checkpoint_writer(model, tokenizer), "distilled": pl.DataFrame(rows, schema=schema), "distill_stats": stats}


# ---- build_graph --------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class BuildGraphParams:
    encoder: str  # sentence encoder (packaged MiniLM or a local directory)


def build_graph(params: BuildGraphParams, chunks: pl.DataFrame, kg: pl.DataFrame, entities: pl.DataFrame,
                questions: pl.DataFrame, facts: pl.DataFrame, distilled: dict[Item, pl.DataFrame]) -> dict[str, object]:
    """The proposition-entity bipartite graph of each eval world from the teacher's quadruples (a proposition links
    the source and target that the entity step typed); and the one encoding of every text later stages compare:
    chunks, propositions, questions, and the triples of the gold facts and of every extractor (this is the only
    stage that loads the encoder)."""
    from paperdag.retrieval import encode, load_encoder

    start = time.perf_counter()
    propositions = proposition_table(kg, entities)
    texts = texts_to_encode(chunks, kg, propositions, questions, facts, list(distilled.values()))
    vectors = encode(load_encoder(params.encoder), texts)
    stats = {"propositions": propositions.height, "texts_encoded": len(texts),
             "entity_links": int(propositions["entities"].list.len().sum()),
             "propositions_without_entity": int((propositions["entities"].list.len() == 0).sum()),
             "seconds": time.perf_counter() - start}
    return {"propositions": propositions, "texts": pl.DataFrame({"text": texts}), "embeddings": vectors, "graph_stats": stats}


# ---- retrieve -----------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class RetrieveParams:
    k: PositiveInt  # K: chunks handed to the reader, the same for every method (Hits@K and EM are judged here)
    max_k: PositiveInt  # chunks ranked per question (the Hits@k curve runs to it)
    m_grid: list[PositiveInt]  # SynthKG's M (top propositions) tried on the validation questions
    n_grid: list[PositiveInt]  # SynthKG's N (hops) tried
    damping_grid: list[Annotated[float, Field(gt=0, lt=1)]]  # HippoRAG-like PPR damping tried


def retrieve(params: RetrieveParams, chunks: pl.DataFrame, kg: pl.DataFrame, entities: pl.DataFrame,
             propositions: pl.DataFrame, questions: pl.DataFrame, facts: pl.DataFrame, texts: pl.DataFrame,
             embeddings: np.ndarray) -> dict[str, object]:
    """Per replicate, each method's ranked chunks for every question; SynthKG's (M, N) and PPR's damping chosen on
    the validation questions by Hits@K (ties: EM, then the first in grid order), the same K for every method."""
    from paperdag.retrieval import BM25Index

    if params.k > params.max_k:
        raise ValueError(f"retrieve.k = {params.k} exceeds retrieve.max_k = {params.max_k}")
    vec, supports = Vectors(texts, embeddings), support_chunks(facts, chunks)
    rankings, tuning = [], []
    for r in sorted(set(questions["replicate"])):
        ranked, tuned = rank_replicate(r, chunks, kg, entities, propositions, questions, supports, vec, BM25Index.build, params.k,
                                       params.max_k, params.m_grid, params.n_grid, params.damping_grid)
        rankings += ranked
        tuning += tuned
    return {"rankings": pl.DataFrame(rankings), "tuning": pl.DataFrame(tuning)}


# ---- evaluate -----------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class EvaluateParams:
    theta: Annotated[float, Field(gt=0, le=1)]  # the headline's semantic score threshold
    thetas: list[Annotated[float, Field(gt=0, le=1)]]  # the coverage curve's thresholds
    k: PositiveInt  # the retrieve stage's K (Hits@K and EM)
    max_k: PositiveInt  # the Hits@k curve's last k


def evaluate(params: EvaluateParams, facts: pl.DataFrame, questions: pl.DataFrame, chunks: pl.DataFrame, kg: pl.DataFrame,
             distilled: dict[Item, pl.DataFrame], rankings: pl.DataFrame, tuning: pl.DataFrame, texts: pl.DataFrame,
             embeddings: np.ndarray, teacher_stats: dict, distill_stats: dict[Item, dict]) -> dict[str, object]:
    """Per replicate: coverage at theta of the test questions' supporting triples (the QA-derived gold, on held-out
    eval pages) for the teacher, the distilled model and single-step; Hits@k and reader EM per method on the test
    questions; the headline over replicates and the two figures."""
    from paperdag.methods.synthkg.figures import coverage_figure, hits_figure

    items = sorted(distilled, key=lambda i: i.replicate)
    ks = list(range(1, params.max_k + 1))
    rows, cov_curves, hit_curves = score_replicates([i.replicate for i in items], [distilled[i] for i in items], facts, questions,
                                                    chunks, kg, rankings, Vectors(texts, embeddings), params.theta, params.thetas,
                                                    params.k, ks)
    per_replicate = {str(i): {**row, "check_f1_vs_teacher": distill_stats[i]["check_f1_vs_teacher"]} for i, row in zip(items, rows)}
    chosen = tuning.filter(pl.col("setting").str.starts_with("chosen")).select("replicate", "method", "setting").to_dicts()
    metrics = {"headline": headline(list(per_replicate.values()), params.theta), "per_replicate": per_replicate,
               "coverage_curve": {"thetas": params.thetas, **cov_curves}, "hits_curve": {"k": ks, **hit_curves},
               "chosen_settings": chosen, "teacher": {k: v for k, v in teacher_stats.items() if k != "seconds"}}
    return {"metrics": metrics, "coverage_vs_theta": coverage_figure(params.thetas, cov_curves, params.theta),
            "hits_at_k": hits_figure(ks, hit_curves, params.k)}

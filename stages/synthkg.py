"""Glue between the paperdag engine and the synthkg method: synthesize -> teacher -> distill (x replicate) ->
build_graph -> retrieve -> evaluate. The world, the teacher, the distillation format, the retrievers, the metrics and
the figures live in paperdag.methods.synthkg; the tiny LM in paperdag.lm; the encoder and BM25 in
paperdag.retrieval; intervals in paperdag.stats. These functions read inputs, call them and return their outputs.

A replicate is a world: its own train world (the pages the distilled model learns from) and eval world (the
retrieval corpus, the questions, the held-out pages coverage is measured on), and its own distilled model."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import numpy as np
import polars as pl
from pydantic import Field, NonNegativeInt, PositiveInt

from paperdag.engine import Item
from paperdag.lm import TinyLMConfig
from paperdag.methods.synthkg import (EXTRACTORS, METHODS, REL, EntityGraph, NameBank, PropositionGraph, all_questions,
                                      chunk, coverage, decontextualise_page, extract, graph_retrieve, headline, hits_at_k,
                                      make_world, ppr_retrieve, question_entities, rank_by, read_answer, render_page,
                                      semantic_scores, triple_text)

Unit = Annotated[float, Field(ge=0, le=1)]
Counts = dict[str, PositiveInt]

# torch, transformers, the encoder and bm25s are imported inside the stage functions: importing this module stays cheap.


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


def _pages_of(world, rng: random.Random, p: SynthesizeParams) -> list:
    return [render_page(world, n, rng, p.coref_share, p.fillers) for n, e in world.entities.items() if e.type != "country"]


def synthesize(params: SynthesizeParams) -> dict[str, object]:
    """Per replicate a train and an eval world (no name shared), their pages and facts, and the eval world's
    multi-hop questions: `questions[split]` per template and split, distinct; too few answerable ones raise."""
    p = params
    pages, facts, questions = [], [], []
    for r in p.replicates:
        rng = random.Random(p.seed * 1000 + r)
        bank = NameBank(rng)
        fact_id = 0
        for world_name, counts in (("train", p.train_world), ("eval", p.eval_world)):
            world = make_world(counts, bank, rng, p.mentor_share, first_id=fact_id)
            fact_id += len(world.facts)
            rendered = _pages_of(world, rng, p)
            check = set(rng.sample(range(len(rendered)), p.check_pages)) if world_name == "train" else set()
            if world_name == "train" and len(rendered) - len(check) < 2 * p.check_pages:
                raise ValueError(f"synthesize: the train world has {len(rendered)} pages for {p.check_pages} check pages; raise train_world")
            page_of = {}
            for page in rendered:
                pid = len(pages)
                page_of[page.entity] = pid
                split = "eval" if world_name == "eval" else ("check" if len(page_of) - 1 in check else "train")
                pages.append({"replicate": r, "world": world_name, "split": split, "page": pid, "entity": page.entity,
                              "type": world.entities[page.entity].type, "text": page.text, "mentions": list(page.mentions)})
            sentences = {fid: s for page in rendered for fid, s in page.fact_sentences.items()}
            facts += [{"replicate": r, "world": world_name, "fact": f.id, "source": f.source, "relation": f.relation,
                       "target": f.target, "text": f.text(), "page": page_of[f.source], "sentence": sentences[f.id]}
                      for f in world.facts]
        by_template: dict[str, list] = {}
        for q in all_questions(world):
            by_template.setdefault(q.template, []).append(q)
        need = p.questions["val"] + p.questions["test"]
        for key, qs in by_template.items():
            if len(qs) < need:
                raise ValueError(f"synthesize: template {key} has {len(qs)} answerable questions in replicate {r}'s eval "
                                 f"world, {need} asked (questions.val + questions.test); raise eval_world")
            drawn = rng.sample(qs, need)
            for i, q in enumerate(drawn):
                questions.append({"replicate": r, "split": "val" if i < p.questions["val"] else "test", "question": len(questions),
                                  "template": q.template, "start": q.start, "text": q.text, "answer": q.answer,
                                  "hops": len(q.supports), "supports": list(q.supports)})
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
    chunks, kg, ents = [], [], []
    for row in pages.sort("page").iter_rows(named=True):
        rewrites = decontextualise_page(chunk(row["text"], params.chunk_words), params.rouge_min)
        for position, rw in enumerate(rewrites):
            cid = len(chunks)
            chunks.append({"replicate": row["replicate"], "world": row["world"], "page": row["page"], "chunk": cid,
                           "position": position, "raw": rw.original, "text": rw.text, "rewrite": rw.rewrite,
                           "rouge1": rw.rouge1, "kept": rw.kept})
            for extractor, text in (("teacher", rw.text), ("single_step", rw.original)):
                found, quads = extract(text)
                ents += [{"replicate": row["replicate"], "chunk": cid, "extractor": extractor, "name": n, "type": t} for n, t in found]
                kg += [{"replicate": row["replicate"], "world": row["world"], "page": row["page"], "chunk": cid, "extractor": extractor,
                        "source": q.source, "relation": q.relation, "target": q.target, "proposition": q.proposition} for q in quads]
    chunks_df = pl.DataFrame(chunks)
    changed = chunks_df.filter(pl.col("rewrite") != pl.col("raw"))
    stats = {"chunks": chunks_df.height, "rewrites_changed": changed.height,
             "rewrites_kept_share": float(changed["kept"].mean()) if changed.height else None,
             "rouge1_min": float(changed["rouge1"].min()) if changed.height else None,
             "quadruples": pl.DataFrame(kg).group_by("extractor").len().sort("extractor").to_dicts(),
             "seconds": time.perf_counter() - start}
    return {"chunks": chunks_df, "kg": pl.DataFrame(kg), "entities": pl.DataFrame(ents), "teacher_stats": stats}


def _kg_by_page(kg: pl.DataFrame, extractor: str) -> dict[int, list[tuple[str, str, str]]]:
    out: dict[int, list[tuple[str, str, str]]] = {}
    for r in kg.filter(pl.col("extractor") == extractor).sort("chunk", maintain_order=True).iter_rows(named=True):
        triple = (r["source"], r["relation"], r["target"])
        if triple not in out.setdefault(r["page"], []):
            out[r["page"]].append(triple)
    return out


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
    teacher_kg = _kg_by_page(kg.filter(pl.col("replicate") == r), "teacher")
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


def _triple_texts(df: pl.DataFrame) -> list[str]:
    return [triple_text(s, REL[r].predicate, t) for s, r, t in df.select("source", "relation", "target").iter_rows()]


def build_graph(params: BuildGraphParams, chunks: pl.DataFrame, kg: pl.DataFrame, entities: pl.DataFrame,
                questions: pl.DataFrame, facts: pl.DataFrame, distilled: dict[Item, pl.DataFrame]) -> dict[str, object]:
    """The proposition-entity bipartite graph of each eval world from the teacher's quadruples (a proposition links
    the source and target that the entity step typed); and the one encoding of every text later stages compare:
    chunks, propositions, questions, and the triples of the gold facts and of every extractor (this is the only
    stage that loads the encoder)."""
    from paperdag.retrieval import encode, load_encoder

    start = time.perf_counter()
    typed = {(c, n) for c, n in entities.filter(pl.col("extractor") == "teacher").select("chunk", "name").iter_rows()}
    rows = kg.filter((pl.col("extractor") == "teacher") & (pl.col("world") == "eval")).sort("chunk", maintain_order=True)
    props = [{"replicate": r["replicate"], "proposition": i, "chunk": r["chunk"], "text": r["proposition"],
              "entities": [e for e in (r["source"], r["target"]) if (r["chunk"], e) in typed]} for i, r in enumerate(rows.iter_rows(named=True))]
    propositions = pl.DataFrame(props)
    eval_chunks = chunks.filter(pl.col("world") == "eval")
    extracted = kg.filter(pl.col("world") == "eval")
    texts = sorted(set(eval_chunks["text"]) | set(propositions["text"]) | set(questions["text"])
                   | set(_triple_texts(facts.filter(pl.col("world") == "eval"))) | set(_triple_texts(extracted))
                   | {t for d in distilled.values() for t in _triple_texts(d)})
    vectors = encode(load_encoder(params.encoder), texts)
    stats = {"propositions": propositions.height, "texts_encoded": len(texts),
             "entity_links": int(propositions["entities"].list.len().sum()),
             "propositions_without_entity": int((propositions["entities"].list.len() == 0).sum()),
             "seconds": time.perf_counter() - start}
    return {"propositions": propositions, "texts": pl.DataFrame({"text": texts}), "embeddings": vectors, "graph_stats": stats}


class _Vectors:
    """Text -> its row of build_graph's embeddings."""

    def __init__(self, texts: pl.DataFrame, embeddings: np.ndarray) -> None:
        self.row = {t: i for i, t in enumerate(texts["text"])}
        self.embeddings = embeddings

    def __call__(self, items: list[str]) -> np.ndarray:
        return self.embeddings[[self.row[t] for t in items]]  # (n, d)


def _support_chunks(facts: pl.DataFrame, chunks: pl.DataFrame) -> dict[tuple[int, int], int]:
    """(replicate, fact id) -> the chunk whose raw text holds the sentence stating it (page and chunk ids are unique
    over replicates, fact ids within one)."""
    by_page: dict[int, list[tuple[int, str]]] = {}
    for c in chunks.filter(pl.col("world") == "eval").iter_rows(named=True):
        by_page.setdefault(c["page"], []).append((c["chunk"], c["raw"]))
    out = {}
    for f in facts.filter(pl.col("world") == "eval").iter_rows(named=True):
        out[(f["replicate"], f["fact"])] = next(cid for cid, raw in by_page[f["page"]] if f["sentence"] in raw)
    return out


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
    vec = _Vectors(texts, embeddings)
    supports = _support_chunks(facts, chunks)
    rankings, tuning = [], []
    for r in sorted(set(questions["replicate"])):
        cs = chunks.filter((pl.col("replicate") == r) & (pl.col("world") == "eval")).sort("chunk")
        cids = cs["chunk"].to_numpy()
        local = {int(c): i for i, c in enumerate(cids)}  # chunk id -> row
        props = propositions.filter(pl.col("replicate") == r).sort("proposition")
        graph = PropositionGraph.build([local[c] for c in props["chunk"]], props["entities"].to_list())
        ents = entities.filter((pl.col("replicate") == r) & (pl.col("extractor") == "teacher"))
        chunk_ents = [[] for _ in cids]
        for c, n in ents.select("chunk", "name").iter_rows():
            if c in local:
                chunk_ents[local[c]].append(n)
        teacher_rows = kg.filter((pl.col("replicate") == r) & (pl.col("extractor") == "teacher") & (pl.col("world") == "eval"))
        typed = {(c, n) for c, n in ents.select("chunk", "name").iter_rows()}
        edges = [(s, t) for c, s, t in teacher_rows.select("chunk", "source", "target").iter_rows() if (c, s) in typed and (c, t) in typed]
        ppr_index = EntityGraph.build(edges, chunk_ents)
        chunk_triples = [[] for _ in cids]
        for c, s, rel, t in teacher_rows.select("chunk", "source", "relation", "target").iter_rows():
            chunk_triples[local[c]].append((s, rel, t))
        bm25 = BM25Index.build(cs["text"].to_list())
        chunk_vec, prop_vec = vec(cs["text"].to_list()), vec(props["text"].to_list())
        qs = questions.filter(pl.col("replicate") == r).sort("question").to_dicts()
        q_vec = vec([q["text"] for q in qs])
        dense_scores = q_vec @ chunk_vec.T  # (Q, C)
        _, bm25_ids = bm25.search([q["text"] for q in qs], params.max_k)
        seeds = [question_entities(q["text"], graph.names) for q in qs]
        ppr_seeds = [question_entities(q["text"], sorted(ppr_index.specificity, key=lambda n: (-len(n), n))) for q in qs]

        def score(ranked: list[list[int]], split: str) -> tuple[float, float]:
            rows = [(i, q) for i, q in enumerate(qs) if q["split"] == split]
            hits = np.mean([hits_at_k(ranked[i], [local[supports[(r, f)]] for f in q["supports"]], params.k) for i, q in rows])
            em = np.mean([read_answer(q["text"], [t for c in ranked[i][: params.k] for t in chunk_triples[c]]) == q["answer"] for i, q in rows])
            return 100.0 * float(hits), 100.0 * float(em)

        def tune(method: str, settings: list, run) -> list[list[int]]:
            best, best_key = None, None
            for setting in settings:
                ranked = run(setting)
                hits, em = score(ranked, "val")
                tuning.append({"replicate": r, "method": method, "setting": str(setting), "val_hits": hits, "val_em": em})
                if best_key is None or (hits, em) > best_key:
                    best, best_key = (setting, ranked), (hits, em)
            tuning.append({"replicate": r, "method": method, "setting": f"chosen {best[0]}", "val_hits": best_key[0], "val_em": best_key[1]})
            return best[1]

        ranked = {
            "dense": [rank_by(dense_scores[i], params.max_k) for i in range(len(qs))],
            "bm25": [[int(c) for c in row if c >= 0] for row in bm25_ids],
            "graph": tune("graph", [(m, n) for m in params.m_grid for n in params.n_grid],
                          lambda mn: [graph_retrieve(q_vec[i], prop_vec, graph, seeds[i], mn[0], mn[1], params.max_k) for i in range(len(qs))]),
            "ppr": tune("ppr", list(params.damping_grid),
                        lambda d: [ppr_retrieve(ppr_index, ppr_seeds[i], d, params.max_k, dense_scores[i]) for i in range(len(qs))]),
        }
        for method in METHODS:
            for i, q in enumerate(qs):
                rankings.append({"replicate": r, "split": q["split"], "question": q["question"], "method": method,
                                 "chunks": [int(cids[c]) for c in ranked[method][i]]})
    return {"rankings": pl.DataFrame(rankings), "tuning": pl.DataFrame(tuning)}


# ---- evaluate -----------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class EvaluateParams:
    theta: Annotated[float, Field(gt=0, le=1)]  # the headline's semantic score threshold
    thetas: list[Annotated[float, Field(gt=0, le=1)]]  # the coverage curve's thresholds
    k: PositiveInt  # the retrieve stage's K (Hits@K and EM)
    max_k: PositiveInt  # the Hits@k curve's last k


def _coverage_scores(r: int, gold: pl.DataFrame, kg: pl.DataFrame, distilled: pl.DataFrame, vec: _Vectors) -> dict[str, np.ndarray]:
    """extractor -> (G,) semantic score of each gold triple against the triples extracted from its page."""
    gold_vec = vec(gold["text"].to_list())
    out = {}
    for extractor in EXTRACTORS:
        rows = distilled if extractor == "distilled" else kg.filter((pl.col("extractor") == extractor) & (pl.col("replicate") == r))
        by_page: dict[int, list[str]] = {}
        for page, text in zip(rows["page"], _triple_texts(rows)):
            by_page.setdefault(page, []).append(text)
        out[extractor] = semantic_scores(gold_vec, [vec(sorted(set(by_page.get(p, [])))) for p in gold["page"]])
    return out


def evaluate(params: EvaluateParams, facts: pl.DataFrame, questions: pl.DataFrame, chunks: pl.DataFrame, kg: pl.DataFrame,
             distilled: dict[Item, pl.DataFrame], rankings: pl.DataFrame, tuning: pl.DataFrame, texts: pl.DataFrame,
             embeddings: np.ndarray, teacher_stats: dict, distill_stats: dict[Item, dict]) -> dict[str, object]:
    """Per replicate: coverage at theta of the test questions' supporting triples (the QA-derived gold, on held-out
    eval pages) for the teacher, the distilled model and single-step; Hits@k and reader EM per method on the test
    questions; the headline over replicates and the two figures."""
    from paperdag.methods.synthkg.figures import coverage_figure, hits_figure

    vec = _Vectors(texts, embeddings)
    supports = _support_chunks(facts, chunks)
    teacher_triples: dict[int, list] = {}
    for c, s, rel, t in kg.filter((pl.col("extractor") == "teacher") & (pl.col("world") == "eval")).select("chunk", "source", "relation", "target").iter_rows():
        teacher_triples.setdefault(c, []).append((s, rel, t))
    per_replicate, cov_curves, hit_curves = {}, {e: [] for e in EXTRACTORS}, {m: [] for m in METHODS}
    ks = list(range(1, params.max_k + 1))
    for item, dist in sorted(distilled.items(), key=lambda kv: kv[0].replicate):
        r = item.replicate
        test = questions.filter((pl.col("replicate") == r) & (pl.col("split") == "test")).sort("question")
        gold_ids = sorted({f for s in test["supports"] for f in s})
        gold = facts.filter(pl.col("fact").is_in(gold_ids) & (pl.col("replicate") == r) & (pl.col("world") == "eval")).sort("fact")
        scores = _coverage_scores(r, gold, kg, dist, vec)
        row: dict[str, object] = {"gold_triples": gold.height, "test_questions": test.height}
        for e in EXTRACTORS:
            row[f"coverage_{e}"] = coverage(scores[e], params.theta)
            row[f"mean_semantic_score_{e}"] = float(scores[e].mean())
            cov_curves[e].append([coverage(scores[e], th) for th in params.thetas])
        ranks = rankings.filter((pl.col("replicate") == r) & (pl.col("split") == "test"))
        for m in METHODS:
            by_q = dict(ranks.filter(pl.col("method") == m).select("question", "chunks").iter_rows())
            sup = {q["question"]: [supports[(r, f)] for f in q["supports"]] for q in test.iter_rows(named=True)}
            curve = [100.0 * float(np.mean([hits_at_k(list(by_q[q]), sup[q], k) for q in sup])) for k in ks]
            hit_curves[m].append(curve)
            row[f"hits_{m}"] = curve[params.k - 1]
            row[f"all_supports_{m}"] = 100.0 * float(np.mean([set(sup[q]) <= set(list(by_q[q])[: params.k]) for q in sup]))
            answers = [read_answer(q["text"], [t for c in list(by_q[q["question"]])[: params.k] for t in teacher_triples.get(c, [])])
                       for q in test.iter_rows(named=True)]
            row[f"em_{m}"] = 100.0 * float(np.mean([a == q for a, q in zip(answers, test["answer"])]))
        row["check_f1_vs_teacher"] = distill_stats[item]["check_f1_vs_teacher"]
        per_replicate[str(item)] = row
    chosen = tuning.filter(pl.col("setting").str.starts_with("chosen")).select("replicate", "method", "setting").to_dicts()
    metrics = {"headline": headline(list(per_replicate.values()), params.theta), "per_replicate": per_replicate,
               "coverage_curve": {"thetas": params.thetas, **{e: c for e, c in cov_curves.items()}},
               "hits_curve": {"k": ks, **{m: c for m, c in hit_curves.items()}},
               "chosen_settings": chosen, "teacher": {k: v for k, v in teacher_stats.items() if k != "seconds"}}
    return {"metrics": metrics, "coverage_vs_theta": coverage_figure(params.thetas, cov_curves, params.theta),
            "hits_at_k": hits_figure(ks, hit_curves, params.k)}

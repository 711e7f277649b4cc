"""SynthKG's experimental protocol over tables: the replicate worlds and their questions, the teacher over every page,
the proposition table, each method's ranked chunks (SynthKG's M and N and PPR's damping tuned on the validation
questions) and the per-replicate scores. Every function takes and returns rows or polars frames; the stage module
only reads and writes them. The encoder and BM25 come in through their arguments (vectors) or paperdag.retrieval."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import polars as pl

from paperdag.methods.synthkg.graph import EntityGraph, PropositionGraph, graph_retrieve, ppr_retrieve, question_entities, rank_by
from paperdag.methods.synthkg.metrics import EXTRACTORS, METHODS, coverage, hits_at_k, read_answer, semantic_scores
from paperdag.methods.synthkg.teacher import chunk, decontextualise_page, extract
from paperdag.methods.synthkg.world import REL, NameBank, all_questions, make_world, render_page, triple_text

Triple = tuple[str, str, str]


# ---- worlds ---------------------------------------------------------------------------------------------------------

def synthesize_worlds(replicates: Sequence[int], train_world: Mapping[str, int], eval_world: Mapping[str, int], check_pages: int,
                      coref_share: float, fillers: int, mentor_share: float, questions: Mapping[str, int],
                      seed: int) -> tuple[list[dict], list[dict], list[dict]]:
    """Per replicate a train and an eval world (no name shared), their pages and facts, and the eval world's
    multi-hop questions: `questions[split]` per template and split, distinct; too few answerable ones raise.
    Returns (pages, facts, questions) rows."""
    pages, facts, rows = [], [], []
    for r in replicates:
        rng = random.Random(seed * 1000 + r)
        bank = NameBank(rng)
        fact_id = 0
        for world_name, counts in (("train", train_world), ("eval", eval_world)):
            world = make_world(counts, bank, rng, mentor_share, first_id=fact_id)
            fact_id += len(world.facts)
            rendered = [render_page(world, n, rng, coref_share, fillers) for n, e in world.entities.items() if e.type != "country"]
            check = set(rng.sample(range(len(rendered)), check_pages)) if world_name == "train" else set()
            if world_name == "train" and len(rendered) - len(check) < 2 * check_pages:
                raise ValueError(f"synthesize: the train world has {len(rendered)} pages for {check_pages} check pages; raise train_world")
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
        need = questions["val"] + questions["test"]
        for key, qs in by_template.items():
            if len(qs) < need:
                raise ValueError(f"synthesize: template {key} has {len(qs)} answerable questions in replicate {r}'s eval "
                                 f"world, {need} asked (questions.val + questions.test); raise eval_world")
            drawn = rng.sample(qs, need)
            for i, q in enumerate(drawn):
                rows.append({"replicate": r, "split": "val" if i < questions["val"] else "test", "question": len(rows),
                             "template": q.template, "start": q.start, "text": q.text, "answer": q.answer,
                             "hops": len(q.supports), "supports": list(q.supports)})
    return pages, facts, rows


# ---- teacher ------------------------------------------------------------------------------------------------------------

def teach(pages: pl.DataFrame, chunk_words: int, rouge_min: float) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, dict]:
    """Every page chunked and decontextualised chunk by chunk; the teacher's entities and quadruples from the
    decontextualised chunks, the single-step baseline's from the raw chunks (the same extractor). Returns the chunks,
    kg and entities tables and their summary."""
    chunks, kg, ents = [], [], []
    for row in pages.sort("page").iter_rows(named=True):
        rewrites = decontextualise_page(chunk(row["text"], chunk_words), rouge_min)
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
             "quadruples": pl.DataFrame(kg).group_by("extractor").len().sort("extractor").to_dicts()}
    return chunks_df, pl.DataFrame(kg), pl.DataFrame(ents), stats


def teacher_triples(kg: pl.DataFrame) -> dict[int, list[Triple]]:
    """eval-world chunk id -> the teacher's triples extracted from it (what the reader reads)."""
    out: dict[int, list[Triple]] = {}
    rows = kg.filter((pl.col("extractor") == "teacher") & (pl.col("world") == "eval"))
    for c, s, rel, t in rows.select("chunk", "source", "relation", "target").iter_rows():
        out.setdefault(c, []).append((s, rel, t))
    return out


def kg_by_page(kg: pl.DataFrame, extractor: str) -> dict[int, list[Triple]]:
    """page -> one extractor's distinct triples, in chunk order."""
    out: dict[int, list[Triple]] = {}
    for r in kg.filter(pl.col("extractor") == extractor).sort("chunk", maintain_order=True).iter_rows(named=True):
        triple = (r["source"], r["relation"], r["target"])
        if triple not in out.setdefault(r["page"], []):
            out[r["page"]].append(triple)
    return out


# ---- graph and texts ----------------------------------------------------------------------------------------------------

def triple_texts(df: pl.DataFrame) -> list[str]:
    """Each (source, relation, target) row as the text the encoder compares ("source predicate target")."""
    return [triple_text(s, REL[r].predicate, t) for s, r, t in df.select("source", "relation", "target").iter_rows()]


def proposition_table(kg: pl.DataFrame, entities: pl.DataFrame) -> pl.DataFrame:
    """The proposition side of each eval world's bipartite graph: one row per teacher quadruple, linked to its source
    and target where the entity step typed them in that chunk."""
    typed = {(c, n) for c, n in entities.filter(pl.col("extractor") == "teacher").select("chunk", "name").iter_rows()}
    rows = kg.filter((pl.col("extractor") == "teacher") & (pl.col("world") == "eval")).sort("chunk", maintain_order=True)
    return pl.DataFrame([{"replicate": r["replicate"], "proposition": i, "chunk": r["chunk"], "text": r["proposition"],
                          "entities": [e for e in (r["source"], r["target"]) if (r["chunk"], e) in typed]}
                         for i, r in enumerate(rows.iter_rows(named=True))])


def texts_to_encode(chunks: pl.DataFrame, kg: pl.DataFrame, propositions: pl.DataFrame, questions: pl.DataFrame,
                    facts: pl.DataFrame, distilled: Sequence[pl.DataFrame]) -> list[str]:
    """Every text a later stage compares, once, sorted: eval chunks, propositions, questions, and the triples of the
    gold facts and of every extractor."""
    return sorted(set(chunks.filter(pl.col("world") == "eval")["text"]) | set(propositions["text"]) | set(questions["text"])
                  | set(triple_texts(facts.filter(pl.col("world") == "eval"))) | set(triple_texts(kg.filter(pl.col("world") == "eval")))
                  | {t for d in distilled for t in triple_texts(d)})


class Vectors:
    """Text -> its row of build_graph's embeddings."""

    def __init__(self, texts: pl.DataFrame, embeddings: np.ndarray) -> None:
        self.row = {t: i for i, t in enumerate(texts["text"])}
        self.embeddings = embeddings

    def __call__(self, items: list[str]) -> np.ndarray:
        return self.embeddings[[self.row[t] for t in items]]  # (n, d)


def support_chunks(facts: pl.DataFrame, chunks: pl.DataFrame) -> dict[tuple[int, int], int]:
    """(replicate, fact id) -> the chunk whose raw text holds the sentence stating it (page and chunk ids are unique
    over replicates, fact ids within one)."""
    by_page: dict[int, list[tuple[int, str]]] = {}
    for c in chunks.filter(pl.col("world") == "eval").iter_rows(named=True):
        by_page.setdefault(c["page"], []).append((c["chunk"], c["raw"]))
    out = {}
    for f in facts.filter(pl.col("world") == "eval").iter_rows(named=True):
        out[(f["replicate"], f["fact"])] = next(cid for cid, raw in by_page[f["page"]] if f["sentence"] in raw)
    return out


# ---- retrieval ----------------------------------------------------------------------------------------------------------

def rank_replicate(r: int, chunks: pl.DataFrame, kg: pl.DataFrame, entities: pl.DataFrame, propositions: pl.DataFrame,
                   questions: pl.DataFrame, supports: Mapping[tuple[int, int], int], vec: Vectors, bm25_index: Callable,
                   k: int, max_k: int, m_grid: Sequence[int], n_grid: Sequence[int],
                   damping_grid: Sequence[float]) -> tuple[list[dict], list[dict]]:
    """Replicate r's ranked chunks per method for every question, and the tuning rows: SynthKG's (M, N) and PPR's
    damping chosen on the validation questions by Hits@K (ties: EM, then the first in grid order), the same K for
    every method. bm25_index(texts) builds a BM25 index with .search(queries, k)."""
    tuning: list[dict] = []
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
    bm25 = bm25_index(cs["text"].to_list())
    chunk_vec, prop_vec = vec(cs["text"].to_list()), vec(props["text"].to_list())
    qs = questions.filter(pl.col("replicate") == r).sort("question").to_dicts()
    q_vec = vec([q["text"] for q in qs])
    dense_scores = q_vec @ chunk_vec.T  # (Q, C)
    _, bm25_ids = bm25.search([q["text"] for q in qs], max_k)
    seeds = [question_entities(q["text"], graph.names) for q in qs]
    ppr_seeds = [question_entities(q["text"], sorted(ppr_index.specificity, key=lambda n: (-len(n), n))) for q in qs]

    def score(ranked: list[list[int]], split: str) -> tuple[float, float]:
        rows = [(i, q) for i, q in enumerate(qs) if q["split"] == split]
        hits = np.mean([hits_at_k(ranked[i], [local[supports[(r, f)]] for f in q["supports"]], k) for i, q in rows])
        em = np.mean([read_answer(q["text"], [t for c in ranked[i][:k] for t in chunk_triples[c]]) == q["answer"] for i, q in rows])
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
        "dense": [rank_by(dense_scores[i], max_k) for i in range(len(qs))],
        "bm25": [[int(c) for c in row if c >= 0] for row in bm25_ids],
        "graph": tune("graph", [(m, n) for m in m_grid for n in n_grid],
                      lambda mn: [graph_retrieve(q_vec[i], prop_vec, graph, seeds[i], mn[0], mn[1], max_k) for i in range(len(qs))]),
        "ppr": tune("ppr", list(damping_grid),
                    lambda d: [ppr_retrieve(ppr_index, ppr_seeds[i], d, max_k, dense_scores[i]) for i in range(len(qs))]),
    }
    rankings = [{"replicate": r, "split": q["split"], "question": q["question"], "method": method,
                 "chunks": [int(cids[c]) for c in ranked[method][i]]} for method in METHODS for i, q in enumerate(qs)]
    return rankings, tuning


# ---- scores -------------------------------------------------------------------------------------------------------------

def coverage_scores(r: int, gold: pl.DataFrame, kg: pl.DataFrame, distilled: pl.DataFrame, vec: Vectors) -> dict[str, np.ndarray]:
    """extractor -> (G,) semantic score of each gold triple against the triples extracted from its page."""
    gold_vec = vec(gold["text"].to_list())
    out = {}
    for extractor in EXTRACTORS:
        rows = distilled if extractor == "distilled" else kg.filter((pl.col("extractor") == extractor) & (pl.col("replicate") == r))
        by_page: dict[int, list[str]] = {}
        for page, text in zip(rows["page"], triple_texts(rows)):
            by_page.setdefault(page, []).append(text)
        out[extractor] = semantic_scores(gold_vec, [vec(sorted(set(by_page.get(p, [])))) for p in gold["page"]])
    return out


def replicate_scores(r: int, facts: pl.DataFrame, questions: pl.DataFrame, kg: pl.DataFrame, distilled: pl.DataFrame,
                     rankings: pl.DataFrame, supports: Mapping[tuple[int, int], int], read_from: Mapping[int, list[Triple]],
                     vec: Vectors, theta: float, thetas: Sequence[float], k: int,
                     ks: Sequence[int]) -> tuple[dict[str, object], dict[str, list[float]], dict[str, list[float]]]:
    """Replicate r on its test questions: coverage at theta of their supporting triples (the QA-derived gold, on
    held-out eval pages) per extractor, Hits@k and reader EM per method. Returns (row, coverage curve per extractor
    over thetas, Hits@k curve per method over ks)."""
    test = questions.filter((pl.col("replicate") == r) & (pl.col("split") == "test")).sort("question")
    gold_ids = sorted({f for s in test["supports"] for f in s})
    gold = facts.filter(pl.col("fact").is_in(gold_ids) & (pl.col("replicate") == r) & (pl.col("world") == "eval")).sort("fact")
    scores = coverage_scores(r, gold, kg, distilled, vec)
    row: dict[str, object] = {"gold_triples": gold.height, "test_questions": test.height}
    cov_curves, hit_curves = {}, {}
    for e in EXTRACTORS:
        row[f"coverage_{e}"] = coverage(scores[e], theta)
        row[f"mean_semantic_score_{e}"] = float(scores[e].mean())
        cov_curves[e] = [coverage(scores[e], th) for th in thetas]
    ranks = rankings.filter((pl.col("replicate") == r) & (pl.col("split") == "test"))
    sup = {q["question"]: [supports[(r, f)] for f in q["supports"]] for q in test.iter_rows(named=True)}
    for m in METHODS:
        by_q = dict(ranks.filter(pl.col("method") == m).select("question", "chunks").iter_rows())
        curve = [100.0 * float(np.mean([hits_at_k(list(by_q[q]), sup[q], kk) for q in sup])) for kk in ks]
        hit_curves[m] = curve
        row[f"hits_{m}"] = curve[k - 1]
        row[f"all_supports_{m}"] = 100.0 * float(np.mean([set(sup[q]) <= set(list(by_q[q])[:k]) for q in sup]))
        answers = [read_answer(q["text"], [t for c in list(by_q[q["question"]])[:k] for t in read_from.get(c, [])])
                   for q in test.iter_rows(named=True)]
        row[f"em_{m}"] = 100.0 * float(np.mean([a == q for a, q in zip(answers, test["answer"])]))
    return row, cov_curves, hit_curves


def score_replicates(replicates: Sequence[int], distilled: Sequence[pl.DataFrame], facts: pl.DataFrame, questions: pl.DataFrame,
                     chunks: pl.DataFrame, kg: pl.DataFrame, rankings: pl.DataFrame, vec: Vectors, theta: float,
                     thetas: Sequence[float], k: int, ks: Sequence[int]) -> tuple[list[dict], dict[str, list], dict[str, list]]:
    """replicate_scores of each replicate (distilled[i]: replicate i's distilled triples), in the order given; the
    coverage curves per extractor and the Hits@k curves per method, one list per replicate."""
    supports, read_from = support_chunks(facts, chunks), teacher_triples(kg)
    rows, cov_curves, hit_curves = [], {e: [] for e in EXTRACTORS}, {m: [] for m in METHODS}
    for r, dist in zip(replicates, distilled, strict=True):
        row, cov, hits = replicate_scores(r, facts, questions, kg, dist, rankings, supports, read_from, vec, theta, thetas, k, ks)
        rows.append(row)
        for e in EXTRACTORS:
            cov_curves[e].append(cov[e])
        for m in METHODS:
            hit_curves[m].append(hits[m])
    return rows, cov_curves, hit_curves

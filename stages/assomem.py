"""Glue between the engine and assomem: synthesize -> build_graph -> fit_fusion -> retrieve -> evaluate, per replicate
(a pair of dialogue sets; paperdag.dialogue) a matrix element; the method is paperdag.methods.assomem."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Annotated

import polars as pl
from pydantic import Field, PositiveFloat, PositiveInt

from paperdag.engine import Item

Unit = Annotated[float, Field(ge=0, le=1)]


@dataclass(frozen=True)
class SetParams:
    dialogues: PositiveInt  # dialogues (haystacks) in the set
    dev_dialogues: PositiveInt  # the first ones: the held-out split every method is tuned on
    sessions: PositiveInt  # dated sessions per dialogue
    utterances: PositiveInt  # utterances per session
    entities: PositiveInt  # entities per dialogue, each discussed in >= 2 sessions
    statements: Annotated[list[PositiveInt], Field(min_length=2, max_length=2)]  # [fewest, most] facts per session
    questions: dict[str, PositiveInt]  # per dialogue: fact, preference, temporal


@dataclass(frozen=True)
class SynthesizeParams:
    chat: SetParams  # the similarity-dense chat set (the claims' set)
    meeting: SetParams  # the MeetingQA-like set
    pronoun_rate: Unit  # share of statements naming their entity by pronoun only
    seed: int
    item: Item  # item.replicate: the dialogue sets' own seed


def synthesize(params: SynthesizeParams) -> dict[str, object]:
    """Both dialogue sets of this replicate; the first dev_dialogues of each are the dev split."""
    from paperdag.dialogue import DialogueSpec, generate

    utterances, questions = [], []  # one table each, both sets
    for name in ("chat", "meeting"):
        p: SetParams = getattr(params, name)
        if p.dev_dialogues >= p.dialogues:
            raise ValueError(f"assomem synthesize.{name}: dev_dialogues ({p.dev_dialogues}) must be < dialogues ({p.dialogues})")
        spec = DialogueSpec(register=name, dialogues=p.dialogues, sessions=p.sessions, utterances=p.utterances,
                            entities=p.entities, statements=tuple(p.statements), questions=dict(p.questions),
                            pronoun_rate=params.pronoun_rate)
        u, q = generate(spec, random.Random(f"assomem-{params.seed}-{params.item.replicate}-{name}"))
        offset_u, offset_q = len(utterances), len(questions)
        for r in u:
            r.update(set=name, uid=r["uid"] + offset_u)
        for r in q:
            r.update(set=name, qid=r["qid"] + offset_q, useful=[x + offset_u for x in r["useful"]],
                     split="dev" if r["dialogue"] < p.dev_dialogues else "test")
        utterances += u
        questions += q
    return {"utterances": pl.DataFrame(utterances), "questions": pl.DataFrame(questions)}


@dataclass(frozen=True)
class BuildGraphParams:
    encoder: str  # sentence encoder of every dense method ("packaged:all-MiniLM-L6-v2")
    clue_terms: PositiveInt  # TF-IDF terms in a session's clue
    delta: list[Unit]  # clue-merging thresholds the graphs are built at (tuned in fit_fusion)
    gamma: list[Unit]  # similarity-edge thresholds
    batch_size: PositiveInt
    threads: PositiveInt
    item: Item


def build_graph(params: BuildGraphParams, utterances: pl.DataFrame, questions: pl.DataFrame) -> dict[str, object]:
    """One clue per session (TF-IDF); every utterance, question and clue encoded once (MiniLM); each dialogue's
    graph at every (delta, gamma) of the grid, as edge and clue-group tables."""
    import torch

    from paperdag.methods.assomem.memory import session_clues
    from paperdag.methods.assomem.protocol import dialogues, graph_tables
    from paperdag.retrieval import encode, load_encoder

    torch.set_num_threads(params.threads)
    sessions = (utterances.sort("uid").group_by(["set", "dialogue", "session"], maintain_order=True)
                .agg(pl.col("text").str.join("\n")).sort(["set", "dialogue", "session"]))
    clues = pl.concat([part.with_columns(pl.Series("clue", session_clues(part["text"].to_list(), params.clue_terms)))
                       for _, part in sessions.group_by(["set", "dialogue"], maintain_order=True)]).drop("text")
    texts = {"utterances": utterances["text"].to_list(), "questions": questions["text"].to_list(), "clues": clues["clue"].to_list()}
    unique = list(dict.fromkeys(t for group in texts.values() for t in group))  # chit-chat repeats: each text once
    row = {t: i for i, t in enumerate(unique)}
    print(f"assomem build_graph: encoding {len(unique)} distinct texts of {sum(map(len, texts.values()))}", flush=True)
    vectors = encode(load_encoder(params.encoder), unique, batch_size=params.batch_size)
    emb = {name: vectors[[row[t] for t in group]] for name, group in texts.items()}
    edges, groups = [], []
    for st in ("chat", "meeting"):
        u_rows = (utterances["set"] == st).to_numpy()
        c_rows = (clues["set"] == st).to_numpy()
        dias = dialogues(utterances.filter(u_rows), emb["utterances"][u_rows], clues.filter(c_rows), emb["clues"][c_rows])
        e, g = graph_tables(dias, params.delta, params.gamma)
        edges += [dict(r, set=st) for r in e]
        groups += [dict(r, set=st) for r in g]
        print(f"assomem build_graph: {st}: {len(dias)} dialogues, {len(e)} edges over {len(params.delta) * len(params.gamma)} graph settings", flush=True)
    return {"embeddings": emb, "clues": clues, "graphs": pl.DataFrame(edges), "clue_groups": pl.DataFrame(groups)}


@dataclass(frozen=True)
class FitFusionParams:
    k: list[PositiveInt]  # clues matched per query (K)
    temperature: list[PositiveFloat]  # softmax temperature T of the CMI weights
    damping: Unit  # PageRank damping d of AssoMem's importance
    tau_days: PositiveFloat  # temporal kernel width (days)
    seeds: PositiveInt  # utterances each query teleports to
    pagerank_damping: list[Unit]  # PageRank-only baseline's grid
    bm25_k1: list[PositiveFloat]
    bm25_b: list[Unit]
    two_stage_sessions: list[PositiveInt]
    two_stage_alpha: list[Annotated[float, Field(ge=0)]]
    budget: PositiveInt  # the most settings any method may try on dev (the same for all)
    max_flat_dense_dev_r6: Unit  # the world must be similarity-dense: flat dense dev R@6 above this is an error
    min_candidate_recall: Unit  # AssoMem's clue candidates must hold this share of dev evidence, else an error
    item: Item


def fit_fusion(params: FitFusionParams, utterances: pl.DataFrame, questions: pl.DataFrame, embeddings: dict,
               clues: pl.DataFrame, graphs: pl.DataFrame, clue_groups: pl.DataFrame) -> dict[str, object]:
    """On each set's dev dialogues only: every method's setting chosen by dev R@6 within the shared budget; AssoMem's
    CMI per signal and question type (its fusion weights); the world and the graph checked usable."""
    from paperdag.methods.assomem.protocol import METHODS, candidate_recall, grids_from, split_memories, tune

    grids, out = grids_from(params, graphs), {}
    for st in ("chat", "meeting"):
        dias, qs = split_memories(utterances, questions, embeddings, clues, graphs, clue_groups, st, "dev")
        tuned = {}
        for m in METHODS:
            tuned[m] = tune(m, dias, qs, grids)
            print(f"assomem fit_fusion: {st} {m}: dev R@6 {tuned[m]['dev_r6']:.3f} at {tuned[m]['setting']}", flush=True)
        reach = candidate_recall(dias, qs, tuned["assomem"]["setting"])
        if st == "chat" and tuned["flat_dense"]["dev_r6"] > params.max_flat_dense_dev_r6:
            raise ValueError(f"assomem fit_fusion: flat dense dev R@6 = {tuned['flat_dense']['dev_r6']:.3f} > "
                             f"fit_fusion.max_flat_dense_dev_r6 = {params.max_flat_dense_dev_r6}: the chat set is not "
                             "similarity-dense; raise synthesize.chat.sessions or entities")
        if reach < params.min_candidate_recall:
            raise ValueError(f"assomem fit_fusion: {st} clue candidates hold {reach:.3f} of the dev evidence < "
                             f"fit_fusion.min_candidate_recall = {params.min_candidate_recall}: clue matching cannot reach "
                             "the useful utterances, so the comparison would be meaningless")
        out[st] = {"methods": tuned, "candidate_recall": reach, "dev_questions": sum(len(q.qids) for q in qs.values())}
    return {"fusion": out}


def retrieve(params: FitFusionParams, utterances: pl.DataFrame, questions: pl.DataFrame, embeddings: dict, clues: pl.DataFrame,
             graphs: pl.DataFrame, clue_groups: pl.DataFrame, fusion: dict) -> dict[str, object]:
    """Every method at its dev-chosen setting (AssoMem with its dev CMI) on the test dialogues: top-10 per question;
    AssoMem and flat dense timed one query at a time, in turn, per dialogue."""
    from paperdag.methods.assomem.protocol import METHODS, TOP, grids_from, run_method, split_memories, timed_assomem, timed_flat

    grids, rows, latency = grids_from(params, graphs), [], {"assomem": [], "flat_dense": []}
    for st in ("chat", "meeting"):
        dias, qs = split_memories(utterances, questions, embeddings, clues, graphs, clue_groups, st, "test")
        for m in METHODS:
            tuned = fusion[st]["methods"][m]
            qids, uids, _ = run_method(m, tuned["setting"], dias, qs, grids, tuned["cmi"] or None)
            rows += [{"set": st, "method": m, "qid": int(q), "rank": r + 1, "uid": int(u)}
                     for q, row in zip(qids, uids, strict=True) for r, u in enumerate(row[:TOP])]
        if st == "chat":
            tuned = fusion[st]["methods"]["assomem"]
            for d, dia in dias.items():
                latency["flat_dense"] += timed_flat(dia, qs[d])
                latency["assomem"] += timed_assomem(dia, qs[d], tuned["setting"], tuned["cmi"], grids)
    return {"rankings": pl.DataFrame(rows), "retrieve_stats": {"latency_seconds": latency}}


@dataclass(frozen=True)
class EvaluateParams:
    """None: the thresholds are the tests of pipelines/assomem.yaml's claims."""


def evaluate(params: EvaluateParams, rankings: dict[Item, pl.DataFrame], questions: dict[Item, pl.DataFrame],
             retrieve_stats: dict[Item, dict], fusion: dict[Item, dict], utterances: dict[Item, pl.DataFrame],
             graphs: dict[Item, pl.DataFrame], clue_groups: dict[Item, pl.DataFrame], clues: dict[Item, pl.DataFrame]) -> dict[str, object]:
    """Per replicate R@k / nDCG@10 per set, method and type; the headline over replicates; the three plots."""
    from paperdag.methods.assomem.evaluation import check_rankings, headline, replicated, score, weights_per_type
    from paperdag.methods.assomem.figures import example_subgraph, recall_curves, weight_bars
    from paperdag.methods.assomem.protocol import subgraph_example

    tables, heads = {}, []
    for item, ranking in rankings.items():
        check_rankings(ranking, questions[item], f"assomem evaluate ({item})")
        tables[str(item)] = score(ranking, questions[item])
        heads.append(headline(tables[str(item)], retrieve_stats[item]))
    first = next(iter(rankings))
    weights = [weights_per_type(f, "chat") for f in fusion.values()]
    example = subgraph_example(utterances[first], questions[first], rankings[first], graphs[first], clue_groups[first],
                               clues[first], fusion[first]["chat"]["methods"]["assomem"]["setting"])
    metrics = {"headline": replicated(heads), "per_replicate": dict(zip(tables, heads, strict=True)), "table": tables,
               "fusion_weights_chat": dict(zip(map(str, fusion), weights, strict=True)),
               "tuned": {str(i): {st: {m: t["setting"] for m, t in f[st]["methods"].items()} for st in f}
                         for i, f in fusion.items()}}
    return {"metrics": metrics, "recall_at_k": recall_curves(list(tables.values()), ["chat", "meeting"]),
            "fusion_weights": weight_bars(weights), "subgraph": example_subgraph(**example)}

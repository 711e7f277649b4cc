"""SynthKG's graph retrieval for multi-hop RAG and the HippoRAG-like baseline, on a KG's propositions.

SynthKG: the top-M propositions by embedding similarity to the question -> the proposition-entity bipartite
subgraph of those M -> keep the propositions within N hops of the question's entities -> rerank them by the chain
that reaches them -> the top-K chunks, in the order of their best kept proposition. HippoRAG-like: personalised PageRank on the entity graph from the question's
entities, chunks scored by the PPR mass of the entities they mention, weighted by node specificity 1 / |chunks of
the entity|. numpy and networkx only."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class PropositionGraph:
    """The proposition-entity bipartite graph of one corpus: proposition p is linked to the entities it mentions."""

    chunk: np.ndarray  # (P,) chunk id of each proposition
    entities: tuple[frozenset[str], ...]  # (P,) the entities each proposition mentions
    names: tuple[str, ...]  # every entity node, longest first (question entity matching)

    @classmethod
    def build(cls, chunk: Sequence[int], entities: Sequence[Sequence[str]]) -> PropositionGraph:
        names = sorted({e for es in entities for e in es}, key=lambda n: (-len(n), n))
        return cls(np.asarray(chunk, dtype=np.int64), tuple(frozenset(es) for es in entities), tuple(names))


def question_entities(question: str, names: Sequence[str]) -> set[str]:
    """Entity nodes named in the question (exact string match, longest first, a matched span not matched again)."""
    found, rest = set(), question
    for n in names:
        if n in rest:
            found.add(n)
            rest = rest.replace(n, " ")
    return found


def n_hop_filter(candidates: Sequence[int], entities: Sequence[frozenset[str]], seeds: set[str], n_hops: int) -> dict[int, int]:
    """{proposition: hop} for the candidates within `n_hops` of the seed entities in the bipartite subgraph the
    candidates span: hop 1 mentions a seed; hop h + 1 shares an entity with a hop-h proposition. Walks the
    subgraph only (a proposition outside `candidates` never links two of them)."""
    hop: dict[int, int] = {}
    reached = set(seeds)
    for h in range(1, n_hops + 1):
        new = [p for p in candidates if p not in hop and entities[p] & reached]
        if not new:
            break
        for p in new:
            hop[p] = h
        reached = set().union(*(entities[p] for p in new)) - reached
    return hop


def path_scores(hop: Mapping[int, int], entities: Sequence[frozenset[str]], seeds: set[str], vectors: np.ndarray,
                query: np.ndarray) -> dict[int, float]:
    """The rerank of the kept propositions (the paper's optional rerank step, here deterministic, on the same
    embeddings): a proposition's score is the best, over the chains of kept propositions that reach it from a seed
    (one per hop, each sharing an entity with the one before), of cos(q, sum of the chain's vectors / its norm).
    vectors: (P, d) unit proposition embeddings; query: (d,) unit question embedding."""
    best: dict[int, tuple[float, np.ndarray]] = {}
    for h in range(1, max(hop.values(), default=0) + 1):
        layer = [p for p, k in hop.items() if k == h]
        for p in layer:
            if h == 1:
                chains = [vectors[p]] if entities[p] & seeds else []
            else:
                chains = [best[q][1] + vectors[p] for q, k in hop.items() if k == h - 1 and q in best and entities[q] & entities[p]]
            for v in chains:
                score = float(v @ query) / max(float(np.linalg.norm(v)), 1e-12)
                if p not in best or score > best[p][0]:
                    best[p] = (score, v)
    return {p: s for p, (s, _) in best.items()}


def _chunks_in_order(props: Sequence[int], chunk: np.ndarray, out: list[int], k: int) -> None:
    for p in props:
        c = int(chunk[p])
        if c not in out:
            out.append(c)
            if len(out) == k:
                return


def graph_retrieve(query: np.ndarray, vectors: np.ndarray, graph: PropositionGraph, seeds: set[str], m: int, n_hops: int,
                   k: int) -> list[int]:
    """SynthKG retrieval for one question. query: (d,) unit question embedding; vectors: (P, d) unit propositions.

    The top-M propositions by cosine (ties by index); those within N hops of the seeds, by their chain score
    (path_scores); then the other top-M ones by cosine; then every other proposition by cosine: the first K
    distinct chunks."""
    scores = vectors @ query  # (P,)
    order = np.lexsort((np.arange(scores.size), -scores))  # best first
    top = [int(p) for p in order[:m]]
    kept = path_scores(n_hop_filter(top, graph.entities, seeds, n_hops), graph.entities, seeds, vectors, query)
    out: list[int] = []
    _chunks_in_order(sorted(kept, key=lambda p: (-kept[p], p)), graph.chunk, out, k)
    if len(out) < k:
        _chunks_in_order([int(p) for p in order if int(p) not in kept], graph.chunk, out, k)
    return out


def rank_by(scores: np.ndarray, k: int, tie: np.ndarray | None = None) -> list[int]:
    """The k best ids by score (ties by `tie` descending, then by id)."""
    ids = np.arange(scores.size)
    keys = (ids,) if tie is None else (ids, -tie)
    return [int(i) for i in np.lexsort((*keys, -scores))[:k]]


@dataclass(frozen=True)
class EntityGraph:
    """HippoRAG's index: an undirected entity graph (an edge per extracted triple between its two entities, weighted
    by count) and the entity-chunk incidence."""

    graph: object  # networkx.Graph
    chunk_entities: tuple[frozenset[str], ...]  # (C,) entities each chunk mentions
    specificity: Mapping[str, float]  # 1 / |chunks mentioning the entity|

    @classmethod
    def build(cls, triples: Sequence[tuple[str, str]], chunk_entities: Sequence[Sequence[str]]) -> EntityGraph:
        import networkx as nx

        g = nx.Graph()
        for es in chunk_entities:
            g.add_nodes_from(es)
        for s, t in triples:
            w = g.get_edge_data(s, t, {"weight": 0.0})["weight"]
            g.add_edge(s, t, weight=w + 1.0)
        counts: dict[str, int] = {}
        for es in chunk_entities:
            for e in set(es):
                counts[e] = counts.get(e, 0) + 1
        return cls(g, tuple(frozenset(es) for es in chunk_entities), {e: 1.0 / c for e, c in counts.items()})


def ppr_retrieve(index: EntityGraph, seeds: set[str], damping: float, k: int, tie: np.ndarray) -> list[int]:
    """HippoRAG-like retrieval for one question: PPR (networkx, `damping` = probability of following an edge) with
    the reset mass spread evenly on the question's entities; chunk score = sum over its entities of PPR x
    specificity; ties (no seed found, say) by `tie`, the dense chunk score."""
    import networkx as nx

    seeds = {s for s in seeds if s in index.graph}
    chunk_score = np.zeros(len(index.chunk_entities))
    if seeds:
        ppr = nx.pagerank(index.graph, alpha=damping, personalization={s: 1.0 for s in seeds}, weight="weight", tol=1e-10, max_iter=500)
        chunk_score = np.array([sum(ppr.get(e, 0.0) * index.specificity[e] for e in es) for es in index.chunk_entities])
    return rank_by(np.round(chunk_score, 12), k, tie)

"""The N-hop filter, the chain rerank and graph retrieval on a hand-made proposition-entity graph; the HippoRAG-like
PPR baseline on a hand-made entity graph."""

from __future__ import annotations

import numpy as np

from paperdag.methods.synthkg import EntityGraph, PropositionGraph, graph_retrieve, n_hop_filter, ppr_retrieve, question_entities
from paperdag.methods.synthkg.graph import path_scores

# p0: D founded by A; p1: A born in Q; p2: Q lies in V; p3: B born in O (unconnected to D); p4: E works for D
ENTITIES = [["D", "A"], ["A", "Q"], ["Q", "V"], ["B", "O"], ["E", "D"]]
GRAPH = PropositionGraph.build([0, 1, 2, 3, 4], ENTITIES)


def test_n_hop_filter_counts_proposition_hops_from_the_seeds() -> None:
    """From D: p0 and p4 at hop 1, p1 at hop 2 (via A), p2 at hop 3 (via Q); p3 is never reached."""
    es = GRAPH.entities
    assert n_hop_filter(range(5), es, {"D"}, 1) == {0: 1, 4: 1}
    assert n_hop_filter(range(5), es, {"D"}, 2) == {0: 1, 4: 1, 1: 2}
    assert n_hop_filter(range(5), es, {"D"}, 3) == {0: 1, 4: 1, 1: 2, 2: 3}


def test_n_hop_filter_walks_only_the_candidate_subgraph() -> None:
    """Without p1 among the candidates, p2 is not reachable from D (p1 was the only link)."""
    assert n_hop_filter([0, 2, 3, 4], GRAPH.entities, {"D"}, 3) == {0: 1, 4: 1}
    assert n_hop_filter(range(5), GRAPH.entities, {"Z"}, 3) == {}


def test_chain_rerank_prefers_the_chain_through_the_best_first_hop() -> None:
    """Two hop-2 propositions equally close to the question; the one reached through the closer hop-1 wins."""
    es = [frozenset(x) for x in (["D", "A"], ["D", "E"], ["A", "Q"], ["E", "O"])]
    v = np.array([[1.0, 0, 0], [0.6, 0.8, 0], [0, 0, 1.0], [0, 0, 1.0]])
    q = np.array([0.8, 0, 0.6])
    hop = n_hop_filter(range(4), es, {"D"}, 2)
    s = path_scores(hop, es, {"D"}, v, q)
    assert s[2] > s[3] and s[0] > s[1]


def test_graph_retrieval_returns_kept_chunks_first_then_fills() -> None:
    """The question names D; p3 is the closest proposition but unconnected: the kept chain's chunks come first."""
    v = np.eye(5)
    q = np.array([0.5, 0.4, 0.0, 0.7, 0.3])
    q = q / np.linalg.norm(q)
    seeds = question_entities("Where was the founder of D born?", GRAPH.names)
    assert seeds == {"D"}
    out = graph_retrieve(q, v, GRAPH, seeds, m=5, n_hops=2, k=4)
    assert out[:3] == [0, 4, 1] or set(out[:3]) == {0, 1, 4}
    assert out[3] == 3


def test_question_entities_match_longest_names_first() -> None:
    names = PropositionGraph.build([0], [["Drennic Holdings", "Drennic"]]).names
    assert question_entities("Who founded Drennic Holdings?", names) == {"Drennic Holdings"}


def test_ppr_ranks_the_seeds_neighbourhood_first() -> None:
    """PPR from D: chunks mentioning D or its neighbour A before the unconnected chunk about B."""
    index = EntityGraph.build([("D", "A"), ("A", "Q"), ("B", "O")], [["D", "A"], ["A", "Q"], ["B", "O"]])
    out = ppr_retrieve(index, {"D"}, 0.5, 3, tie=np.zeros(3))
    assert out[0] == 0 and out[-1] == 2

"""RoT's thought graph, start node and traversal on hand-made traces and similarities (values computed by hand)."""

from __future__ import annotations

import numpy as np
import pytest

from paperdag.methods.rot.graph import SEMANTIC, SEQUENTIAL, RoTConfig, build_graph, start_node, traverse


def unit(*rows: list[float]) -> np.ndarray:
    a = np.asarray(rows, dtype=np.float64)
    return a / np.linalg.norm(a, axis=1, keepdims=True)


def hand_graph():
    """Templates [a, b] and [c, d, e]: cos(a, c) = 1 (g = 1), cos(b, d) = 0.8 (g = 0.9), cos(a, e) = 0.6 (g = 0.8:
    under tau), every other pair orthogonal or below."""
    emb = np.array([[1, 0, 0, 0], [0, 1, 0, 0], [1, 0, 0, 0], [0, 0.8, 0.6, 0], [0.6, 0, 0, 0.8]], dtype=np.float64)
    return build_graph([["a", "b"], ["c", "d", "e"]], emb), emb


def test_graph_has_sequential_edges_weight_one_and_bidirectional_semantic_edges_weight_g() -> None:
    """Sequential a->b, c->d, d->e (weight 1); semantic a<->c (g = 1), b<->d (g = (0.8 + 1) / 2 = 0.9); no a-e edge
    (g = 0.8 < 0.85); nothing else."""
    g, _ = hand_graph()
    edges = {(r["source"], r["target"]): (r["kind"], r["weight"]) for r in g.edge_rows()}
    assert set(edges) == {(0, 1), (2, 3), (3, 4), (0, 2), (2, 0), (1, 3), (3, 1)}
    assert all(edges[e] == (SEQUENTIAL, 1.0) for e in [(0, 1), (2, 3), (3, 4)])
    assert edges[(0, 2)] == edges[(2, 0)] == (SEMANTIC, pytest.approx(1.0))
    assert edges[(1, 3)][0] == SEMANTIC and edges[(1, 3)][1] == pytest.approx(0.9)
    assert list(g.template) == [0, 0, 1, 1, 1] and list(g.position) == [0, 1, 0, 1, 2]


def test_a_pair_both_sequential_and_similar_keeps_its_sequential_edge() -> None:
    """Two identical consecutive steps: u -> v stays sequential (weight 1), v -> u is semantic (g = 1)."""
    g = build_graph([["x", "x"]], unit([1, 0], [1, 0]))
    assert g.edges[0] == {1: (SEQUENTIAL, 1.0)} and g.edges[1][0] == (SEMANTIC, pytest.approx(1.0))


def test_build_graph_needs_one_embedding_per_step() -> None:
    with pytest.raises(ValueError, match="2 embeddings for 3 steps"):
        build_graph([["a"], ["b", "c"]], unit([1, 0], [0, 1]))


def test_start_node_trades_similarity_against_the_first_step_bonus() -> None:
    """alpha = 0.8: a later step at sim 0.9 (0.72) loses to a first step at 0.7 (0.56 + 0.2 = 0.76); at 0.95 (0.76)
    against 0.65 (0.72) it wins; on a tie the lowest index."""
    g, _ = hand_graph()  # first steps: nodes 0 and 2
    assert start_node(np.array([0.7, 0.9, 0.0, 0.0, 0.0]), g) == 0
    assert start_node(np.array([0.65, 0.95, 0.0, 0.0, 0.0]), g) == 1
    assert start_node(np.array([0.5, 0.0, 0.5, 0.0, 0.0]), g) == 0
    assert start_node(np.array([0.0, 0.9, 0.0, 0.0, 0.0]), g, RoTConfig(alpha=1.0)) == 1


def test_traversal_follows_the_sequential_child_while_its_reward_reaches_theta() -> None:
    """r = 0.3 sim + 0.7 for the sequential child: sim 0.34 gives 0.802 >= 0.8 (go on), sim 0.3 gives 0.79 with sim
    < 0.8 (stop: threshold)."""
    g = build_graph([["a", "b", "c"]], unit([1, 0, 0], [0, 1, 0], [0, 0, 1]))
    assert traverse(np.array([0.9, 0.34, 0.34]), g).nodes == [0, 1, 2]
    stopped = traverse(np.array([0.9, 0.34, 0.3]), g)
    assert stopped.nodes == [0, 1] and stopped.stop == "threshold"


def test_traversal_stops_with_no_unvisited_successor() -> None:
    """At a chain's end with no semantic edge the path ends there: no_successor."""
    g = build_graph([["a", "b"]], unit([1, 0], [0, 1]))
    path = traverse(np.array([0.9, 0.9]), g)
    assert path.nodes == [0, 1] and path.stop == "no_successor"


def test_traversal_stops_at_max_steps() -> None:
    """A chain of 10 relevant steps gives an 8-step template (L_max), stop max_steps."""
    g = build_graph([[f"s{i}" for i in range(10)]], np.eye(10))
    path = traverse(np.full(10, 0.9), g)
    assert path.nodes == list(range(8)) and path.stop == "max_steps"
    assert len(traverse(np.full(10, 0.9), g, RoTConfig(max_steps=3)).nodes) == 3


def test_semantic_jump_only_when_the_candidate_similarity_reaches_theta() -> None:
    """From b (end of [a, b]) the only successors are semantic: d (g = 0.9) and a visited a; reward 0.3 sim < 0.8,
    so the jump happens when sim(d) >= 0.8 and not when it is 0.79."""
    g, _ = hand_graph()
    sim = np.array([0.9, 0.9, 0.0, 0.8, 0.0])
    assert traverse(sim, g).nodes[:3] == [0, 1, 3]
    sim[3] = 0.79
    path = traverse(sim, g)
    assert path.nodes == [0, 1] and path.stop == "threshold"


def test_traversal_never_revisits_a_node() -> None:
    """a <-> c semantic, c -> d sequential: from a (start, sim a = c = 1) the path goes a -> b ... never back to a."""
    g, _ = hand_graph()
    path = traverse(np.array([1.0, 0.9, 1.0, 0.9, 0.9]), g)
    assert len(path.nodes) == len(set(path.nodes))

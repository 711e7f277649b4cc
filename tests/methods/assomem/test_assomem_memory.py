"""AssoMem's pieces on hand-made inputs: personalised PageRank against networkx, conditional mutual information on
joint distributions with known values, fusion collapsing to the one informative signal, time parsing, clue merging
and TF-IDF clues."""

from __future__ import annotations

import math
from datetime import date

import networkx as nx
import numpy as np
import pytest

from paperdag.methods.assomem.memory import (
    build_graph,
    conditional_mi,
    fuse,
    fusion_weights,
    merge_clues,
    mutual_information,
    parse_time,
    personalised_pagerank,
    session_clues,
    teleport_vector,
    temporal_alignment,
    transition,
)


def test_personalised_pagerank_matches_networkx_on_a_hand_made_graph() -> None:
    """A weighted 6-node graph with a dangling node and a clue-like hub: r <- d M r + (1 - d) t equals
    networkx.pagerank(alpha=d, personalization=t) for two teleport vectors at once."""
    g = nx.Graph()
    g.add_nodes_from(range(6))
    g.add_weighted_edges_from([(0, 1, 0.9), (1, 2, 0.5), (0, 4, 1.0), (1, 4, 1.0), (2, 4, 1.0), (3, 4, 2.0)])  # 5 dangling
    t = np.array([[0.5, 0.0], [0.3, 0.0], [0.2, 0.0], [0.0, 1.0], [0.0, 0.0], [0.0, 0.0]])
    m, dangling = transition(g)
    assert dangling.tolist() == [False] * 5 + [True]
    ours = personalised_pagerank(m, dangling, t, d=0.85, iterations=500, tol=1e-14)
    for j in range(2):
        ref = nx.pagerank(g, alpha=0.85, personalization={i: t[i, j] for i in range(6)}, weight="weight", tol=1e-14, max_iter=500)
        assert ours[:, j] == pytest.approx([ref[i] for i in range(6)], abs=1e-9)
        assert ours[:, j].sum() == pytest.approx(1.0)


def test_teleport_goes_to_the_most_similar_utterances_only() -> None:
    """t: proportional to max(cos, 0) on the `seeds` most similar utterances, 0 on clue nodes and elsewhere."""
    t = teleport_vector(np.array([[0.6], [-0.2], [0.3], [0.1]]), n_nodes=6, seeds=2)
    assert t[:, 0] == pytest.approx([2 / 3, 0, 1 / 3, 0, 0, 0])
    assert teleport_vector(np.array([[0.6], [-0.2], [0.2]]), 4)[:, 0] == pytest.approx([0.75, 0, 0.25, 0])


def test_mutual_information_on_known_joints() -> None:
    """I(X; Y) = H(Y) when Y is a function of X (Y = [X == high], X uniform on 3 bins: H(1/3) nats), 0 when they are
    independent (X uniform, Y uniform, every pair equally often), and ln 2 for X = Y uniform binary."""
    x = np.array([0, 1, 2] * 30)
    h = -(1 / 3 * math.log(1 / 3) + 2 / 3 * math.log(2 / 3))
    assert mutual_information(x, x == 2) == pytest.approx(h)
    assert mutual_information(np.repeat([0, 1, 2], 20), np.tile([0, 1], 30)) == pytest.approx(0.0, abs=1e-12)
    assert mutual_information(np.array([0, 1] * 5), np.array([0, 1] * 5)) == pytest.approx(math.log(2))


def test_conditional_mi_is_per_question_type() -> None:
    """CMI conditioned on the type: informative under 'temporal' (Y = [X == 2]), nothing under 'fact' (independent)."""
    x = np.concatenate([np.array([0, 1, 2] * 30), np.repeat([0, 1, 2], 20)])
    y = np.concatenate([np.array([0, 1, 2] * 30) == 2, np.tile([0, 1], 30).astype(bool)])
    z = np.array(["temporal"] * 90 + ["fact"] * 60)
    cmi = conditional_mi(x, y, z)
    assert cmi["fact"] == pytest.approx(0.0, abs=1e-12)
    assert cmi["temporal"] == pytest.approx(-(1 / 3 * math.log(1 / 3) + 2 / 3 * math.log(2 / 3)))


def test_fusion_reduces_to_the_one_informative_signal() -> None:
    """With CMI 0 for importance and time, softmax(CMI / T) at a small T puts ~all weight on relevance, and the
    fused ranking is relevance's ranking whatever the other signals say."""
    w = fusion_weights({"relevance": 0.05, "importance": 0.0, "time": 0.0}, temperature=0.002)
    assert w["relevance"] > 0.9999 and sum(w.values()) == pytest.approx(1.0)
    rel = np.array([0.2, 0.9, 0.5, 0.7])
    score = fuse({"relevance": rel, "importance": np.array([9.0, 0.0, 4.0, 1.0]), "time": np.array([1.0, 0.0, 0.5, 0.2])}, w)
    assert np.argsort(-score).tolist() == np.argsort(-rel).tolist()
    assert fusion_weights({"a": 0.01, "b": 0.01}, 0.05) == {"a": 0.5, "b": 0.5}


def test_time_expressions_and_the_temporal_kernel() -> None:
    """A day, a month and "now" are parsed; no expression gives None and a zero signal; the kernel is 1 inside the
    interval and exp(-gap / tau) outside."""
    last = date(2023, 6, 30)
    assert parse_time("What was X when we spoke on 3 May 2023?", last) == (date(2023, 5, 3), date(2023, 5, 3))
    assert parse_time("What happened in December 2022?", last) == (date(2022, 12, 1), date(2022, 12, 31))
    assert parse_time("Where does Anna live now?", last) == (last, last)
    assert parse_time("What food does Ben enjoy?", last) is None
    days = np.array([date(2023, 5, 3).toordinal(), date(2023, 5, 6).toordinal(), date(2023, 4, 30).toordinal()])
    s = temporal_alignment((date(2023, 5, 3), date(2023, 5, 3)), days, tau_days=3.0)
    assert s == pytest.approx([1.0, math.exp(-1.0), math.exp(-1.0)])
    assert temporal_alignment(None, days, 3.0).tolist() == [0.0, 0.0, 0.0]


def test_clues_merge_above_delta_and_the_graph_has_both_edge_kinds() -> None:
    """Clues 0 and 1 (cos 0.96) merge at delta 0.9, clue 2 stays; the graph links each utterance to its session's
    merged clue and utterances with cos > gamma to each other."""
    clue = np.array([[1.0, 0.0], [0.96, 0.28], [0.0, 1.0]])
    groups = merge_clues(clue, 0.9)
    assert groups.tolist() == [0, 0, 1]
    assert merge_clues(clue, 0.99).tolist() == [0, 1, 2]
    utt = np.array([[1.0, 0.0], [0.99, 0.141], [0.0, 1.0]])
    g = build_graph(utt, np.array([0, 0, 1]), np.array([[1.0, 0.0], [0.0, 1.0]]), gamma=0.9)
    kinds = {(u, v): e["kind"] for u, v, e in g.edges(data=True)}
    assert kinds == {(0, 1): "similarity", (0, 3): "belonging", (1, 3): "belonging", (2, 4): "belonging"}
    assert build_graph(utt, None, None, gamma=0.9).number_of_nodes() == 3


def test_a_session_clue_is_its_distinctive_phrase() -> None:
    """TF-IDF picks the session's own topic (the entity named in it) over words every session shares."""
    sessions = ["A: Any news about the trip to Matera?\nB: The trip to Matera is booked.",
                "A: Any news about my dog Rex?\nB: My dog Rex eats biscuits.",
                "A: Any news about the pottery course?\nB: The pottery course moved."]
    clues = session_clues(sessions, terms=2)
    assert "matera" in clues[0] and "rex" in clues[1] and "pottery" in clues[2]
    assert all("news" not in c for c in clues)

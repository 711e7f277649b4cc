"""RoT's retrieval on hand-made embeddings: the query views (whole problem, opening clause, best clause), the start
and stop settings tuned on validation queries, the static baseline's keys, and the retrieval scores (values by hand)."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from paperdag.methods.rot.graph import RoTConfig, build_graph, traverse
from paperdag.methods.rot.metrics import retrieval_scores
from paperdag.methods.rot.protocol import StaticIndex, rot_path, tune_rot, tune_static
from paperdag.methods.rot.query import Query, clauses, encode_queries, encode_query, query_texts, similarity

E = np.eye(4)  # e1..e4: orthonormal, so a clause row's coordinates are its cosines with nodes a, b, c (e4: elsewhere)


def row(*cos: float) -> np.ndarray:
    """A unit vector whose cosines with e1, e2, e3 are `cos` (the rest on e4)."""
    v = np.zeros(4)
    v[: len(cos)] = cos
    v[3] = np.sqrt(1.0 - np.sum(np.square(cos)))
    return v


def fake_embed(texts: list[str]) -> np.ndarray:
    """Deterministic unit rows per text (a stand-in encoder)."""
    rows = np.array([np.random.default_rng(zlib.crc32(t.encode())).normal(size=8) for t in texts])
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_a_problem_splits_into_clauses_at_sentence_ends_and_semicolons() -> None:
    """'.', '?', '!' and ';' end a clause; a text without them is one clause."""
    text = "First comes the fox; a farmer has 6 apples. The fox steals 3. The gift doubles them. How many now?"
    assert clauses(text) == ["First comes the fox;", "a farmer has 6 apples.", "The fox steals 3.", "The gift doubles them.",
                             "How many now?"]
    assert clauses("no punctuation here") == ["no punctuation here"]


def test_each_view_encodes_only_what_it_needs_and_scores_nodes_by_hand() -> None:
    """problem: the whole text only; opening / clauses: the clauses only. Clause rows (0.9, 0.2, 0), (0.1, 0.6, 0.5):
    opening = the first row's cosines; clauses = the max per node (0.9, 0.6, 0.5)."""
    assert query_texts("A b. C d.", {"problem"}) == ["A b. C d."]
    assert query_texts("A b. C d.", {"opening", "clauses"}) == ["A b.", "C d."]
    assert query_texts("A b. C d.", {"problem", "clauses"}) == ["A b. C d.", "A b.", "C d."]
    with pytest.raises(ValueError, match="unknown"):
        query_texts("A b.", {"sentence"})
    q = Query(whole=row(0.3, 0.3, 0.3), parts=np.array([row(0.9, 0.2, 0.0), row(0.1, 0.6, 0.5)]))
    nodes = E[:3]
    assert similarity(q, nodes, "problem") == pytest.approx([0.3, 0.3, 0.3])
    assert similarity(q, nodes, "opening") == pytest.approx([0.9, 0.2, 0.0])
    assert similarity(q, nodes, "clauses") == pytest.approx([0.9, 0.6, 0.5])


def test_encode_queries_in_one_call_equals_one_call_per_query() -> None:
    """The batched validation encoding gives each query the rows encode_query gives it alone."""
    texts = ["First comes the fox; it has 3. The fox steals 2. How many now?", "Result?", "The bonus is 2: add it. Result?"]
    calls: list[int] = []

    def counted(t: list[str]) -> np.ndarray:
        calls.append(len(t))
        return fake_embed(t)

    batched = encode_queries(counted, texts, ("problem", "opening", "clauses"))
    assert len(calls) == 1
    for q, text in zip(batched, texts, strict=True):
        alone = encode_query(fake_embed, text, ("problem", "clauses"))
        np.testing.assert_array_equal(q.whole, alone.whole)
        np.testing.assert_array_equal(q.parts, alone.parts)
    assert encode_query(fake_embed, texts[0], {"clauses"}).whole is None and encode_query(fake_embed, texts[0], {"problem"}).parts is None


def test_the_start_rule_and_the_traversal_can_read_different_views() -> None:
    """[a, b, c]: start_sim favours b (0.9), the traversal's sim follows b -> c (0.3 * 0.5 + 0.7 = 0.85 >= 0.8)."""
    g = build_graph([["a", "b", "c"]], E[:3])
    path = traverse(np.array([0.9, 0.1, 0.5]), g, start_sim=np.array([0.1, 0.9, 0.0]))
    assert path.nodes == [1, 2] and path.stop == "no_successor"
    assert traverse(np.array([0.9, 0.1, 0.5]), g).nodes == [0]  # one sim for both: start a, then b's reward 0.73 < 0.8


def test_theta_is_tuned_to_the_middle_of_the_plateau_of_exact_templates() -> None:
    """[a, b, c], a query needing [a, b], clause cosines a 0.9, b 0.62, c 0.45: from a, b's reward 0.886 (taken while
    theta <= 0.886); from b, c's 0.835 (taken while theta <= 0.835): exact for theta in (0.835, 0.886]; grid 0.8 ..
    0.9 step 0.02 -> exact at 0.84, 0.86, 0.88 -> 0.86. The code's theta 0.8 runs past: [a, b, c]."""
    g = build_graph([["a", "b", "c"]], E[:3])
    q = Query(whole=None, parts=np.array([row(0.9, 0.0, 0.0), row(0.0, 0.62, 0.0), row(0.0, 0.0, 0.45)]))
    config = RoTConfig(start_query="opening", step_query="clauses")
    grid = [0.8, 0.82, 0.84, 0.86, 0.88, 0.9]
    tuned, report = tune_rot([q], [["a", "b"]], g, E[:3], config, [], grid)
    assert tuned.theta == 0.86 and tuned.alpha == config.alpha
    assert report["theta_template_exact"] == {"0.8": 0.0, "0.82": 0.0, "0.84": 100.0, "0.86": 100.0, "0.88": 100.0, "0.9": 0.0}
    assert rot_path(q, g, E[:3], config).nodes == [0, 1, 2]
    assert report["val_given"]["stopped_late"] == 100.0 and report["val_tuned"]["template_exact"] == 100.0


def test_alpha_is_tuned_on_start_accuracy() -> None:
    """The needed window [b, c] is stored only inside [a, b, c] (b not a first step); the opening clause has cos 0.9
    with b and 0.6 with a: b wins when 0.9 alpha > 0.6 alpha + (1 - alpha), alpha > 1 / 1.3 = 0.769. Grid 0.5, 0.7,
    0.8, 0.9, 1.0 -> right at 0.8, 0.9, 1.0 -> 0.9; the theta grid [] keeps theta."""
    g = build_graph([["a", "b", "c"]], E[:3])
    q = Query(whole=None, parts=np.array([row(0.5, 0.8, 0.0), row(0.0, 0.0, 0.95)]))
    tuned, report = tune_rot([q], [["b", "c"]], g, E[:3], RoTConfig(alpha=0.5, start_query="opening", step_query="clauses"),
                             [0.5, 0.7, 0.8, 0.9, 1.0], [])
    assert report["alpha_start_accuracy"] == {"0.5": 0.0, "0.7": 0.0, "0.8": 100.0, "0.9": 100.0, "1.0": 100.0}
    assert tuned.alpha == 0.9 and tuned.theta == 0.8
    assert report["val_given"]["start_accuracy"] == 0.0 and report["val_tuned"]["start_accuracy"] == 100.0


def test_static_keys_score_stored_solutions_by_hand() -> None:
    """Templates [a, b] and [a, b, c]; query clauses exactly a and b. clauses (Chamfer): [a, b] 0.5 (1 + 1) = 1,
    [a, b, c] 0.5 (2/3 + 1) = 5/6 -> [a, b]; problem / template keys: cos of the whole query with each key."""
    index = StaticIndex([["a", "b"], ["a", "b", "c"]], {"problem": np.array([E[3], E[0]]), "template": np.array([E[0], E[3]])},
                        np.array([E[0], E[1], E[0], E[1], E[2]]), np.array([0, 0, 1, 1, 1]))
    q = Query(whole=E[0], parts=np.array([E[0], E[1]]))
    assert index.scores(q, "clauses") == pytest.approx([1.0, 5.0 / 6.0])
    assert index.top1(q, "clauses") == 0 and index.top1(q, "problem") == 1 and index.top1(q, "template") == 0
    key, rates = tune_static([q], [["a", "b"]], index)
    assert rates == {"problem": 0.0, "template": 1.0, "clauses": 1.0} and key == "template"  # tie: the first listed


def test_retrieval_scores_by_hand() -> None:
    """Needed [a, b] four times; assembled [a, b] (exact), [a] (short), [a, b, c] (late), [b] (wrong start)."""
    stops = ["threshold", "threshold", "max_steps", "no_successor"]
    s = retrieval_scores([["a", "b"], ["a"], ["a", "b", "c"], ["b"]], stops, [["a", "b"]] * 4)
    assert s == {"template_exact": 25.0, "start_accuracy": 75.0, "stopped_short": 25.0, "stopped_late": 25.0,
                 "stops": {"max_steps": 1, "no_successor": 1, "threshold": 2}, "problems": 4}

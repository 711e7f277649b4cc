"""Coverage on hand-made gold and extracted triples (hand-made unit vectors), Hits@k and the deterministic reader."""

from __future__ import annotations

import numpy as np
import pytest

from paperdag.methods.synthkg import coverage, hits_at_k, parse_question, read_answer, semantic_scores


def _unit(*rows: list[float]) -> np.ndarray:
    a = np.asarray(rows, dtype=float)
    return a / np.linalg.norm(a, axis=1, keepdims=True)


def test_semantic_score_is_the_max_cosine_over_the_page_and_coverage_counts_theta() -> None:
    """Gold 1 has an exact match (1.0); gold 2's best extracted triple is at cosine 0.8; gold 3's page gave none (0):
    coverage 100/3 at theta 0.9, 200/3 at 0.8, and all three count at theta 0."""
    gold = _unit([1, 0, 0], [0, 1, 0], [0, 0, 1])
    extracted = [_unit([0, 1, 0], [1, 0, 0]), _unit([0.6, 0.8, 0]), np.zeros((0, 3))]
    scores = semantic_scores(gold, extracted)
    assert scores == pytest.approx([1.0, 0.8, 0.0])
    assert coverage(scores, 0.9) == pytest.approx(100 / 3)
    assert coverage(scores, 0.8) == pytest.approx(200 / 3)
    assert coverage(scores, 0.0) == 100.0


def test_hits_at_k_counts_distinct_supports_in_the_first_k() -> None:
    assert hits_at_k([4, 2, 9], [2, 7], 2) == 0.5
    assert hits_at_k([4, 2, 9], [2, 7], 1) == 0.0
    assert hits_at_k([7, 2], [2, 7, 7], 2) == 1.0


def test_reader_follows_the_chain_and_abstains_on_a_missing_link() -> None:
    """'In which city was the founder of X born?': founder then born; without the second link there is no answer."""
    q = "In which city was the founder of Drennic Holdings born?"
    assert parse_question(q) == ("founder_born", "Drennic Holdings")
    triples = [("Drennic Holdings", "founder", "Alaric Venmoor"), ("Alaric Venmoor", "born", "Quell Haven"),
               ("Brenna Tolvast", "born", "Ostrel")]
    assert read_answer(q, triples) == "Quell Haven"
    assert read_answer(q, triples[:1]) is None
    assert read_answer("What is the answer?", triples) is None

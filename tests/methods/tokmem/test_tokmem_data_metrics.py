"""The procedure world and the scores on hand-computed cases."""

from __future__ import annotations

import random

import pytest

from paperdag.methods.tokmem import (
    Procedure,
    atomic_examples,
    call_examples,
    exact_match,
    forgetting,
    lcs_length,
    make_procedures,
    multiset_f1,
    rouge_l,
)


def test_procedures_apply_their_rule() -> None:
    """Each family on a hand case."""
    x = list("abca")
    assert Procedure(0, "N", "replace", "a", "z", "memory", 1)(x) == list("zbcz")
    assert Procedure(0, "N", "remove", "a", "", "memory", 1)(x) == list("bc")
    assert Procedure(0, "N", "double", "a", "", "memory", 1)(x) == list("aabcaa")
    assert Procedure(0, "N", "prefix", "q", "r", "memory", 1)(x) == list("qrabca")
    assert Procedure(0, "N", "suffix", "q", "r", "memory", 1)(x) == list("abcaqr")
    assert Procedure(0, "Zo", "replace", "a", "z", "memory", 1).description == "Zo means replace every a with z"
    with pytest.raises(ValueError, match="unknown procedure family"):
        Procedure(0, "N", "sort", "", "", "memory", 1)(x)


def test_procedures_are_distinct_and_split_into_rounds() -> None:
    """Distinct names and rules across splits; memory procedures numbered into rounds of round_size."""
    procs = make_procedures({"backbone": 30, "memory": 10, "tool": 4}, {"memory": 4, "tool": 2}, random.Random(0))
    assert len({p.name for p in procs}) == len({(p.family, p.a, p.b) for p in procs}) == 44
    assert [p.round for p in procs if p.split == "memory"] == [1, 1, 1, 1, 2, 2, 2, 2, 3, 3]
    assert procs == make_procedures({"backbone": 30, "memory": 10, "tool": 4}, {"memory": 4, "tool": 2}, random.Random(0))


def test_examples_name_the_procedure_and_keep_test_inputs_unseen() -> None:
    """Every query names its procedure; test inputs differ from training inputs; calls chain 2-3 distinct tools."""
    procs = make_procedures({"memory": 5}, {"memory": 5}, random.Random(1))
    rows = atomic_examples(procs, {"train": 6, "test": 3}, (3, 5), random.Random(2))
    for p in procs:
        mine = [r for r in rows if r["procedure"] == p.id]
        assert all(p.name in r["query"] and r["answer"] == " ".join(p(r["args"][0].split())) for r in mine)
        assert not {r["args"][0] for r in mine if r["split"] == "test"} & {r["args"][0] for r in mine if r["split"] == "train"}
    calls = call_examples(procs, 20, "test", (2, 3), random.Random(3))
    assert all(2 <= len(c["tools"]) == len(set(c["tools"])) <= 3 for c in calls)
    assert all(all(procs[t].name in c["query"] for t in c["tools"]) for c in calls)


def test_rouge_l_and_exact_match() -> None:
    """LCS of 'a b c d' and 'a c d e' is 3: P = R = 3/4, F = 0.75; no overlap scores 0; EM ignores spacing."""
    assert lcs_length("abcd", "acde") == 3
    assert rouge_l("a b c d", "a c d e") == pytest.approx(0.75)
    assert rouge_l("a b", "a b c d") == pytest.approx(2 * 1 * 0.5 / 1.5)
    assert rouge_l("x", "a b") == 0.0 and rouge_l("", "a") == 0.0
    assert exact_match(" a  b ", "a b") and not exact_match("a b", "a c")


def test_multiset_f1_and_forgetting() -> None:
    """Tool F1 micro-averaged: 3 true positives of 4 predicted and 5 gold: P 0.75, R 0.6, F1 2/3."""
    assert multiset_f1([[1, 2], [3, 9]], [[2, 1, 4], [3, 5]]) == pytest.approx(2 * 0.75 * 0.6 / 1.35)
    assert multiset_f1([[1, 1]], [[1]]) == pytest.approx(2 * 0.5 * 1 / 1.5)
    assert multiset_f1([[]], [[1]]) == 0.0
    assert forgetting([80.0, 70.0, 60.0]) == 20.0

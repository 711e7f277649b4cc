"""The fact world and its questions: decompositions, counts delivered or an error, splits without leakage, MCC."""

from __future__ import annotations

import pytest

from paperdag.methods.deeprag.metrics import mcc
from paperdag.methods.deeprag.training import choose_memorised
from paperdag.methods.deeprag.world import GROUPS, check_questions, make_questions, make_world, question_text

PEOPLE = {"train": 8, "val": 4, "test": 4, "reading": 3}


def test_questions_decompose_and_stay_in_their_split() -> None:
    """Each question's steps chain (a_t is the next person asked about), its answer is the last step's, hop counts are
    as asked, every split has its count, and no person of a question's decomposition belongs to another group."""
    world = make_world(PEOPLE, 0)
    qs = make_questions(world, {"train": 30, "val": 10, "test": 10}, [2, 3], 1)
    assert {s: sum(q["split"] == s for q in qs) for s in ("train", "val", "test")} == {"train": 30, "val": 10, "test": 10}
    group = world.group_of()
    for q in qs:
        assert q["hops"] in (2, 3) and len(q["subqueries"]) == q["hops"]
        assert q["step_entities"][1:] == q["step_answers"][:-1] and q["answer"] == q["step_answers"][-1]
        assert {group[p] for p in q["step_entities"]} == {q["split"]}
    train_heads = {q["head"] for q in qs if q["split"] == "train"}
    assert not train_heads & {q["head"] for q in qs if q["split"] == "test"}
    assert not {q["question"] for q in qs if q["split"] == "train"} & {q["question"] for q in qs if q["split"] == "test"}
    check_questions(qs, group)
    assert sorted(group.values()).count("reading") == PEOPLE["reading"] and set(group.values()) == set(GROUPS)


def test_leaks_and_short_counts_raise() -> None:
    """A question touching another split's person is refused; asking more questions than exist raises."""
    world = make_world(PEOPLE, 0)
    qs = make_questions(world, {"train": 3, "val": 1, "test": 1}, [2], 1)
    bad = dict(qs[0], split="test")
    with pytest.raises(ValueError, match="touches"):
        check_questions([bad], world.group_of())
    with pytest.raises(ValueError, match="distinct"):
        make_questions(world, {"train": 10_000, "val": 1, "test": 1}, [2, 3], 1)


def test_question_text_and_boundary_draw() -> None:
    """The chain reads outwards from the head; the memorised subset has the asked size and depends on the seed."""
    assert question_text("Bo", ("mentor", "friend", "colour")) == "What is the favourite colour of the friend of the mentor of Bo?"
    facts = [(str(i), "colour") for i in range(100)]
    assert len(choose_memorised(facts, 0.5, 0)) == 50 and choose_memorised(facts, 0.5, 0) != choose_memorised(facts, 0.5, 1)


def test_mcc_hand_values() -> None:
    """TP 2, TN 1, FP 1, FN 0: (2 - 0) / sqrt(3 * 2 * 2 * 1) = 0.5774; a constant decision scores 0."""
    assert mcc([True, True, True, False], [True, True, False, False]) == pytest.approx(2 / 12 ** 0.5)
    assert mcc([True] * 4, [True, False, True, False]) == 0.0

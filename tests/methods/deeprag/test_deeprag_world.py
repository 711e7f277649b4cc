"""The fact world and its questions: decompositions, counts delivered or an error, splits without leakage, MCC."""

from __future__ import annotations

import re

import pytest

from paperdag.methods.deeprag.metrics import mcc
from paperdag.methods.deeprag.training import choose_memorised
from paperdag.methods.deeprag.world import BRIDGES, GROUPS, check_questions, make_questions, make_world, question_text

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


def test_titled_documents_make_bm25_rank_each_facts_own_document_first() -> None:
    """Each document is headed by its subject, so BM25's top-1 for a fact's subquery is that fact's own document,
    bridges included (untitled, "The mentor of W is X" ties with "The mentor of X is Y" for "Who is the mentor of X?")."""
    from paperdag.methods.deeprag.policy import Retriever
    from paperdag.methods.deeprag.world import document, subquery

    world = make_world({"train": 12, "val": 4, "test": 4, "reading": 12}, 0)
    keys = sorted(world.facts)
    docs = [document(r, e, world.facts[(e, r)]) for e, r in keys]
    assert all(d.startswith(f"{e}: ") for d, (e, _) in zip(docs, keys, strict=True))
    top = Retriever(docs, 1)([subquery(r, e) for e, r in keys])
    assert top == docs


def test_reading_copies_rename_the_reading_people_so_no_answer_can_be_memorised() -> None:
    """base_pools: one closed-book example per memorised fact; per copy one reading example per reading fact whose
    passage (BM25's top-1 in that copy) holds its answer. Fresh names: no subquery is asked twice and no answer or
    subject is a name of the world (nothing to learn by heart); permuted names: a bridge subquery recurs across
    copies with another answer."""
    from paperdag.lm.tokenizer import train_byte_bpe
    from paperdag.methods.deeprag.policy import SPECIAL_TOKENS, Steps
    from paperdag.methods.deeprag.tables import fact_dict, facts_table
    from paperdag.methods.deeprag.training import base_pools

    world = make_world({"train": 4, "val": 2, "test": 2, "reading": 6}, 0)
    facts = fact_dict(facts_table(world))
    reading = {k for k in facts if k[0] in world.people["reading"]}
    memorised = {k for k in facts if k[0] in world.people["train"]}
    names = {e for e, _ in facts} | {v for (_, r), v in facts.items() if r in {b.name for b in BRIDGES}}
    tok = train_byte_bpe([f"{e} {r} {v}" for (e, r), v in facts.items()] * 2, 400)
    tok.add_tokens(list(SPECIAL_TOKENS), special_tokens=True)
    steps = Steps(tok)

    def asked(fresh: bool) -> list[tuple[str, str]]:
        pools = base_pools(steps, 1, facts, memorised, reading, copies=3, seed=0, fresh_names=fresh)
        assert len(pools["closed"]) == len(memorised) and len(pools["reading"]) == 3 * len(reading)
        rows = []
        for prompt, target in pools["reading"]:
            text, answer = tok.decode(prompt), tok.decode(target[:-1]).strip()
            assert answer in text[text.index("<doc>"):]  # read from the passage
            rows.append((text[: text.index("<ret>")], answer))
        return rows

    fresh = asked(True)
    assert len({q for q, _ in fresh}) == len(fresh)
    bridge = [(q, a) for q, a in fresh if q.startswith("Who is the")]
    assert bridge and not {a for _, a in bridge} & names
    assert not {w for q, _ in fresh for w in re.findall(r"\w+", q)} & names
    answers: dict[str, set[str]] = {}
    for q, a in asked(False):
        answers.setdefault(q, set()).add(a)
    assert any(len(v) > 1 for q, v in answers.items() if q.startswith("Who is the"))

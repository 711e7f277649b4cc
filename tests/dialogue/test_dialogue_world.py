"""The shared dialogue generator (paperdag.dialogue): counts delivered or an error, the composition of the question
types, usefulness labels right on a hand-checked dialogue, similarity density, and the meeting register."""

from __future__ import annotations

import itertools
import random
from collections import Counter
from datetime import date

import pytest

from paperdag.dialogue import QUESTION_TYPES, DialogueSpec, date_words, generate


def _spec(**kw) -> DialogueSpec:
    base = {"register": "chat", "dialogues": 3, "sessions": 30, "utterances": 10, "entities": 8, "statements": (1, 2),
            "questions": {"fact": 6, "preference": 4, "temporal": 5}}
    return DialogueSpec(**(base | kw))


def test_a_hand_checked_dialogue_has_the_right_useful_utterances() -> None:
    """Read by hand (seed "hand"): one entity, the photography course, in sessions 2 (19 Feb: taught by Hamza, moved
    to the library basement) and 7 (2 Mar: meets on Thursdays, now taught by Quinn); six preference sessions.
    'Who teaches ... now?' -> the latest statement (uid 31, Quinn), not the stale one (uid 9); 'Who was teaching ...
    on 19 February 2023?' -> uid 9 (Hamza); 'What kind of food does Ines enjoy?' -> Ines's statement (uid 3), not
    Wen's in the same session (uid 2)."""
    spec = _spec(dialogues=1, sessions=8, utterances=4, entities=1, statements=(2, 2),
                 questions={"fact": 2, "preference": 2, "temporal": 1}, pronoun_rate=0.0)
    utterances, questions = generate(spec, random.Random("hand"))
    text = {u["uid"]: u["text"] for u in utterances}
    assert text[9] == "Wen: The photography course is now taught by Hamza."
    assert text[31] == "Ines: The photography course is now taught by Quinn."
    assert text[2] == "Wen: I'm really into Peruvian food." and text[3] == "Ines: I'm really into Italian food."
    by_text = {q["text"]: q for q in questions}
    assert by_text["Who teaches the photography course now?"]["useful"] == [31]
    assert by_text["Who teaches the photography course now?"]["answer"] == "Quinn"
    assert by_text["On which day does the photography course meet now?"]["useful"] == [29]
    then = by_text["Who was teaching the photography course when we spoke on 19 February 2023?"]
    assert then["useful"] == [9] and then["answer"] == "Hamza" and then["asked_date"] == "2023-02-19"
    assert by_text["What kind of food does Ines enjoy?"]["useful"] == [3]
    assert by_text["What kind of holidays does Wen prefer?"]["useful"] == [22]


@pytest.mark.parametrize("register", ["chat", "meeting"])
def test_counts_and_question_composition_are_as_asked(register: str) -> None:
    """Every dialogue has sessions x utterances utterances and exactly the asked number of each question type; uids
    and qids are unique; sessions are dated in increasing order."""
    spec = _spec(register=register)
    utterances, questions = generate(spec, random.Random(1))
    assert len(utterances) == 3 * 30 * 10 and len({u["uid"] for u in utterances}) == len(utterances)
    assert Counter((q["dialogue"], q["qtype"]) for q in questions) == {(d, t): spec.questions[t] for d in range(3) for t in QUESTION_TYPES}
    assert sorted(q["qid"] for q in questions) == list(range(len(questions)))
    for d in range(3):
        dates = [date.fromisoformat(u["date"]) for u in utterances if u["dialogue"] == d and u["turn"] == 0]
        assert len(dates) == 30 and dates == sorted(dates) and len(set(dates)) == 30


@pytest.mark.parametrize("register", ["chat", "meeting"])
def test_labels_follow_the_construction_and_questions_hide_their_answer(register: str) -> None:
    """fact: the useful utterance is the latest statement of that entity's attribute and states the answer;
    temporal: the statement in the session on the asked date (never the current value's); preference: the asked
    speaker's own statement. No question contains its answer."""
    utterances, questions = generate(_spec(register=register), random.Random(2))
    by_uid = {u["uid"]: u for u in utterances}
    for q in questions:
        (uid,) = q["useful"]
        u = by_uid[uid]
        assert u["dialogue"] == q["dialogue"] and u["value"] == q["answer"]
        assert q["answer"].lower() not in q["text"].lower()
        later = [v for v in utterances if v["dialogue"] == u["dialogue"] and v["kind"] == "fact" and v["entity"] == u["entity"]
                 and v["attribute"] == u["attribute"] and v["uid"] > uid]
        if q["qtype"] == "fact":
            assert u["kind"] == "fact" and not later
        elif q["qtype"] == "temporal":
            assert u["kind"] == "fact" and later and u["date"] == q["asked_date"]
            assert date_words(date.fromisoformat(u["date"])) in q["text"]
        else:
            assert u["kind"] == "preference" and q["text"].count(u["speaker"]) == 1


def test_the_world_is_similarity_dense() -> None:
    """Each entity is the topic of >= 2 sessions, values change between statements of one attribute, and topical
    filler naming the entity outnumbers its statements."""
    utterances, _ = generate(_spec(), random.Random(3))
    for d in range(3):
        rows = [u for u in utterances if u["dialogue"] == d]
        openers = Counter(u["entity"] for u in rows if u["kind"] == "opener")
        entities = {u["entity"] for u in rows if u["kind"] == "fact"}
        assert all(openers[e] >= 2 for e in entities)
        facts = {}
        for u in rows:
            if u["kind"] == "fact":
                facts.setdefault((u["entity"], u["attribute"]), []).append(u["value"])
        assert all(a != b for vals in facts.values() for a, b in itertools.pairwise(vals))
        assert sum(u["kind"] in ("chat", "tease") for u in rows) > sum(u["kind"] == "fact" for u in rows)


def test_requests_that_cannot_be_met_raise() -> None:
    """Too few sessions for the entities, more questions than distinct ones, too short sessions, an unknown
    register: each a ValueError naming the problem."""
    with pytest.raises(ValueError, match="at least"):
        generate(_spec(sessions=10, entities=8), random.Random(0))
    with pytest.raises(ValueError, match="preference questions asked"):
        generate(_spec(questions={"fact": 1, "preference": 50, "temporal": 1}), random.Random(0))
    with pytest.raises(ValueError, match="utterances per session"):
        generate(_spec(register="meeting", utterances=4), random.Random(0))
    with pytest.raises(ValueError, match="register"):
        generate(_spec(register="podcast"), random.Random(0))


def test_the_same_seed_gives_the_same_dialogues() -> None:
    """Deterministic from the seed (string seeds included); another seed gives other dialogues."""
    a = generate(_spec(), random.Random("x"))
    assert a == generate(_spec(), random.Random("x"))
    assert a != generate(_spec(), random.Random("y"))

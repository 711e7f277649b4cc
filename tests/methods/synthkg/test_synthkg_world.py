"""The generated world: counts delivered or an error, pages that use coreference, questions with their supports."""

from __future__ import annotations

import random

import pytest

from paperdag.methods.synthkg import NameBank, all_questions, make_world, render_page
from paperdag.methods.synthkg.world import QUESTION_TEMPLATES, REL

COUNTS = {"person": 12, "org": 4, "city": 3, "country": 2}


def test_world_has_the_requested_entities_and_every_page_fact() -> None:
    rng = random.Random(0)
    w = make_world(COUNTS, NameBank(rng), rng)
    assert {t: sum(e.type == t for e in w.entities.values()) for t in COUNTS} == COUNTS
    assert all(REL[f.relation].subject == w.entities[f.source].type and REL[f.relation].object == w.entities[f.target].type for f in w.facts)
    with pytest.raises(ValueError, match="at least 2"):
        make_world({**COUNTS, "org": 1}, NameBank(rng), rng)


def test_two_worlds_of_one_bank_share_no_name_but_every_word_of_one() -> None:
    """Full names of people, orgs and cities are never drawn twice from one bank, but every word of them comes from
    one fixed lexicon (so a model trained on one world has seen each word of another's names); countries are a closed
    set both worlds draw from."""
    rng = random.Random(1)
    bank = NameBank(rng)
    counts = {"person": 300, "org": 100, "city": 200, "country": 24}
    a, b = make_world(counts, bank, rng), make_world(COUNTS, bank, rng)
    named = {n for n, e in b.entities.items() if e.type != "country"}
    assert not set(a.entities) & named
    assert {n for n, e in b.entities.items() if e.type == "country"} <= set(a.entities)
    words = {w for n in a.entities for w in n.split()}
    assert all(w in words for n, e in b.entities.items() if e.type == "city" for w in n.split())
    with pytest.raises(ValueError, match="25 countries"):
        make_world({**COUNTS, "country": 25}, bank, rng)


def test_pages_state_each_fact_once_and_use_coreference() -> None:
    """Every fact sentence is in its page; with coref_share 1 no later sentence names the entity in full."""
    rng = random.Random(2)
    w = make_world(COUNTS, NameBank(rng), rng)
    name = next(n for n, e in w.entities.items() if e.type == "person")
    page = render_page(w, name, rng, coref_share=1.0, fillers=2)
    assert set(page.fact_sentences) == {f.id for f in w.facts if f.source == name}
    assert all(s in page.text for s in page.fact_sentences.values())
    assert "full" not in page.mentions and page.text.count(name) == 1


def test_questions_follow_their_chain_and_never_contain_the_answer() -> None:
    rng = random.Random(3)
    w = make_world(COUNTS, NameBank(rng), rng)
    qs = all_questions(w)
    assert {q.template for q in qs} == {t.key for t in QUESTION_TEMPLATES}
    by_id = {f.id: f for f in w.facts}
    for q in qs:
        chain = [by_id[i] for i in q.supports]
        assert chain[0].source == q.start and chain[-1].target == q.answer
        assert all(a.target == b.source for a, b in zip(chain, chain[1:]))
        assert q.answer not in q.text

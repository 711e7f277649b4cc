"""The teacher's steps on hand-made chunks: the ROUGE-1 decontextualisation filter, coreference resolved from the
previous chunk only, typed entities, and quadruples that keep a mention as written (the single-step baseline)."""

from __future__ import annotations

import pytest

from paperdag.methods.synthkg import chunk, decontextualise, decontextualise_page, entities, extract, rouge1_f1

PAGE = ("Alaric Venmoor, known as the Archivist, is a painter. He works for Drennic Holdings.\n\n"
        "Venmoor collects old coins. She was born in Quell Haven. The Archivist was mentored by Brenna Tolvast.")


def test_rewrite_kept_at_or_above_the_threshold_and_rejected_below() -> None:
    """A one-pronoun rewrite of a long chunk clears ROUGE-1 F1 0.70 and is kept; a short chunk whose three pronouns
    become long names falls below it and the original is kept instead."""
    previous = "Alaric Venmoor works for Drennic Holdings."
    kept = decontextualise("He collects old coins and speaks three languages fluently.", previous)
    assert kept.kept and kept.rouge1 >= 0.70 and kept.text.startswith("Alaric Venmoor collects")
    short = decontextualise("He sings. He paints. He rows.", "Alaric Quentin Venmoor Ostrovar works for Drennic Holdings.")
    assert short.rewrite != short.original and short.rouge1 < 0.70
    assert not short.kept and short.text == short.original


def test_rouge_threshold_is_a_parameter() -> None:
    """The same rewrite is rejected at rouge_min 1.0 and kept at 0.0."""
    assert not decontextualise("He sings.", "Alaric Venmoor sings.", rouge_min=1.0).kept
    assert decontextualise("He sings.", "Alaric Venmoor sings.", rouge_min=0.0).kept


def test_rouge1_f1_matches_a_hand_count() -> None:
    """'alaric venmoor sings' against 'he sings': 1 shared unigram, P = 1/3, R = 1/2, F1 = 0.4."""
    assert rouge1_f1("Alaric Venmoor sings.", "He sings.") == pytest.approx(0.4)


def test_previous_chunk_resolves_pronouns_short_names_and_near_aliases_but_not_far_ones() -> None:
    """Chunk 2 given chunk 1: the pronoun and the surname become the full name; the alias declared in chunk 1 is
    still known in chunk 2 but not in chunk 3 (one chunk of context)."""
    chunks = chunk(PAGE, 8)
    assert len(chunks) >= 3
    rewrites = decontextualise_page(chunks, rouge_min=0.0)
    joined = " ".join(r.text for r in rewrites)
    assert "He works" not in joined and "Alaric Venmoor works for Drennic Holdings." in joined
    assert "Alaric Venmoor collects old coins." in joined
    far = decontextualise_page(["Alaric Venmoor, known as the Archivist, is a painter.", "He rows.", "The Archivist sings."], 0.0)
    assert far[1].text == "Alaric Venmoor rows." and far[2].text == "The Archivist sings."
    near = decontextualise_page(["Alaric Venmoor, known as the Archivist, is a painter.", "The Archivist sings."], 0.0)
    assert near[1].text == "Alaric Venmoor sings."


def test_entities_are_typed_by_shape() -> None:
    """Org 'Word Kind', city 'Stem Kind', country '-ia', person two capitalised words; 'The Archivist' is no person."""
    found = dict(entities("The Archivist met Brenna Tolvast of Drennic Holdings in Quell Haven, Varnia."))
    assert found == {"Brenna Tolvast": "person", "Drennic Holdings": "org", "Quell Haven": "city", "Varnia": "country"}


def test_extraction_keeps_mentions_as_written() -> None:
    """On a raw chunk the source slot is the pronoun (the single-step error); a target of the wrong type is no triple."""
    _, quads = extract("She was born in Quell Haven. Brenna Tolvast works for Quell Haven.")
    assert [(q.source, q.relation, q.target) for q in quads] == [("She", "born", "Quell Haven")]
    assert quads[0].proposition == "She was born in Quell Haven."

"""train_lm's reading examples: every person renamed to another, at random, consistently across subquery, passage and
answer, so the answer can only be read; the boundary check fails on a relation the LM cannot read."""

from __future__ import annotations

import random

import pytest

from paperdag.methods.deeprag.training import check_boundary, renamed

PEOPLE = {"Bralimo", "Kestra", "Zuno"}


def test_renamed_maps_every_person_consistently_and_nothing_else() -> None:
    texts = ["Who is the mentor of Bralimo?", "Kestra",
             "The mentor of Bralimo is Kestra. The friend of Kestra is Zuno. The city of Bralimo is Dovan."]
    pool = ["Pobu", "Tairo", "Vesh", "Grolin", "Mida"]
    (q, a, passage), mapping = renamed(texts, PEOPLE, pool, random.Random(1))
    assert set(mapping) == PEOPLE and len(set(mapping.values())) == 3 and set(mapping.values()) <= set(pool)
    b, k, z = mapping["Bralimo"], mapping["Kestra"], mapping["Zuno"]
    assert q == f"Who is the mentor of {b}?" and a == k
    assert passage == f"The mentor of {b} is {k}. The friend of {k} is {z}. The city of {b} is Dovan."
    assert not any(p in " ".join((q, a, passage)) for p in PEOPLE)
    other, _ = renamed(texts, PEOPLE, pool, random.Random(2))  # another copy: other names
    assert other[1] != a or other[0] != q


def test_renamed_leaves_a_name_prefix_alone() -> None:
    """Only whole words are people: "Kestran" is not Kestra."""
    (text,), mapping = renamed(["Kestran met Kestra."], PEOPLE, ["Pobu"], random.Random(0))
    assert text == "Kestran met Pobu." and mapping == {"Kestra": "Pobu"}


def test_boundary_check_names_the_relation_it_cannot_read() -> None:
    stats = {"recall_memorised": 1.0, "recall_held_out": 0.0, "reading_by_relation": {"colour": 0.9, "mentor": 0.1}}
    with pytest.raises(ValueError, match=r"reading_by_relation.mentor = 0.100 breaks train_lm.min_reading"):
        check_boundary(stats, 0.9, 0.2, 0.5)
    check_boundary({**stats, "reading_by_relation": {"colour": 0.9, "mentor": 0.6}}, 0.9, 0.2, 0.5)


def test_reading_example_is_the_answer_prompt_with_the_passage_in_the_target() -> None:
    """Same ids as the answer format infer prompts with; the target starts after <doc>: passage, </doc>, answer, eos."""
    from paperdag.lm.tokenizer import train_byte_bpe
    from paperdag.methods.deeprag.policy import SPECIAL_TOKENS, Steps
    from paperdag.methods.deeprag.training import reading_example

    tok = train_byte_bpe(["Who is the mentor of Bralimo?", "The mentor of Bralimo is Kestra."] * 3, 300)
    tok.add_tokens(list(SPECIAL_TOKENS), special_tokens=True)
    steps = Steps(tok)
    q, passage = "Who is the mentor of Bralimo?", "The mentor of Bralimo is Kestra."
    prompt, target = reading_example(steps, q, passage, "Kestra")
    ref_prompt, ref_target = steps.answer_example(q, "R", passage, "Kestra")
    assert prompt + target == ref_prompt + ref_target
    assert prompt[-1] == steps.doc and target[: len(steps.encode([passage])[0])] == steps.encode([passage])[0]

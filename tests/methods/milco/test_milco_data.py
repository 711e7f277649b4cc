"""The synthetic multilingual world and the translate-then-BM25 dictionary."""

from __future__ import annotations

import pytest

from paperdag.methods.milco import SCRIPTS, build_world, learn_dictionary, make_language, translate


@pytest.fixture(scope="module")
def world():
    return build_world(["greek", "georgian", "cyrillic"], n_docs=120, twin_fraction=0.3, twin_size=3, n_parallel=40,
                       n_train_queries=30, n_test_crosslingual=20, n_test_propernoun=10, query_terms=3,
                       synonym_rate=0.3, train_fraction=0.5, seed=7)


def test_cipher_languages_write_in_their_own_script_and_are_deterministic() -> None:
    """Every word of a language uses only its alphabet; the same seed gives the same lexicon, another seed another."""
    greek = make_language("greek", seed=1)
    assert all(set(w) <= set(SCRIPTS["greek"]) for w in greek.lexicon.values())
    assert len(set(greek.lexicon.values())) == len(greek.lexicon)  # one foreign word per English word
    assert make_language("greek", seed=1).lexicon == greek.lexicon != make_language("greek", seed=2).lexicon
    with pytest.raises(ValueError, match="klingon"):
        make_language("klingon", seed=1)


def test_queries_cross_languages_or_hinge_on_the_name(world) -> None:
    """Cross-lingual queries differ in language from their document and name no entity; proper-noun queries share
    the document's language and contain its transliterated name; the generating document is always relevant."""
    docs = {d["doc_id"]: d for d in world.docs}
    langs = {lang.name: lang for lang in world.languages}
    for q in world.queries:
        doc = docs[q["doc_id"]]
        assert q["doc_id"] in q["relevant"]
        name = langs[doc["lang"]].transliterate(doc["name"])
        if q["kind"] == "crosslingual":
            assert q["lang"] != doc["lang"] and doc["name"] not in q["english"].lower()
        else:
            assert q["lang"] == doc["lang"] and name in q["text"].split() and doc["twin_group"] >= 0
    assert {q["split"] for q in world.queries} == {"train", "test"}
    assert all(docs[q["doc_id"]]["split"] == q["split"] for q in world.queries)


def test_document_names_never_occur_in_the_parallel_text(world) -> None:
    """The searched documents' proper nouns are absent from the alignment data (untranslatable for the pivot view)."""
    parallel_words = {w.lower() for row in world.parallel for w in row["english"].split()}
    assert not {d["name"] for d in world.docs} & parallel_words


def test_dictionary_learns_word_translations_from_parallel_text() -> None:
    """Dice co-occurrence: x~red (3/3 together), y~boat, z~car (Dice 1 beats red's 2/3); unknown words pass through."""
    pairs = [("x y", "red boat"), ("x z", "red car"), ("w y", "blue boat"), ("x", "red")]
    dictionary = learn_dictionary(pairs)
    assert dictionary["x"] == "red" and dictionary["y"] == "boat" and dictionary["z"] == "car" and dictionary["w"] == "blue"
    assert translate("Z q", dictionary) == "car q"

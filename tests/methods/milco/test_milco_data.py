"""The synthetic multilingual world and the translate-then-BM25 dictionary."""

from __future__ import annotations

import pytest

from paperdag.methods.milco import SCRIPTS, build_world, learn_dictionary, make_language, translate


@pytest.fixture(scope="module")
def world():
    return build_world(["greek", "georgian", "cyrillic"], n_docs=120, twin_fraction=0.3, twin_size=3, n_parallel=40,
                       n_train_queries=30, n_test_crosslingual=20, n_test_propernoun=10, query_terms=3,
                       synonym_rate=0.3, train_fraction=0.5, seed=7, forms_per_word=3, homonym_rate=0.2, n_suffixes=3,
                       compound_languages=1, shuffle_order=True)


def test_cipher_languages_write_in_their_own_script_and_are_deterministic() -> None:
    """Every word of a language uses only its alphabet; the same seed gives the same lexicon, another seed another;
    without morphology one stem per word, distinct; with it, synonyms, homonyms, several suffixes."""
    greek = make_language("greek", seed=1)
    assert all(set(w) <= set(SCRIPTS["greek"]) for forms in greek.lexicon.values() for w in forms)
    assert all(len(forms) == 1 for forms in greek.lexicon.values()) and greek.suffixes == ("",)
    assert len({forms[0] for forms in greek.lexicon.values()}) == len(greek.lexicon)
    assert make_language("greek", seed=1).lexicon == greek.lexicon != make_language("greek", seed=2).lexicon
    rich = make_language("greek", seed=1, forms_per_word=3, homonym_rate=0.3, n_suffixes=3, compounds=True, shuffle_order=True)
    assert max(len(f) for f in rich.lexicon.values()) == 3 and len(rich.suffixes) >= 2
    assert len({forms[0] for forms in rich.lexicon.values()}) < len(rich.lexicon)  # homonyms share a stem
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
    """IBM Model 1: x~red (3/3 together), y~boat, z~car (EM explains red by x, so car by z); unknown words pass through."""
    pairs = [("x y", "red boat"), ("x z", "red car"), ("w y", "blue boat"), ("x", "red")]
    dictionary = learn_dictionary(pairs)
    assert dictionary["x"] == "red" and dictionary["y"] == "boat" and dictionary["z"] == "car" and dictionary["w"] == "blue"
    assert translate("Z q", dictionary) == "car q"


def test_morphology_makes_surface_forms_vary_and_a_small_dictionary_miss_them(world) -> None:
    """The same English word appears in several surface forms (synonym stems x suffixes) across documents, the
    compounding language writes fewer words than English, and a dictionary learned from 40 parallel sentences
    translates only part of the documents' words (translate-then-BM25 is imperfect)."""
    compounding = world.languages[0]
    docs = [d for d in world.docs if d["lang"] == compounding.name]
    assert all(len(d["text"].split()) == len(d["english"].split()) - 2 for d in docs)
    forms = {w for d in world.docs for w in d["text"].split()}
    dictionary = learn_dictionary((r["source"], r["english"]) for r in world.parallel)
    covered = sum(w in dictionary for d in world.docs for w in d["text"].split()) / sum(len(d["text"].split()) for d in world.docs)
    english_words = {w for d in world.docs for w in d["english"].lower().split()}
    assert len(forms) > 2 * len(english_words) and covered < 0.9


def test_requested_counts_are_delivered(world) -> None:
    """The world holds the asked-for documents, train and test queries of each kind, and parallel rows."""
    assert len(world.docs) == 120 and len(world.parallel) == 40 * 3
    kinds = [(q["split"], q["kind"]) for q in world.queries]
    assert kinds.count(("test", "crosslingual")) == 20 and kinds.count(("test", "propernoun")) == 10
    assert kinds.count(("train", "crosslingual")) + kinds.count(("train", "propernoun")) == 30

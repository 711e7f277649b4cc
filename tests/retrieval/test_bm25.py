"""BM25Index: exact-term matches rank first, non-matching documents are not hits, save/load round-trips."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from paperdag.retrieval import BM25Index

CORPUS = [
    "a red cotton shirt with short sleeves",
    "blue denim jeans, slim fit",
    "a green wool sweater for winter",
    "red and white striped socks",
    "the zebra print scarf",
    "a shirt and a tie for the office",
]


def test_exact_term_document_ranks_first():
    """A query term found in one document only puts that document first, with a positive score."""
    scores, ids = BM25Index.build(CORPUS).search(["zebra", "denim jeans", "sweater winter"], k=3)
    assert ids[:, 0].tolist() == [4, 1, 2]
    assert (scores[:, 0] > 0).all()


def test_scores_descend_and_rarer_terms_weigh_more():
    """Scores are sorted best first; a document holding the rarer of two query terms outranks one with the commoner."""
    scores, ids = BM25Index.build(CORPUS).search(["red sleeves"], k=len(CORPUS))
    assert (np.diff(scores[0]) <= 0).all()
    assert ids[0, 0] == 0  # holds both terms
    assert ids[0, 1] == 3  # holds "red" only


def test_no_shared_term_is_no_hit():
    """Documents sharing no term with the query (and slots beyond the corpus) come back as id -1, score 0."""
    scores, ids = BM25Index.build(CORPUS).search(["zebra", "spaceship", "the a and"], k=len(CORPUS) + 2)
    assert ids[0, 0] == 4 and (ids[0, 1:] == -1).all()
    assert (ids[1:] == -1).all() and (scores[1:] == 0).all()
    assert ids.dtype == np.int64 and ids.shape == (3, len(CORPUS) + 2)


def test_stopwords_none_keeps_function_words():
    """With stopwords=None a function word is a searchable term; with "en" it is dropped."""
    assert BM25Index.build(CORPUS, stopwords=None).search(["the"], k=2)[1][0, 0] in (4, 5)
    assert (BM25Index.build(CORPUS, stopwords="en").search(["the"], k=2)[1] == -1).all()


def test_save_load_round_trip_without_pickle(tmp_path: Path):
    """A reloaded index gives identical results, keeps k1/b/stopwords, and its arrays load with allow_pickle=False."""
    index = BM25Index.build(CORPUS, k1=1.2, b=0.5, stopwords=None)
    index.save(tmp_path / "bm25")
    loaded = BM25Index.load(tmp_path / "bm25")
    assert (loaded.k1, loaded.b, loaded.stopwords, loaded.ntotal) == (1.2, 0.5, None, len(CORPUS))
    queries = ["red shirt", "the office tie", "nothing here"]
    for got, want in zip(loaded.search(queries, 4), index.search(queries, 4)):
        np.testing.assert_array_equal(got, want)
    for f in (tmp_path / "bm25").glob("*.npy"):
        np.load(f, allow_pickle=False)
    json.loads((tmp_path / "bm25" / "bm25_config.json").read_text())


def test_errors_name_what_is_wrong(tmp_path: Path):
    """An empty corpus, one string instead of a list, and a missing directory are reported."""
    with pytest.raises(ValueError, match="empty corpus"):
        BM25Index.build([])
    with pytest.raises(TypeError, match="list of strings"):
        BM25Index.build(CORPUS).search("red", 2)
    with pytest.raises(FileNotFoundError, match="bm25_config.json is missing"):
        BM25Index.load(tmp_path)

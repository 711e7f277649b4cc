"""Relevance and diversity metrics on hand-computed cases, and batch forms equal to per-row Python references."""

from __future__ import annotations

import math

import numpy as np
import pytest

from paperdag.retrieval import (
    attribute_entropy,
    distinct_attributes,
    inverse_simpson,
    labels_at,
    mrr,
    ndcg_at_k,
    ndcg_at_k_per_query,
    recall_at_k,
    recall_at_k_per_query,
    reciprocal_rank,
)


def test_recall_counts_relevant_found_in_top_k():
    """recall@k = |top-k ∩ R| / |R|: 2 of 4 relevant in the top 3, 1 of 4 in the top 1."""
    retrieved = np.array([[1, 2, 3]])
    relevant = [{1, 3, 9, 10}]
    assert recall_at_k(retrieved, relevant, 3) == 2 / 4
    assert recall_at_k(retrieved, relevant, 1) == 1 / 4


def test_recall_accepts_padded_arrays_and_ignores_repeats():
    """Relevant ids as a -1 padded array equal the same sets; a repeated or -1 retrieved id is never a hit."""
    retrieved = np.array([[4, 4, -1, 7], [0, 1, 2, 3]])
    relevant = np.array([[4, 7, -1], [5, -1, -1]])
    np.testing.assert_array_equal(recall_at_k_per_query(retrieved, relevant, 4), [1.0, 0.0])
    np.testing.assert_array_equal(recall_at_k_per_query(retrieved, [{4, 7}, {5}], 4), [1.0, 0.0])
    assert recall_at_k(np.array([[3, 3, 3]]), [{3, 8}], 3) == 1 / 2
    assert recall_at_k(np.array([[-1, -1]]), np.array([[-1, 2]]), 2) == 0.0


def test_recall_undefined_without_relevant_ids():
    """A query without relevant ids has NaN recall and is left out of the mean."""
    per = recall_at_k_per_query(np.array([[1, 2], [1, 2]]), [set(), {2}], 2)
    assert math.isnan(per[0]) and per[1] == 1.0
    assert recall_at_k(np.array([[1, 2], [1, 2]]), [set(), {2}], 2) == 1.0


def test_recall_matches_reference_on_random_ids():
    """The vectorised recall equals a per-query set computation."""
    rng = np.random.default_rng(0)
    retrieved = np.stack([rng.permutation(50)[:10] for _ in range(30)])
    relevant = [set(rng.choice(50, rng.integers(1, 15), replace=False).tolist()) for _ in range(30)]
    want = [len(set(r[:7].tolist()) & rel) / len(rel) for r, rel in zip(retrieved, relevant)]
    np.testing.assert_allclose(recall_at_k_per_query(retrieved, relevant, 7), want)


def test_ndcg_of_perfect_ranking_is_one():
    """Retrieving the relevant ids in order of gain gives nDCG = 1, binary or graded."""
    assert ndcg_at_k(np.array([[3, 1, 8]]), [{3, 1}], 3) == pytest.approx(1.0)
    assert ndcg_at_k(np.array([[3, 1, 8]]), [{3: 2.0, 1: 1.0}], 3) == pytest.approx(1.0)


def test_ndcg_swapped_cases_by_hand():
    """Binary: the one relevant id at rank 2 gives 1/log2(3). Graded {a: 3, b: 1} retrieved [b, a] gives
    (1 + 3/log2 3) / (3 + 1/log2 3)."""
    assert ndcg_at_k(np.array([[5, 9]]), [{9}], 2) == pytest.approx(1 / math.log2(3))
    got = ndcg_at_k(np.array([[2, 1]]), [{1: 3.0, 2: 1.0}], 2)
    assert got == pytest.approx((1 + 3 / math.log2(3)) / (3 + 1 / math.log2(3)))


def test_ndcg_ideal_is_cut_at_k_and_undefined_without_gain():
    """IDCG@k uses only the k best gains (so 2 of 5 relevant found at ranks 1-2 is 1), and no gain gives NaN."""
    assert ndcg_at_k(np.array([[1, 2, 99]]), [{1, 2, 3, 4, 5}], 2) == pytest.approx(1.0)
    assert math.isnan(ndcg_at_k_per_query(np.array([[1, 2]]), [{}], 2)[0])


def test_reciprocal_rank_and_mrr():
    """RR is 1/rank of the first relevant id, 0 when none; MRR is their mean; k cuts the list first."""
    retrieved = np.array([[5, 1, 2], [3, 4, 6], [7, 8, 9]])
    relevant = [{1, 2}, {9}, {7}]
    np.testing.assert_allclose(reciprocal_rank(retrieved, relevant), [1 / 2, 0.0, 1.0])
    assert mrr(retrieved, relevant) == pytest.approx((1 / 2 + 0 + 1) / 3)
    assert mrr(retrieved, relevant, k=1) == pytest.approx(1 / 3)


@pytest.mark.parametrize("c", [2, 3, 7])
def test_uniform_labels_entropy_and_inverse_simpson(c):
    """Equal shares of c attributes: H = ln c, H / ln c = 1, inverse Simpson = c, distinct = c."""
    labels = np.repeat(np.arange(c), 4)
    assert attribute_entropy(labels) == pytest.approx(math.log(c))
    assert attribute_entropy(labels, normalize=True, num_attributes=c) == pytest.approx(1.0)
    assert inverse_simpson(labels) == pytest.approx(c)
    assert distinct_attributes(labels) == c


def test_single_label_has_no_diversity():
    """One attribute only: H = 0, inverse Simpson = 1, one distinct attribute."""
    labels = np.full(10, 4)
    assert attribute_entropy(labels) == 0.0
    assert inverse_simpson(labels) == pytest.approx(1.0)
    assert distinct_attributes(labels) == 1


def test_skewed_shares_by_hand():
    """Shares (1/3, 2/3): H = -(1/3 ln 1/3 + 2/3 ln 2/3), inverse Simpson = 1 / (1/9 + 4/9) = 9/5."""
    labels = np.array([0, 0, 1, 1, 1, 1])
    assert attribute_entropy(labels) == pytest.approx(-(1 / 3 * math.log(1 / 3) + 2 / 3 * math.log(2 / 3)))
    assert inverse_simpson(labels) == pytest.approx(9 / 5)
    assert attribute_entropy(labels, normalize=True, num_attributes=4) == pytest.approx(
        attribute_entropy(labels) / math.log(4))


def test_negative_labels_are_empty_slots():
    """Slots labelled -1 (padding) are ignored; a set with no real label has NaN diversity and 0 distinct."""
    assert attribute_entropy(np.array([0, 1, -1, -1])) == pytest.approx(math.log(2))
    assert inverse_simpson(np.array([3, -1])) == pytest.approx(1.0)
    assert math.isnan(attribute_entropy(np.array([-1, -1])))
    assert distinct_attributes(np.array([-1, -1])) == 0


def test_batch_equals_row_by_row():
    """A (m, k) label matrix gives per-row arrays equal to calling each metric on each row."""
    rng = np.random.default_rng(1)
    labels = rng.integers(-1, 6, size=(40, 12))
    labels[0] = -1
    for fn in (attribute_entropy, inverse_simpson, distinct_attributes):
        batch = fn(labels)
        assert batch.shape == (40,)
        np.testing.assert_allclose(batch, [fn(row) for row in labels])


def test_labels_at_maps_ids_and_keeps_padding():
    """labels_at looks up each id's attribute and leaves -1 for a -1 id."""
    attributes = np.array([10, 11, 12, 13])
    np.testing.assert_array_equal(labels_at(np.array([[3, 0, -1]]), attributes), [[13, 10, -1]])


def test_errors_name_what_is_wrong():
    """Normalising without c, misaligned relevance, and float ids are reported."""
    with pytest.raises(ValueError, match="needs num_attributes"):
        attribute_entropy(np.array([0, 1]), normalize=True)
    with pytest.raises(ValueError, match="3 entries for 2 queries"):
        recall_at_k(np.array([[1], [2]]), [{1}, {2}, {3}], 1)
    with pytest.raises(ValueError, match="int array"):
        recall_at_k(np.array([[1.0]]), [{1}], 1)


def test_padded_fills_ragged_lists_and_cuts_at_width():
    """Ragged per-query lists become one array: the fill in empty slots, the longest list's width unless given,
    a longer list cut at the width given; the dtype as asked."""
    from paperdag.retrieval import padded

    out = padded([[1, 2, 3], [4]], -1)
    assert out.dtype == np.float64 and out.tolist() == [[1, 2, 3], [4, -1, -1]]
    ids = padded([[1, 2, 3], []], -1, width=2, dtype=np.int64)
    assert ids.dtype == np.int64 and ids.tolist() == [[1, 2], [-1, -1]]

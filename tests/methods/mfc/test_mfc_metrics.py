"""Metric spaces: each distance matches its definition, and every evaluated pair is counted."""

from __future__ import annotations

import numpy as np
from scipy.spatial.distance import cdist

from paperdag.methods.mfc import CallableSpace, EditSpace, EuclideanSpace, HammingSpace, JaccardSpace


def levenshtein(a: str, b: str) -> int:
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
    return row[-1]


def test_euclidean_matches_scipy_cdist() -> None:
    """Euclidean blocks (many rows and a single row) equal scipy's cdist."""
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(7, 5)), rng.normal(size=(11, 5))
    np.testing.assert_allclose(EuclideanSpace(a).pairwise(EuclideanSpace(b)), cdist(a, b), atol=1e-12)
    np.testing.assert_allclose(EuclideanSpace(a[:1]).pairwise(EuclideanSpace(b)), cdist(a[:1], b), atol=1e-12)


def test_hamming_counts_differing_bits() -> None:
    """Hamming distance is the number of positions where two bit strings differ."""
    bits = np.random.default_rng(1).integers(0, 2, size=(9, 40))
    expected = (bits[:, None, :] != bits[None, :, :]).sum(axis=2)
    space = HammingSpace(bits)
    np.testing.assert_array_equal(space.pairwise(space), expected)


def test_jaccard_matches_set_formula() -> None:
    """Jaccard distance is 1 - |A & B| / |A | B|, and 0 between two empty sets."""
    sets = [[1, 2, 3], [2, 3, 4, 5], [], [7], [], [1, 1, 2]]
    space = JaccardSpace.from_sets(sets, vocabulary=10)
    for i, a in enumerate(sets):
        for j, b in enumerate(sets):
            sa, sb = set(a), set(b)
            want = 0.0 if not (sa | sb) else 1 - len(sa & sb) / len(sa | sb)
            assert abs(space.pairwise(space.take([i]))[j, 0] - want) < 1e-12


def test_edit_distance_matches_dynamic_programming() -> None:
    """Edit distance equals the textbook Levenshtein recurrence."""
    words = ["kitten", "sitting", "", "flaw", "lawn", "abc"]
    space = EditSpace(words)
    got = space.pairwise(space)
    for i, a in enumerate(words):
        for j, b in enumerate(words):
            assert got[i, j] == levenshtein(a, b)


def test_callable_space_calls_the_function_per_pair() -> None:
    """The generic path evaluates the user's function once per pair."""
    seen: list[tuple[int, int]] = []

    def dist(x: int, y: int) -> float:
        seen.append((x, y))
        return abs(x - y)

    space = CallableSpace([0, 3, 10], dist)
    np.testing.assert_array_equal(space.pairwise(space.take([2])), [[10], [7], [0]])
    assert len(seen) == 3


def test_counter_counts_pairs_and_is_shared_by_subsets() -> None:
    """pairwise adds rows x cols to the counter; subsets share it; counting() starts a fresh one."""
    space = EuclideanSpace(np.zeros((10, 2)))
    counted, counter = space.counting()
    counted.take([0, 1, 2]).pairwise(counted)
    counted.take([4]).pairwise(counted.take([5, 6]))
    assert counter.calls == 3 * 10 + 2
    assert space.counter.calls == 0

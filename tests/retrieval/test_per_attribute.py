"""PerAttributeIndex: one index per attribute value, global ids, save/load."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from paperdag.retrieval import AnnIndex, PerAttributeIndex


@pytest.fixture(scope="module")
def labelled(points):
    x, q = points
    attributes = np.random.default_rng(7).choice([2, 5, 9, 11], size=len(x), p=[0.6, 0.3, 0.09, 0.01])
    return x, q, attributes


@pytest.fixture(scope="module")
def per_index(labelled):
    """per_index(kind, metric) -> PerAttributeIndex over the labelled points, built once per module."""
    x, _, attributes = labelled
    cache: dict[tuple[str, str], PerAttributeIndex] = {}

    def build(kind: str, metric: str = "ip") -> PerAttributeIndex:
        if (kind, metric) not in cache:
            cache[kind, metric] = PerAttributeIndex.build(x, attributes, kind=kind, metric=metric, nlist=16)
        return cache[kind, metric]

    return build


@pytest.mark.parametrize("kind", ["flat", "hnsw", "ivf"])
def test_search_returns_global_ids_of_the_attribute(labelled, per_index, kind):
    """Every id returned for attribute a is a row of the input whose label is a, including the rarest attribute."""
    x, q, attributes = labelled
    per = per_index(kind)
    assert per.attributes == [2, 5, 9, 11] and per.ntotal == len(x)
    for a in per.attributes:
        ids = per.search(q, 10, a)[1]
        assert (ids >= 0).all() and (attributes[ids] == a).all()


def test_flat_per_attribute_equals_subset_search(labelled, per_index):
    """A flat per-attribute search equals a flat search of the whole set restricted to that attribute's rows."""
    x, q, attributes = labelled
    per = per_index("flat")
    whole = AnnIndex.build(x, kind="flat")
    results = per.search_each(q, 10)
    assert sorted(results) == per.attributes
    for a, (scores, ids) in results.items():
        want_scores, want_ids = whole.search(q, 10, subset=np.flatnonzero(attributes == a))
        np.testing.assert_array_equal(ids, want_ids)
        np.testing.assert_allclose(scores, want_scores, rtol=1e-5)


def test_short_attribute_is_padded(labelled, per_index):
    """An attribute with fewer than k rows returns all of them, then -1."""
    x, q, attributes = labelled
    rare = np.flatnonzero(attributes == 11)
    ids = per_index("hnsw").search(q[:4], len(rare) + 5, 11)[1]
    assert (np.sort(ids[:, : len(rare)], axis=1) == np.sort(rare)).all() and (ids[:, len(rare):] == -1).all()


def test_save_load_round_trip(labelled, per_index, tmp_path: Path):
    """A reloaded PerAttributeIndex gives identical results per attribute; id maps are pickle-free .npy files."""
    x, q, attributes = labelled
    per = per_index("hnsw", "l2")
    per.save(tmp_path / "per")
    loaded = PerAttributeIndex.load(tmp_path / "per")
    assert loaded.attributes == per.attributes
    for a in per.attributes:
        np.load(tmp_path / "per" / f"attr_{a}" / "ids.npy", allow_pickle=False)
        for got, want in zip(loaded.search(q, 7, a), per.search(q, 7, a)):
            np.testing.assert_array_equal(got, want)


def test_errors_name_what_is_wrong(labelled, per_index):
    """An absent attribute, misaligned labels and non-integer labels are reported with what to fix."""
    x, q, attributes = labelled
    per = per_index("flat")
    with pytest.raises(KeyError, match=r"attribute 3 has no vectors.*\[2, 5, 9, 11\]"):
        per.search(q, 5, 3)
    with pytest.raises(ValueError, match="one integer label per vector"):
        PerAttributeIndex.build(x, attributes[:-1])
    with pytest.raises(ValueError, match="integer labels"):
        PerAttributeIndex.build(x, attributes.astype(float))
    with pytest.raises(ValueError, match="unknown index kind"):
        PerAttributeIndex.build(x, attributes, kind="lsh")

"""AnnIndex: flat is exact, HNSW/IVF approximate it closely, subsets restrict results, save/load round-trips."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from paperdag.retrieval import AnnIndex, recall_at_k


def brute_force(x: np.ndarray, q: np.ndarray, k: int, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-k with numpy: inner products (descending) or squared distances (ascending)."""
    if metric == "ip":
        s = q.astype(np.float64) @ x.astype(np.float64).T
        order = np.argsort(-s, axis=1, kind="stable")[:, :k]
    else:
        s = ((q[:, None, :].astype(np.float64) - x[None, :, :]) ** 2).sum(-1)
        order = np.argsort(s, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(s, order, axis=1), order


@pytest.mark.parametrize("metric", ["ip", "l2"])
def test_flat_equals_brute_force(points, built, metric):
    """A flat index returns exactly the numpy brute-force top-k ids, with the same scores."""
    x, q = points
    scores, ids = built("flat", metric).search(q, 10)
    want_scores, want_ids = brute_force(x, q, 10, metric)
    assert ids.dtype == np.int64 and ids.shape == (len(q), 10)
    np.testing.assert_array_equal(ids, want_ids)
    np.testing.assert_allclose(scores, want_scores, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("kind,kw", [("hnsw", {}), ("ivf", {"nlist": 64, "nprobe": 16})])
@pytest.mark.parametrize("metric", ["ip", "l2"])
def test_approximate_recall_vs_flat(points, built, kind, kw, metric):
    """HNSW and IVF reach recall@10 >= 0.9 against the flat index on 5k vectors."""
    x, q = points
    exact = built("flat", metric).search(q, 10)[1]
    approx = built(kind, metric, **kw).search(q, 10)[1]
    assert recall_at_k(approx, exact, 10) >= 0.9


def test_search_parameters_trade_recall(points, built):
    """A wider HNSW beam (ef_search) gains recall on a sparse graph, and nprobe = nlist makes IVF exact."""
    x, q = points
    exact = built("flat", "l2").search(q, 10)[1]
    hnsw = AnnIndex.build(x, kind="hnsw", metric="l2", hnsw_m=6, ef_construction=24)
    low = recall_at_k(hnsw.search(q, 10, ef_search=10)[1], exact, 10)
    high = recall_at_k(hnsw.search(q, 10, ef_search=400)[1], exact, 10)
    assert high > low and high > 0.95
    ivf = AnnIndex.build(x, kind="ivf", metric="l2", nlist=32, nprobe=1)
    assert recall_at_k(ivf.search(q, 10, nprobe=32)[1], exact, 10) == 1.0


@pytest.mark.parametrize("kind", ["flat", "hnsw", "ivf"])
@pytest.mark.parametrize("subset_size", [300, 4500])
def test_subset_search_returns_only_subset_ids(points, built, kind, subset_size):
    """With subset=S every returned id is in S, both on the exact small-subset path and the faiss filtered path."""
    x, q = points
    subset = np.random.default_rng(1).choice(len(x), subset_size, replace=False)
    index = built(kind, "ip", nlist=64, nprobe=16)
    for exact_max in (0, 10_000):
        ids = index.search(q, 10, subset=subset, exact_subset_max=exact_max)[1]
        assert np.isin(ids, subset).all()


@pytest.mark.parametrize("kind", ["flat", "hnsw", "ivf"])
@pytest.mark.parametrize("metric", ["ip", "l2"])
def test_small_subset_equals_brute_force_on_subset(points, built, kind, metric):
    """A subset within exact_subset_max is searched exactly, whatever the index kind."""
    x, q = points
    subset = np.random.default_rng(2).choice(len(x), 500, replace=False)
    scores, ids = built(kind, metric, nlist=64, nprobe=16).search(q, 10, subset=subset)
    want_scores, local = brute_force(x[subset], q, 10, metric)
    np.testing.assert_array_equal(ids, subset[local])
    np.testing.assert_allclose(scores, want_scores, rtol=1e-4, atol=1e-3)


def test_flat_filtered_search_equals_brute_force_on_subset(points, built):
    """The faiss filtered path (IDSelectorBatch) of a flat index is exact on the subset too."""
    x, q = points
    subset = np.random.default_rng(5).choice(len(x), 2000, replace=False)
    ids = built("flat").search(q, 10, subset=subset, exact_subset_max=0)[1]
    np.testing.assert_array_equal(ids, subset[brute_force(x[subset], q, 10, "ip")[1]])


@pytest.mark.parametrize("metric,worst", [("ip", -np.inf), ("l2", np.inf)])
def test_padding_when_fewer_than_k(points, built, metric, worst):
    """When fewer than k ids qualify the tail is id -1 with the worst score (-inf for ip, +inf for l2)."""
    x, q = points
    index = AnnIndex.build(x[:5], kind="flat", metric=metric)
    scores, ids = index.search(q[:3], 8)
    assert (ids[:, :5] >= 0).all() and (ids[:, 5:] == -1).all() and (scores[:, 5:] == worst).all()
    big = built("hnsw", metric)
    scores, ids = big.search(q[:3], 8, subset=np.array([7, 9, 11]))
    assert set(ids[:, :3].ravel()) == {7, 9, 11} and (ids[:, 3:] == -1).all() and (scores[:, 3:] == worst).all()
    assert (big.search(q[:2], 4, subset=np.array([], dtype=np.int64))[1] == -1).all()


@pytest.mark.parametrize("kind", ["flat", "hnsw", "ivf"])
def test_save_load_round_trip(points, kind, tmp_path: Path):
    """A saved and reloaded index answers every query (plain and subset) exactly as before, with the same config."""
    x, q = points
    index = AnnIndex.build(x, kind=kind, metric="l2", nlist=64, nprobe=8, ef_search=32)
    index.save(tmp_path / "ix")
    assert {p.name for p in (tmp_path / "ix").iterdir()} == {"index.faiss", "config.json"}
    loaded = AnnIndex.load(tmp_path / "ix")
    assert (loaded.kind, loaded.metric, loaded.dim, loaded.ntotal) == (kind, "l2", x.shape[1], len(x))
    assert loaded.config == index.config
    subset = np.arange(0, len(x), 3)
    for kw in ({}, {"subset": subset}, {"subset": subset[:100]}):
        for a, b in zip(index.search(q, 10, **kw), loaded.search(q, 10, **kw)):
            np.testing.assert_array_equal(a, b)


def test_errors_name_what_is_wrong(points, tmp_path: Path):
    """Unknown kind or metric, a dimension mismatch, out-of-range subset ids and a missing directory are named."""
    x, q = points
    with pytest.raises(ValueError, match="unknown index kind 'annoy'"):
        AnnIndex.build(x, kind="annoy")
    with pytest.raises(ValueError, match="unknown metric 'cos'"):
        AnnIndex.build(x, metric="cos")
    index = AnnIndex.build(x, kind="flat")
    with pytest.raises(ValueError, match="dimension 16 but the index holds vectors of dimension 32"):
        index.search(q[:, :16], 5)
    with pytest.raises(ValueError, match="outside 0..4999"):
        index.search(q, 5, subset=np.array([0, 5000]))
    with pytest.raises(FileNotFoundError, match="index.faiss is missing"):
        AnnIndex.load(tmp_path)


def test_single_query_vector_is_one_row(points, built):
    """A 1-D query is one query: results have shape (1, k)."""
    x, q = points
    scores, ids = built("hnsw").search(q[0], 4)
    assert scores.shape == ids.shape == (1, 4)

"""Mass pruning and the inverted index: the shortest-prefix rule, and search equal to brute-force scoring."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from paperdag.methods.milco import InvertedIndex, active_dims, brute_force_search, prune_by_mass


def test_prune_keeps_the_shortest_prefix_reaching_the_mass() -> None:
    """Weights [0.1, 0.5, 0.3, 0.1] (total 1): rho 0.5 keeps {0.5}, rho 0.8 keeps {0.5, 0.3}, rho 0.85 adds one 0.1."""
    row = sp.csr_matrix(np.array([[0.1, 0.5, 0.3, 0.1]], dtype=np.float32))
    assert prune_by_mass(row, 0.5).toarray().tolist() == [[0.0, 0.5, 0.0, 0.0]]
    assert np.allclose(prune_by_mass(row, 0.8).toarray(), [[0.0, 0.5, 0.3, 0.0]])
    # ties between the two 0.1s go to the lower column
    assert np.allclose(prune_by_mass(row, 0.85).toarray(), [[0.1, 0.5, 0.3, 0.0]])
    assert np.allclose(prune_by_mass(row, 1.0).toarray(), row.toarray())


def test_prune_works_row_by_row_and_counts_active_dims() -> None:
    """Each row is pruned against its own mass; an empty row stays empty; active_dims is the mean row size."""
    m = sp.csr_matrix(np.array([[4.0, 1.0, 0.0], [0.0, 0.0, 0.0], [1.0, 1.0, 1.0]], dtype=np.float32))
    pruned = prune_by_mass(m, 0.6)
    assert pruned.toarray().tolist() == [[4.0, 0.0, 0.0], [0.0, 0.0, 0.0], [1.0, 1.0, 0.0]]
    assert active_dims(pruned) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="rho"):
        prune_by_mass(m, 0.0)


def random_sparse(rng: np.random.Generator, n: int, v: int, density: float) -> sp.csr_matrix:
    dense = rng.random((n, v)) * (rng.random((n, v)) < density)
    return sp.csr_matrix(dense.astype(np.float32))


def test_inverted_index_equals_brute_force(tmp_path: Path) -> None:
    """Top-k ids and scores from the inverted index equal the exact q . d ranking, also after save/load."""
    rng = np.random.default_rng(0)
    docs, queries = random_sparse(rng, 300, 80, 0.08), random_sparse(rng, 25, 80, 0.1)
    index = InvertedIndex.build(docs)
    scores, ids = index.search(queries, k=10)
    ref_scores, ref_ids = brute_force_search(queries, docs, k=10)
    assert np.array_equal(ids, ref_ids)
    assert np.allclose(scores, ref_scores, rtol=1e-5)
    index.save(tmp_path / "ix")
    again = InvertedIndex.load(tmp_path / "ix")
    assert np.array_equal(again.search(queries, k=10)[1], ids)
    assert index.nbytes == 81 * 8 + docs.nnz * 8  # int64 offsets, int32 doc ids + float32 weights


def test_inverted_index_returns_no_documents_without_shared_terms() -> None:
    """A query sharing no term with any document gets only -1 ids; one shared term ranks just its documents."""
    docs = sp.csr_matrix(np.array([[1.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, 3.0, 0.0]], dtype=np.float32))
    index = InvertedIndex.build(docs)
    _, ids = index.search(sp.csr_matrix(np.array([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0]], dtype=np.float32)), k=3)
    assert ids.tolist() == [[-1, -1, -1], [2, 1, -1]]

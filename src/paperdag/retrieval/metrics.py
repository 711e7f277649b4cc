"""Retrieval metrics in numpy: relevance (recall@k, nDCG@k, MRR) over id arrays, diversity over attribute labels.

Conventions: `retrieved` is an int array (m, k') of ids per query, best first, -1 for an empty slot; ids in a row
are counted once (a repeat is no second hit). Relevance metrics return the mean over queries; the *_per_query
variants return float64 (m,), NaN where a query has no relevant ids (recall, nDCG undefined); means skip NaNs.
Diversity metrics take the attribute labels of one result set (k,) -> float, or of many (m, k) -> (m,);
labels are non-negative ints and a negative label marks an empty slot (see `labels_at`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

Relevant = Sequence[set[int]] | Sequence[Sequence[int]] | np.ndarray  # per query: relevant ids; arrays -1 padded
Relevance = Sequence[Mapping[int, float]] | Relevant  # per query: {id: graded gain}, or relevant ids (gain 1)


def padded(lists: Sequence[Sequence[float]], fill: float, width: int | None = None, dtype: type = np.float64) -> np.ndarray:
    """Ragged per-query lists (ids, scores) as one (m, width) array, `fill` in the empty slots (width: the longest
    list); a longer list is cut at width."""
    width = width or max(len(x) for x in lists)
    out = np.full((len(lists), width), fill, dtype=dtype)
    for i, x in enumerate(lists):
        out[i, : min(len(x), width)] = x[:width]
    return out


def _retrieved(retrieved: np.ndarray, k: int | None) -> np.ndarray:
    r = np.asarray(retrieved)
    if r.ndim == 1:
        r = r[None, :]
    if r.ndim != 2 or (r.size and not np.issubdtype(r.dtype, np.integer)):
        raise ValueError(f"retrieved must be an int array (m, k) of ids; got shape {r.shape}, dtype {r.dtype}")
    if k is not None:
        if k < 1:
            raise ValueError(f"k must be >= 1; got {k}")
        r = r[:, :k]
    return r.astype(np.int64, copy=False)


def _first_occurrence(r: np.ndarray) -> np.ndarray:
    """(m, k) bool: the slot holds a real id (>= 0) not seen earlier in its row."""
    order = np.argsort(r, axis=1, kind="stable")
    s = np.take_along_axis(r, order, axis=1)
    first_sorted = np.ones_like(s, dtype=bool)
    first_sorted[:, 1:] = s[:, 1:] != s[:, :-1]
    first = np.empty_like(first_sorted)
    np.put_along_axis(first, order, first_sorted, axis=1)
    return first & (r >= 0)


def _relevant_lists(relevant: Relevant, m: int) -> list[np.ndarray]:
    """Per query, the distinct relevant ids as an int64 array (negative ids, i.e. padding, dropped)."""
    if isinstance(relevant, np.ndarray) and relevant.ndim == 1 and m == 1:
        relevant = relevant[None, :]
    if len(relevant) != m:
        raise ValueError(f"relevant has {len(relevant)} entries for {m} queries: give one set of relevant ids per query")
    out = []
    for rel in relevant:
        a = np.fromiter(rel, dtype=np.int64) if isinstance(rel, (set, frozenset)) else np.asarray(rel, dtype=np.int64)
        a = np.unique(a.ravel())
        out.append(a[a >= 0])
    return out


def _hits(r: np.ndarray, relevant: list[np.ndarray]) -> np.ndarray:
    """(m, k) bool: slot j of query i holds a relevant id for the first time in the row."""
    m, k = r.shape
    row_rel = np.repeat(np.arange(m, dtype=np.int64), [len(a) for a in relevant])
    rel = np.concatenate(relevant) if relevant else np.zeros(0, dtype=np.int64)
    # one key per (query, id) pair; ids are shifted by 1 so that -1 padding stays distinct
    span = int(max(r.max(initial=-1), rel.max(initial=-1))) + 2
    keys_ret = np.arange(m, dtype=np.int64)[:, None] * span + (r + 1)
    keys_rel = row_rel * span + (rel + 1)
    return np.isin(keys_ret, keys_rel) & _first_occurrence(r)


def recall_at_k_per_query(retrieved: np.ndarray, relevant: Relevant, k: int) -> np.ndarray:
    """recall@k_i = |top-k_i ∩ R_i| / |R_i| per query; NaN where R_i is empty.

    For ANN recall against exact search pass the exact top-k ids as `relevant` ((m, k) array).
    """
    r = _retrieved(retrieved, k)
    rel = _relevant_lists(relevant, r.shape[0])
    n_rel = np.array([len(a) for a in rel], dtype=np.float64)
    found = _hits(r, rel).sum(axis=1).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n_rel > 0, found / n_rel, np.nan)


def recall_at_k(retrieved: np.ndarray, relevant: Relevant, k: int) -> float:
    """Mean over queries of recall@k (see recall_at_k_per_query); NaN when no query has relevant ids."""
    return _nanmean(recall_at_k_per_query(retrieved, relevant, k))


def _gains(r: np.ndarray, relevance: Relevance) -> tuple[np.ndarray, list[np.ndarray]]:
    """Gain of each retrieved slot (m, k) (0 for a repeat or padding) and each query's gains over all its ids."""
    m = r.shape[0]
    if len(relevance) == m and m and all(isinstance(g, Mapping) for g in relevance):
        first = _first_occurrence(r)
        gains = np.array([[float(g.get(int(i), 0.0)) for i in row] for row, g in zip(r, relevance)],
                         dtype=np.float64).reshape(r.shape)
        gains[~first] = 0.0
        ideal = [np.array([v for v in g.values() if v > 0], dtype=np.float64) for g in relevance]
        return gains, ideal
    rel = _relevant_lists(relevance, m)
    return _hits(r, rel).astype(np.float64), [np.ones(len(a)) for a in rel]


def ndcg_at_k_per_query(retrieved: np.ndarray, relevance: Relevance, k: int) -> np.ndarray:
    """nDCG@k_i = DCG@k_i / IDCG@k_i per query, with DCG@k = sum_{j=1..k} g_j / log2(j + 1).

    g_j is the gain of the id at rank j: relevance[i][id] for graded relevance (a dict per query, missing ids
    gain 0), 1 for a relevant id under binary relevance (a set or -1 padded array per query).
    IDCG@k is the DCG@k of the query's gains sorted in decreasing order; NaN where it is 0 (no positive gain).
    """
    r = _retrieved(retrieved, k)
    gains, ideal = _gains(r, relevance)
    discount = 1.0 / np.log2(np.arange(2, r.shape[1] + 2))  # (k,)
    dcg = gains @ discount
    idcg = np.array([np.sort(g)[::-1][:k] @ discount[: min(k, len(g))] if len(g) else 0.0 for g in ideal])
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(idcg > 0, dcg / idcg, np.nan)


def ndcg_at_k(retrieved: np.ndarray, relevance: Relevance, k: int) -> float:
    """Mean over queries of nDCG@k (see ndcg_at_k_per_query); NaN when no query has a positive gain."""
    return _nanmean(ndcg_at_k_per_query(retrieved, relevance, k))


def reciprocal_rank(retrieved: np.ndarray, relevant: Relevant, k: int | None = None) -> np.ndarray:
    """RR_i = 1 / rank of the first relevant id in row i (ranks from 1), 0 when none is in the (top-k) row."""
    r = _retrieved(retrieved, k)
    hits = _hits(r, _relevant_lists(relevant, r.shape[0]))
    any_hit = hits.any(axis=1)
    return np.where(any_hit, 1.0 / (hits.argmax(axis=1) + 1.0), 0.0)


def mrr(retrieved: np.ndarray, relevant: Relevant, k: int | None = None) -> float:
    """Mean reciprocal rank: MRR = (1/m) sum_i RR_i (see reciprocal_rank)."""
    return float(reciprocal_rank(retrieved, relevant, k).mean()) if len(retrieved) else float("nan")


def _nanmean(x: np.ndarray) -> float:
    return float(np.nanmean(x)) if np.any(~np.isnan(x)) else float("nan")


# ---- diversity of a result set, from the attribute labels of its items ----


def labels_at(ids: np.ndarray, attributes: np.ndarray) -> np.ndarray:
    """attributes[ids] with -1 where ids is -1 (an empty slot): the input the diversity metrics expect."""
    ids = np.asarray(ids, dtype=np.int64)
    attrs = np.asarray(attributes)
    return np.where(ids >= 0, attrs[np.maximum(ids, 0)], -1)


def _label_counts(labels: np.ndarray) -> tuple[np.ndarray, np.ndarray, int, bool]:
    """Counts of each distinct label per row: (row of each count, count), number of rows, whether input was 1-D."""
    a = np.asarray(labels)
    single = a.ndim == 1
    if single:
        a = a[None, :]
    if a.ndim != 2 or (a.size and not np.issubdtype(a.dtype, np.integer)):
        raise ValueError(f"labels must be an int array (k,) or (m, k); got shape {a.shape}, dtype {a.dtype}")
    m, k = a.shape
    s = np.sort(a.astype(np.int64, copy=False), axis=1)
    starts = np.ones((m, k), dtype=bool)
    starts[:, 1:] = s[:, 1:] != s[:, :-1]
    run = np.cumsum(starts.ravel()) - 1  # run number of each slot, runs never span rows (each row starts one)
    counts = np.bincount(run, minlength=int(starts.sum()))
    run_row = np.repeat(np.arange(m), starts.sum(axis=1))
    real = s[starts] >= 0  # a negative label is an empty slot, not an attribute
    return run_row[real], counts[real].astype(np.float64), m, single


def _per_row(values: np.ndarray, rows: np.ndarray, m: int) -> np.ndarray:
    return np.bincount(rows, weights=values, minlength=m)


def _shares(labels: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, bool]:
    """p_l = n_l / n per (row, label), the row of each, n per row."""
    rows, counts, m, single = _label_counts(labels)
    n = _per_row(counts, rows, m)
    return counts / n[rows], rows, n, m, single


def _out(x: np.ndarray, single: bool) -> np.ndarray | float:
    return float(x[0]) if single else x


def attribute_entropy(labels: np.ndarray, normalize: bool = False,
                      num_attributes: int | None = None) -> np.ndarray | float:
    """Shannon entropy of the attribute shares of a result set: H = -sum_l p_l ln p_l, p_l = n_l / n.

    normalize: divide by ln c, c = num_attributes (the number of attributes that exist), so 1 means uniform over
    all of them; c = 1 gives 0. Empty result sets give NaN.
    """
    p, rows, n, m, single = _shares(labels)
    h = _per_row(-p * np.log(p), rows, m)
    h = np.where(n > 0, h, np.nan)
    if normalize:
        if num_attributes is None or num_attributes < 1:
            raise ValueError("normalize=True needs num_attributes (c >= 1, the number of attribute values that exist)")
        h = h / np.log(num_attributes) if num_attributes > 1 else np.where(n > 0, 0.0, np.nan)
    return _out(h, single)


def inverse_simpson(labels: np.ndarray) -> np.ndarray | float:
    """Inverse Simpson index D = 1 / sum_l p_l^2 (the effective number of attributes); NaN for an empty set."""
    p, rows, n, m, single = _shares(labels)
    with np.errstate(divide="ignore"):
        d = 1.0 / _per_row(p * p, rows, m)
    return _out(np.where(n > 0, d, np.nan), single)


def distinct_attributes(labels: np.ndarray) -> np.ndarray | int:
    """Number of distinct attribute labels in a result set (empty slots not counted)."""
    rows, _, m, single = _label_counts(labels)
    d = np.bincount(rows, minlength=m)
    return int(d[0]) if single else d

"""AssoMem (ICLR 2026, arXiv 2510.10397): an associative memory graph for conversational recall.

The paper's pieces, in its order and symbols:

    clues        one key phrase c_s per session s (TF-IDF here); clues with cos(e_c, e_c') > delta are merged
    graph G      nodes: utterances u and (merged) clues c; edges: belonging (u -- c(session(u))) and similarity
                 between nodes of the same type with cos > gamma (weighted by the cosine)
    candidates   the utterances anchored to the top-K clues by cos(e_q, e_c)
    s_rel(q, u)  = cos(e_q, e_u)
    s_imp(q, u)  = r_u, personalised PageRank  r <- d M r + (1 - d) t,  t_u proportional to max(cos(e_q, e_u), 0) on
                   the query's `seeds` most similar utterances, t = 0 elsewhere and on clues, M the column-stochastic transition matrix of G
    s_temp(q, u) = exp(-|tau_q - tau_u| / tau_days): the query's time expression tau_q (a date, a month, or "now" =
                   the dialogue's last session) against the utterance's session date tau_u (0 when q names no time)
    fusion       CMI_k(z) = I(bin(s_k); useful | type = z) on a held-out split, bins low / medium / high;
                 w_k(z) = softmax_k(CMI_k(z) / T);  score(q, u) = sum_k w_k(type(q)) * norm(s_k(q, u))

Pure numpy / scipy / networkx: no file paths, no engine.
"""

from __future__ import annotations

import re
from datetime import date

import networkx as nx
import numpy as np
import scipy.sparse as sp

SIGNALS = ("relevance", "importance", "time")
MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
          "november", "december")
_DAY = re.compile(r"\b(\d{1,2}) (" + "|".join(MONTHS) + r") (\d{4})\b", re.IGNORECASE)
_MONTH = re.compile(r"\bin (" + "|".join(MONTHS) + r") (\d{4})\b", re.IGNORECASE)
_NOW = re.compile(r"\b(now|currently|these days|at the moment|latest)\b", re.IGNORECASE)
_SPEAKER = re.compile(r"^[^:]{1,40}: ")


# ---------------------------------------------------------------- clues


def session_clues(session_texts: list[str], terms: int) -> list[str]:
    """One clue per session: its `terms` highest TF-IDF uni/bigrams against the dialogue's other sessions, joined
    (speaker prefixes and English stop words removed). session_texts: one string per session."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    docs = [" ".join(_SPEAKER.sub("", line) for line in text.split("\n")) for text in session_texts]
    vectorizer = TfidfVectorizer(stop_words="english", ngram_range=(1, 2), sublinear_tf=True)
    x = vectorizer.fit_transform(docs)  # (sessions, vocabulary)
    vocabulary = np.asarray(vectorizer.get_feature_names_out())
    clues = []
    for i in range(x.shape[0]):
        row = x[i].toarray()[0]
        order = np.lexsort((vocabulary, -row))[:terms]  # ties broken alphabetically: deterministic
        clues.append(" ".join(vocabulary[order]))
    return clues


def merge_clues(clue_emb: np.ndarray, delta: float) -> np.ndarray:
    """Group index per clue (n,): connected components of cos(e_c, e_c') > delta (single-link merging), groups
    numbered by their first clue. clue_emb: (n, dim) unit rows."""
    n = clue_emb.shape[0]
    sim = clue_emb @ clue_emb.T  # (n, n)
    parent = list(range(n))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, j in zip(*np.nonzero(np.triu(sim > delta, 1)), strict=True):
        ri, rj = find(int(i)), find(int(j))
        if ri != rj:
            parent[max(ri, rj)] = min(ri, rj)
    roots = [find(i) for i in range(n)]
    number = {r: k for k, r in enumerate(dict.fromkeys(roots))}
    return np.asarray([number[r] for r in roots], dtype=np.int64)


def group_embeddings(clue_emb: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """(g, dim) unit mean embedding of each merged clue."""
    g = int(groups.max()) + 1
    out = np.zeros((g, clue_emb.shape[1]), dtype=np.float64)
    np.add.at(out, groups, clue_emb)
    return (out / np.linalg.norm(out, axis=1, keepdims=True)).astype(np.float32)


# ---------------------------------------------------------------- graph and importance


def build_graph(utt_emb: np.ndarray, utt_group: np.ndarray | None, group_emb: np.ndarray | None, gamma: float) -> nx.Graph:
    """G: utterance nodes 0..n-1, clue nodes n..n+g-1 ("kind" attribute). Belonging edges u -- n + utt_group[u]
    (weight 1); similarity edges between utterances, and between clues, with cos > gamma (weight = cos).
    utt_group None: the graph without clues (the ablation)."""
    n = utt_emb.shape[0]
    g = nx.Graph()
    g.add_nodes_from(range(n), kind="utterance")
    sim = utt_emb @ utt_emb.T  # (n, n)
    for i, j in zip(*np.nonzero(np.triu(sim > gamma, 1)), strict=True):
        g.add_edge(int(i), int(j), weight=float(sim[i, j]), kind="similarity")
    if utt_group is not None and group_emb is not None:
        m = group_emb.shape[0]
        g.add_nodes_from(range(n, n + m), kind="clue")
        for u, c in enumerate(utt_group):
            g.add_edge(u, n + int(c), weight=1.0, kind="belonging")
        gsim = group_emb @ group_emb.T  # (m, m)
        for i, j in zip(*np.nonzero(np.triu(gsim > gamma, 1)), strict=True):
            g.add_edge(n + int(i), n + int(j), weight=float(gsim[i, j]), kind="similarity")
    return g


def transition(graph: nx.Graph) -> tuple[sp.csr_matrix, np.ndarray]:
    """(M, dangling): M[i, j] = w_ij / sum_k w_kj over nodes 0..N-1 (column-stochastic where node j has edges);
    dangling (N,) bool marks nodes without edges."""
    nodes = list(range(graph.number_of_nodes()))
    a = nx.to_scipy_sparse_array(graph, nodelist=nodes, weight="weight", format="csr").astype(np.float64)  # (N, N)
    out = np.asarray(a.sum(axis=0)).ravel()
    dangling = out == 0
    scale = np.where(dangling, 0.0, 1.0 / np.where(dangling, 1.0, out))
    return sp.csr_matrix(a @ sp.diags(scale)), dangling


def personalised_pagerank(m: sp.csr_matrix, dangling: np.ndarray, teleport: np.ndarray, d: float,
                          iterations: int = 100, tol: float = 1e-10) -> np.ndarray:
    """r <- d (M r + (sum of dangling mass) t) + (1 - d) t for each column t of `teleport` (N, q), columns summing to
    1 (networkx.pagerank's update, the dangling mass returned to the teleport). Returns (N, q)."""
    t = np.asarray(teleport, dtype=np.float64)
    if t.ndim == 1:
        t = t[:, None]
    r = t.copy()
    for _ in range(iterations):
        new = d * (m @ r + t * r[dangling].sum(axis=0, keepdims=True)) + (1.0 - d) * t
        if np.abs(new - r).sum(axis=0).max() < tol * r.shape[0]:
            return new
        r = new
    return r


def teleport_vector(query_sims: np.ndarray, n_nodes: int, seeds: int | None = None) -> np.ndarray:
    """t (N, q): utterances proportional to max(cos, 0), clue nodes 0; with `seeds`, only each query's `seeds` most
    similar utterances teleport (HippoRAG-style seeding: the mass a near-zero cosine sends to every one of hundreds
    of utterances would otherwise settle on the best-connected chit-chat). query_sims: (n_utterances, q)."""
    s = np.maximum(np.asarray(query_sims, dtype=np.float64), 0.0)
    if seeds is not None and seeds < s.shape[0]:
        cut = -np.sort(-s, axis=0)[seeds - 1: seeds]  # (1, q) the seeds-th largest similarity
        s = np.where(s >= cut, s, 0.0)
    t = np.zeros((n_nodes, s.shape[1]))
    t[: s.shape[0]] = s
    total = t.sum(axis=0, keepdims=True)
    return np.where(total > 0, t / np.where(total > 0, total, 1.0), 1.0 / n_nodes)


# ---------------------------------------------------------------- time


def parse_time(text: str, last: date) -> tuple[date, date] | None:
    """The interval the question's time expression names: "on 3 May 2023" (a day), "in May 2023" (a month), "now" /
    "currently" (the dialogue's last session, `last`); None when it names no time."""
    if m := _DAY.search(text):
        day = date(int(m.group(3)), MONTHS.index(m.group(2).lower()) + 1, int(m.group(1)))
        return day, day
    if m := _MONTH.search(text):
        month, year = MONTHS.index(m.group(1).lower()) + 1, int(m.group(2))
        end = date(year + month // 12, month % 12 + 1, 1).toordinal() - 1
        return date(year, month, 1), date.fromordinal(end)
    if _NOW.search(text):
        return last, last
    return None


def temporal_alignment(interval: tuple[date, date] | None, utt_days: np.ndarray, tau_days: float) -> np.ndarray:
    """s_temp (n,): exp(-distance in days from the utterance's date to the interval / tau_days); 0 without one.
    utt_days: (n,) proleptic ordinals of the utterances' session dates."""
    if interval is None:
        return np.zeros(len(utt_days))
    lo, hi = interval[0].toordinal(), interval[1].toordinal()
    gap = np.maximum(lo - utt_days, 0) + np.maximum(utt_days - hi, 0)
    return np.exp(-gap / tau_days)


# ---------------------------------------------------------------- fusion by conditional mutual information


def normalise(x: np.ndarray) -> np.ndarray:
    """Min-max over one query's candidates: (x - min) / (max - min); all 0 when the candidates tie."""
    lo, hi = float(x.min()), float(x.max())
    return (x - lo) / (hi - lo) if hi > lo else np.zeros_like(x, dtype=np.float64)


def tertile_edges(values: np.ndarray) -> np.ndarray:
    """The two cut points (1/3, 2/3 quantiles) that bin a signal into low / medium / high."""
    return np.quantile(np.asarray(values, dtype=np.float64), [1 / 3, 2 / 3])


def to_bins(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """0 (low), 1 (medium), 2 (high): values <= edges[0] are low, <= edges[1] medium."""
    return np.digitize(values, edges, right=True)


def mutual_information(x: np.ndarray, y: np.ndarray) -> float:
    """I(X; Y) in nats from paired samples of two discrete variables (plug-in estimate)."""
    x, y = np.asarray(x), np.asarray(y)
    if x.size == 0:
        return 0.0
    _, xi = np.unique(x, return_inverse=True)
    _, yi = np.unique(y, return_inverse=True)
    joint = np.zeros((xi.max() + 1, yi.max() + 1))
    np.add.at(joint, (xi, yi), 1.0)
    joint /= joint.sum()
    px, py = joint.sum(axis=1, keepdims=True), joint.sum(axis=0, keepdims=True)
    nz = joint > 0
    return float((joint[nz] * np.log(joint[nz] / (px @ py)[nz])).sum())


def conditional_mi(x: np.ndarray, y: np.ndarray, z: np.ndarray) -> dict[str, float]:
    """CMI per condition value: {z: I(X; Y | Z = z)} (the paper conditions on the question type)."""
    z = np.asarray(z)
    return {str(v): mutual_information(np.asarray(x)[z == v], np.asarray(y)[z == v]) for v in sorted(set(z.tolist()))}


def fusion_weights(cmi: dict[str, float], temperature: float) -> dict[str, float]:
    """w_k = softmax_k(CMI_k / T) over the signals given (an ablation passes fewer)."""
    keys = list(cmi)
    a = np.asarray([cmi[k] for k in keys]) / temperature
    e = np.exp(a - a.max())
    return dict(zip(keys, (e / e.sum()).tolist(), strict=True))


def fuse(signals: dict[str, np.ndarray], weights: dict[str, float]) -> np.ndarray:
    """score(u) = sum_k w_k * norm(s_k(u)) over one query's candidates."""
    out = np.zeros(len(next(iter(signals.values()))))
    for k, w in weights.items():
        out += w * normalise(signals[k])
    return out

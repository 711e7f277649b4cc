"""The evaluation protocol: per dialogue (one haystack) a memory per graph setting, the paper's retriever, its
ablations and the baselines, each tuned on held-out (dev) dialogues with the same budget of settings, then ranked
on the test dialogues and timed per query. Inputs are the generator's tables and the stage's embeddings; no I/O."""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from datetime import date

import numpy as np
import polars as pl

from paperdag.methods.assomem.memory import (
    SIGNALS,
    build_graph,
    conditional_mi,
    fuse,
    fusion_weights,
    group_embeddings,
    merge_clues,
    normalise,
    parse_time,
    personalised_pagerank,
    teleport_vector,
    temporal_alignment,
    tertile_edges,
    to_bins,
    transition,
)

# every method the pipeline ranks with; FUSED share AssoMem's candidate and fusion machinery
FUSED = {"assomem": SIGNALS, "no_time": ("relevance", "importance"), "no_importance": ("relevance", "time"),
         "no_clues": SIGNALS, "equal_weights": SIGNALS}
BASELINES = ("flat_dense", "bm25", "two_stage", "pagerank_only")
METHODS = (*FUSED, *BASELINES)
TOP = 10  # ranks kept per query (the deepest cut-off evaluated)


@dataclass
class Dialogue:
    """One haystack: its utterances (uids, session index, session day, text, embeddings) and one clue per session."""

    uids: np.ndarray  # (n,)
    session: np.ndarray  # (n,) session index 0..S-1
    days: np.ndarray  # (n,) ordinal of the session date
    texts: list[str]
    emb: np.ndarray  # (n, dim)
    clue_emb: np.ndarray  # (S, dim)
    last: date
    memories: dict = field(default_factory=dict)


@dataclass
class Queries:
    qids: np.ndarray  # (q,)
    qtypes: np.ndarray  # (q,) str
    texts: list[str]
    emb: np.ndarray  # (q, dim)
    useful: list[list[int]]


@dataclass
class Memory:
    """The associative graph of one dialogue at (delta, gamma); clues=False: the graph without clue nodes."""

    groups: np.ndarray  # (S,) merged clue of each session
    group_emb: np.ndarray  # (g, dim)
    graph: object
    m: object
    dangling: np.ndarray


def dialogues(utterances: pl.DataFrame, utt_emb: np.ndarray, clues: pl.DataFrame, clue_emb: np.ndarray) -> dict[int, Dialogue]:
    """Dialogue objects of one set keyed by dialogue; embeddings are row-aligned with the frames given."""
    out = {}
    u = utterances.with_row_index("row")
    c = clues.with_row_index("row")
    for d in sorted(u["dialogue"].unique().to_list()):
        ud = u.filter(pl.col("dialogue") == d).sort("uid")
        cd = c.filter(pl.col("dialogue") == d).sort("session")
        days = np.asarray([date.fromisoformat(x).toordinal() for x in ud["date"]])
        out[d] = Dialogue(ud["uid"].to_numpy(), ud["session"].to_numpy(), days, ud["text"].to_list(),
                          utt_emb[ud["row"].to_numpy()], clue_emb[cd["row"].to_numpy()], date.fromordinal(int(days.max())))
    return out


def queries(questions: pl.DataFrame, q_emb: np.ndarray, dialogue: int) -> Queries:
    q = questions.with_row_index("row").filter(pl.col("dialogue") == dialogue)
    return Queries(q["qid"].to_numpy(), q["qtype"].to_numpy(), q["text"].to_list(), q_emb[q["row"].to_numpy()],
                   [list(x) for x in q["useful"].to_list()])


def memory(dia: Dialogue, delta: float, gamma: float, clues: bool = True) -> Memory:
    """The graph at (delta, gamma): the one attached from build_graph's tables, else built here."""
    key = (delta if clues else None, gamma, clues)
    if key not in dia.memories:
        groups = merge_clues(dia.clue_emb, delta)
        gemb = group_embeddings(dia.clue_emb, groups)
        graph = build_graph(dia.emb, groups[dia.session] if clues else None, gemb if clues else None, gamma)
        m, dangling = transition(graph)
        dia.memories[key] = Memory(groups, gemb, graph, m, dangling)
    return dia.memories[key]


def graph_tables(dias: dict[int, Dialogue], deltas: list[float], gammas: list[float]) -> tuple[list[dict], list[dict]]:
    """(edges, groups) rows of every dialogue's graph at every (delta, gamma): edges (dialogue, delta, gamma, src,
    dst, kind, weight) over local node ids (utterances 0..n-1 in uid order, clues n..), groups (dialogue, delta,
    session, group)."""
    edges, groups = [], []
    for d, dia in dias.items():
        for delta in deltas:
            for gamma in gammas:
                mem = memory(dia, delta, gamma)
                edges += [{"dialogue": d, "delta": delta, "gamma": gamma, "src": int(u), "dst": int(v), "kind": e["kind"],
                           "weight": float(e["weight"])} for u, v, e in mem.graph.edges(data=True)]
            groups += [{"dialogue": d, "delta": delta, "session": s, "group": int(c)} for s, c in enumerate(mem.groups)]
    return edges, groups


def attach_graphs(dias: dict[int, Dialogue], edges: pl.DataFrame, groups: pl.DataFrame) -> None:
    """Load build_graph's graphs into the dialogues' memories (with clues at each (delta, gamma); without clues,
    the utterance similarity edges alone, at each gamma)."""
    import networkx as nx

    for d, dia in dias.items():
        n, ed = len(dia.uids), edges.filter(pl.col("dialogue") == d)
        gd = groups.filter(pl.col("dialogue") == d)
        for (delta, gamma), part in ed.group_by(["delta", "gamma"], maintain_order=True):
            grp = gd.filter(pl.col("delta") == delta).sort("session")["group"].to_numpy()
            gemb = group_embeddings(dia.clue_emb, grp)
            for clues in (True, False):
                graph = nx.Graph()
                graph.add_nodes_from(range(n), kind="utterance")
                rows = part if clues else part.filter((pl.col("src") < n) & (pl.col("dst") < n))
                if clues:
                    graph.add_nodes_from(range(n, n + len(gemb)), kind="clue")
                graph.add_edges_from((s, t, {"kind": k, "weight": w}) for s, t, k, w in rows.select("src", "dst", "kind", "weight").iter_rows())
                m, dangling = transition(graph)
                dia.memories[(delta if clues else None, gamma, clues)] = Memory(grp, gemb, graph, m, dangling)


def signals(dia: Dialogue, mem: Memory, q: Queries, damping: float, tau_days: float, seeds: int) -> dict[str, np.ndarray]:
    """Each signal for every (utterance, query): (n, q) arrays."""
    rel = dia.emb @ q.emb.T  # (n, q)
    n_nodes = mem.m.shape[0]
    imp = personalised_pagerank(mem.m, mem.dangling, teleport_vector(rel, n_nodes, seeds), damping)[: len(dia.uids)]
    tim = np.stack([temporal_alignment(parse_time(t, dia.last), dia.days, tau_days) for t in q.texts], axis=1)
    return {"relevance": rel, "importance": imp, "time": tim}


def candidates(dia: Dialogue, mem: Memory, q: Queries, k: int | None) -> np.ndarray:
    """(n, q) bool: the utterances anchored to the query's top-k merged clues (all utterances when k is None)."""
    if k is None:
        return np.ones((len(dia.uids), len(q.qids)), dtype=bool)
    top = np.argsort(-(mem.group_emb @ q.emb.T), axis=0, kind="stable")[:k]  # (k, q)
    utt_group = mem.groups[dia.session]  # (n,)
    return (utt_group[:, None, None] == top[None]).any(axis=1)


def ranked(dia: Dialogue, score: np.ndarray, cand: np.ndarray, fallback: np.ndarray) -> np.ndarray:
    """(q, TOP) uids: candidates by score, then the other utterances by `fallback` (relevance) so every row is full."""
    n = score.shape[0]
    key = np.where(cand, 2.0 + score, np.minimum(fallback, 1.0) - 2.0)  # any candidate above any non-candidate
    order = np.argsort(-key, axis=0, kind="stable")[: min(TOP, n)]  # (TOP, q)
    return dia.uids[order].T


# ---------------------------------------------------------------- the fused retrievers


def fit_cmi(sigs: list[dict[str, np.ndarray]], cands: list[np.ndarray], qs: list[Queries], uids: list[np.ndarray]) -> dict[str, dict[str, float]]:
    """CMI_k(z) = I(bin(s_k); useful | type z) over the dev queries' candidates (per-query normalised signals,
    tertile bins fitted on the pooled dev values). Returns {type: {signal: CMI}}."""
    pooled: dict[str, list] = {k: [] for k in SIGNALS}
    useful, qtype = [], []
    for sig, cand, q, ids in zip(sigs, cands, qs, uids, strict=True):
        for j in range(len(q.qids)):
            c = cand[:, j]
            for k in SIGNALS:
                pooled[k].append(normalise(sig[k][c, j]))
            useful.append(np.isin(ids[c], q.useful[j]))
            qtype.append(np.full(int(c.sum()), q.qtypes[j]))
    y, z = np.concatenate(useful), np.concatenate(qtype)
    out: dict[str, dict[str, float]] = {}
    for k in SIGNALS:
        x = np.concatenate(pooled[k])
        for t, v in conditional_mi(to_bins(x, tertile_edges(x)), y, z).items():
            out.setdefault(t, {})[k] = v
    return out


def fused_ranking(method: str, dia: Dialogue, sig: dict[str, np.ndarray], cand: np.ndarray, q: Queries,
                  cmi: dict[str, dict[str, float]], temperature: float) -> np.ndarray:
    """(q, TOP) uids for one of FUSED: weights softmax(CMI / T) over its signals (1/3 each for equal_weights)."""
    used = FUSED[method]
    score = np.zeros(cand.shape)
    for j, t in enumerate(q.qtypes):
        w = ({k: 1 / len(used) for k in used} if method == "equal_weights"
             else fusion_weights({k: cmi[str(t)][k] for k in used}, temperature))
        c = cand[:, j]
        score[c, j] = fuse({k: sig[k][c, j] for k in used}, w)
    return ranked(dia, score, cand, sig["relevance"])


# ---------------------------------------------------------------- baselines


def flat_dense(dia: Dialogue, q: Queries) -> np.ndarray:
    """MiniLM + a faiss flat inner-product index over the dialogue's utterances."""
    from paperdag.retrieval import AnnIndex

    index = AnnIndex.build(dia.emb, kind="flat", metric="ip")
    _, ids = index.search(q.emb, min(TOP, len(dia.uids)))  # (q, TOP)
    return dia.uids[ids]


def bm25(dia: Dialogue, q: Queries, k1: float, b: float) -> np.ndarray:
    """BM25 (bm25s, Lucene variant) over the dialogue's utterances; queries sharing no term rank by dense relevance."""
    from paperdag.retrieval import BM25Index

    index = BM25Index.build(dia.texts, k1=k1, b=b)
    _, ids = index.search(q.texts, len(dia.uids))
    out = np.empty((len(q.qids), min(TOP, len(dia.uids))), dtype=dia.uids.dtype)
    rel = dia.emb @ q.emb.T
    for j in range(len(q.qids)):
        hit = ids[j][ids[j] >= 0][: out.shape[1]]
        rest = np.argsort(-rel[:, j], kind="stable")
        rest = rest[~np.isin(rest, hit)]
        out[j] = dia.uids[np.concatenate([hit, rest])[: out.shape[1]]]
    return out


def two_stage(dia: Dialogue, q: Queries, sessions: int, alpha: float) -> np.ndarray:
    """Session-then-utterance dense retrieval: sessions by cos(q, mean utterance embedding), the top `sessions`
    kept, their utterances by cos(q, u) + alpha * cos(q, session)."""
    n_s = int(dia.session.max()) + 1
    sess = np.zeros((n_s, dia.emb.shape[1]))
    np.add.at(sess, dia.session, dia.emb)
    sess /= np.linalg.norm(sess, axis=1, keepdims=True)
    ssim = sess @ q.emb.T  # (S, q)
    top = np.argsort(-ssim, axis=0, kind="stable")[:sessions]
    cand = (dia.session[:, None, None] == top[None]).any(axis=1)  # (n, q)
    rel = dia.emb @ q.emb.T
    return ranked(dia, (rel + alpha * ssim[dia.session] + 2.0) / 4.0, cand, rel)


def pagerank_only(dia: Dialogue, mem: Memory, q: Queries, damping: float, seeds: int) -> np.ndarray:
    """HippoRAG-style: every utterance ranked by its personalised PageRank (teleport = query similarity)."""
    rel = dia.emb @ q.emb.T
    imp = personalised_pagerank(mem.m, mem.dangling, teleport_vector(rel, mem.m.shape[0], seeds), damping)[: len(dia.uids)]
    return ranked(dia, imp / max(float(imp.max()), 1e-30), np.ones_like(imp, dtype=bool), rel)


# ---------------------------------------------------------------- tuning on dev, ranking on test


@dataclass(frozen=True)
class Grids:
    """The settings each method may try on the dev dialogues (each grid at most `budget` settings)."""

    delta: list[float]
    gamma: list[float]
    k: list[int]
    temperature: list[float]
    damping: float  # AssoMem's PageRank damping d (fixed, as in the paper)
    tau_days: float  # temporal kernel width
    seeds: int  # utterances each query teleports to (PageRank seeds)
    pagerank_damping: list[float]
    bm25_k1: list[float]
    bm25_b: list[float]
    two_stage_sessions: list[int]
    two_stage_alpha: list[float]
    budget: int


def grids_from(settings: object, graphs: pl.DataFrame) -> Grids:
    """The Grids of the fit_fusion params `settings` (any object with Grids' fields but delta and gamma), delta and
    gamma being those build_graph built graphs at."""
    fields = [f for f in Grids.__dataclass_fields__ if f not in ("delta", "gamma")]
    return Grids(delta=sorted(graphs["delta"].unique().to_list()), gamma=sorted(graphs["gamma"].unique().to_list()),
                 **{f: getattr(settings, f) for f in fields})


def split_memories(utterances: pl.DataFrame, questions: pl.DataFrame, embeddings: dict, clues: pl.DataFrame,
                   graphs: pl.DataFrame, clue_groups: pl.DataFrame, set_name: str, split: str) -> tuple[dict[int, Dialogue], dict[int, Queries]]:
    """The dialogues of one set's split (dev or test) with build_graph's graphs attached, and their queries."""
    u_rows, c_rows = (utterances["set"] == set_name).to_numpy(), (clues["set"] == set_name).to_numpy()
    q = questions.filter(pl.col("set") == set_name)
    q_emb = np.asarray(embeddings["questions"])[(questions["set"] == set_name).to_numpy()]
    dias = dialogues(utterances.filter(u_rows), np.asarray(embeddings["utterances"])[u_rows], clues.filter(c_rows),
                     np.asarray(embeddings["clues"])[c_rows])
    keep = sorted(q.filter(pl.col("split") == split)["dialogue"].unique().to_list())
    dias = {d: dias[d] for d in keep}
    attach_graphs(dias, graphs.filter(pl.col("set") == set_name), clue_groups.filter(pl.col("set") == set_name))
    return dias, {d: queries(q, q_emb, d) for d in keep}


def grid(method: str, g: Grids) -> list[dict]:
    """The settings `method` tries; raises when a grid is larger than the shared budget."""
    axes: dict[str, list] = {
        "assomem": {"delta": g.delta, "gamma": g.gamma, "k": g.k, "temperature": g.temperature},
        "no_time": {"delta": g.delta, "gamma": g.gamma, "k": g.k, "temperature": g.temperature},
        "no_importance": {"delta": g.delta, "gamma": g.gamma, "k": g.k, "temperature": g.temperature},
        "no_clues": {"gamma": g.gamma, "temperature": g.temperature},
        "equal_weights": {"delta": g.delta, "gamma": g.gamma, "k": g.k},
        "flat_dense": {},
        "bm25": {"k1": g.bm25_k1, "b": g.bm25_b},
        "two_stage": {"sessions": g.two_stage_sessions, "alpha": g.two_stage_alpha},
        "pagerank_only": {"delta": g.delta, "gamma": g.gamma, "damping": g.pagerank_damping},
    }[method]
    out = [dict(zip(axes, values, strict=True)) for values in itertools.product(*axes.values())]
    if len(out) > g.budget:
        raise ValueError(f"assomem tuning: {method} would try {len(out)} settings > fit_fusion.budget = {g.budget} "
                         "(every method gets the same budget); shrink its grid")
    return out


def run_method(method: str, setting: dict, dias: dict[int, Dialogue], qs: dict[int, Queries], g: Grids,
               cmi: dict[str, dict[str, float]] | None = None) -> tuple[np.ndarray, np.ndarray, dict]:
    """(qids (Q,), uids (Q, TOP), cmi) over the given dialogues; FUSED methods fit the CMI on these dialogues when
    `cmi` is None (dev) and use the given one otherwise (test)."""
    outs, ids = [], []
    if method in FUSED:
        clues = method != "no_clues"
        k = setting.get("k") if clues else None
        parts = []
        for d, dia in dias.items():
            mem = memory(dia, setting.get("delta", 1.0), setting["gamma"], clues)
            parts.append((dia, signals(dia, mem, qs[d], g.damping, g.tau_days, g.seeds), candidates(dia, mem, qs[d], k), qs[d]))
        if cmi is None:
            cmi = fit_cmi([p[1] for p in parts], [p[2] for p in parts], [p[3] for p in parts], [p[0].uids for p in parts])
        for dia, sig, cand, q in parts:
            outs.append(fused_ranking(method, dia, sig, cand, q, cmi, setting.get("temperature", 1.0)))
            ids.append(q.qids)
    else:
        for d, dia in dias.items():
            if method == "flat_dense":
                outs.append(flat_dense(dia, qs[d]))
            elif method == "bm25":
                outs.append(bm25(dia, qs[d], setting["k1"], setting["b"]))
            elif method == "two_stage":
                outs.append(two_stage(dia, qs[d], setting["sessions"], setting["alpha"]))
            else:
                outs.append(pagerank_only(dia, memory(dia, setting["delta"], setting["gamma"]), qs[d], setting["damping"], g.seeds))
            ids.append(qs[d].qids)
    return np.concatenate(ids), np.concatenate(outs), cmi or {}


def recall6(uids: np.ndarray, qids: np.ndarray, useful: dict[int, list[int]]) -> float:
    from paperdag.retrieval import recall_at_k

    return recall_at_k(uids, [useful[int(i)] for i in qids], 6)


def tune(method: str, dias: dict[int, Dialogue], qs: dict[int, Queries], g: Grids) -> dict:
    """The setting with the best dev R@6 (first in grid order on ties), its CMI, and every setting's dev R@6."""
    useful = {int(i): u for q in qs.values() for i, u in zip(q.qids, q.useful, strict=True)}
    tried = []
    for setting in grid(method, g):
        qids, uids, cmi = run_method(method, setting, dias, qs, g)
        tried.append({"setting": setting, "dev_r6": recall6(uids, qids, useful), "cmi": cmi})
    best = max(range(len(tried)), key=lambda i: (tried[i]["dev_r6"], -i))
    return {"setting": tried[best]["setting"], "cmi": tried[best]["cmi"], "dev_r6": tried[best]["dev_r6"],
            "tried": [{"setting": t["setting"], "dev_r6": t["dev_r6"]} for t in tried]}


def candidate_recall(dias: dict[int, Dialogue], qs: dict[int, Queries], setting: dict) -> float:
    """Share of useful utterances inside AssoMem's clue candidates at `setting` (the graph can reach the evidence)."""
    hit = total = 0
    for d, dia in dias.items():
        cand = candidates(dia, memory(dia, setting["delta"], setting["gamma"]), qs[d], setting["k"])
        for j, useful in enumerate(qs[d].useful):
            hit += int(np.isin(useful, dia.uids[cand[:, j]]).sum())
            total += len(useful)
    return hit / max(total, 1)


def timed_assomem(dia: Dialogue, q: Queries, setting: dict, cmi: dict, g: Grids) -> list[float]:
    """Seconds per query for AssoMem answering one query at a time (graph built beforehand, as an index is)."""
    mem = memory(dia, setting["delta"], setting["gamma"])
    out = []
    for j in range(len(q.qids)):
        one = Queries(q.qids[j: j + 1], q.qtypes[j: j + 1], q.texts[j: j + 1], q.emb[j: j + 1], q.useful[j: j + 1])
        start = time.perf_counter()
        sig = signals(dia, mem, one, g.damping, g.tau_days, g.seeds)
        fused_ranking("assomem", dia, sig, candidates(dia, mem, one, setting["k"]), one, cmi, setting["temperature"])
        out.append(time.perf_counter() - start)
    return out


def timed_flat(dia: Dialogue, q: Queries) -> list[float]:
    """Seconds per query for a faiss flat search of one query (index built beforehand)."""
    from paperdag.retrieval import AnnIndex

    index = AnnIndex.build(dia.emb, kind="flat", metric="ip")
    out = []
    for j in range(len(q.qids)):
        start = time.perf_counter()
        index.search(q.emb[j: j + 1], min(TOP, len(dia.uids)))
        out.append(time.perf_counter() - start)
    return out


def subgraph_example(utterances: pl.DataFrame, questions: pl.DataFrame, rankings: pl.DataFrame, graphs: pl.DataFrame,
                     clue_groups: pl.DataFrame, clues: pl.DataFrame, setting: dict) -> dict:
    """The arguments of figures.example_subgraph for the first chat test question AssoMem answers within its top 6
    (else the first): its dialogue's graph at AssoMem's setting, the clues its top-6 and its evidence belong to."""
    import networkx as nx

    q = questions.filter((pl.col("set") == "chat") & (pl.col("split") == "test")).sort("qid")
    r = rankings.filter((pl.col("method") == "assomem") & (pl.col("set") == "chat")).sort("rank")
    top = {i: part["uid"].to_list() for (i,), part in r.group_by(["qid"])}
    row = next((x for x in q.iter_rows(named=True) if set(x["useful"]) & set(top[x["qid"]][:6])), q.row(0, named=True))
    u = utterances.filter((pl.col("set") == "chat") & (pl.col("dialogue") == row["dialogue"])).sort("uid")
    local = {uid: i for i, uid in enumerate(u["uid"].to_list())}
    n = u.height
    e = graphs.filter((pl.col("set") == "chat") & (pl.col("dialogue") == row["dialogue"]) & (pl.col("delta") == setting["delta"])
                      & (pl.col("gamma") == setting["gamma"]))
    graph = nx.Graph()
    graph.add_edges_from((s, t, {"kind": k, "weight": w}) for s, t, k, w in e.select("src", "dst", "kind", "weight").iter_rows())
    groups = (clue_groups.filter((pl.col("set") == "chat") & (pl.col("dialogue") == row["dialogue"]) & (pl.col("delta") == setting["delta"]))
              .sort("session")["group"].to_list())
    ranked_local = [local[x] for x in top[row["qid"]]]
    sessions = u["session"].to_list()
    matched = sorted({n + groups[sessions[i]] for i in ranked_local[:6] + [local[x] for x in row["useful"]]})
    text = clues.filter((pl.col("set") == "chat") & (pl.col("dialogue") == row["dialogue"])).sort("session")["clue"].to_list()
    labels = dict(enumerate(u["text"].to_list()))
    labels |= {n + g: "clue: " + text[s] for s, g in reversed(list(enumerate(groups)))}
    return {"graph": graph, "n_utterances": n, "labels": labels, "useful": {local[x] for x in row["useful"]},
            "ranked": ranked_local, "matched": matched, "question": row["text"]}

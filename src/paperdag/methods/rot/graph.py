"""Retrieval-of-Thought (RoT, ICLR 2026, arXiv 2509.21743): the thought graph and the reward-guided traversal that
assembles a dynamic template for a query. Pure numpy on given embeddings; no I/O.

Graph (paper section 3): a node per step (t, i) of every stored solution template t;
  sequential edge (t, i) -> (t, i + 1), weight 1;
  semantic edge u <-> v (both directions) when g(u, v) = (cos(e_u, e_v) + 1) / 2 >= tau (tau = 0.85), weight g.
Start node: s_0 = argmax_v alpha * cos(q, e_v) + (1 - alpha) * 1[v is a first step]   (alpha = 0.8).
Traversal from the current node c over its unvisited successors v:
  r(v) = w_sim * cos(q, e_v) + w_seq * 1[v is c's sequential child]       (w_sim = 0.3, w_seq = 0.7, official code)
  stop when max r(v) < theta and that node's cos(q, e_v) < theta (theta = 0.8), at L_max = 8 steps, or when no
  unvisited successor is left.
sim(q, v) is the cosine of the query with node v's step text; which view of the query (the whole problem, as the
official code, its opening clause, or the best of its clauses) each rule uses is config.start_query / step_query
(query.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

SEQUENTIAL, SEMANTIC = "sequential", "semantic"


@dataclass(frozen=True)
class RoTConfig:
    tau: float = 0.85  # semantic-edge threshold on g = (cos + 1) / 2
    alpha: float = 0.8  # start node: weight of query similarity against the first-step indicator
    w_sim: float = 0.3  # traversal reward: weight of query similarity
    w_seq: float = 0.7  # traversal reward: weight of "is the sequential child"
    theta: float = 0.8  # stop threshold on the best candidate's similarity and reward
    max_steps: int = 8  # L_max: the longest template
    start_query: Literal["problem", "opening", "clauses"] = "problem"  # the query the start rule's sim compares with
    step_query: Literal["problem", "opening", "clauses"] = "problem"  # the query the traversal's sim compares with


@dataclass
class ThoughtGraph:
    """Nodes 0..n-1 in order of (template, position); edges[u] = {v: (kind, weight)}."""

    template: np.ndarray  # (n,) template id of each node
    position: np.ndarray  # (n,) step index i inside its template
    texts: list[str]
    edges: list[dict[int, tuple[str, float]]] = field(default_factory=list)

    def sequential_child(self, u: int) -> int | None:
        return next((v for v, (kind, _) in self.edges[u].items() if kind == SEQUENTIAL), None)

    def edge_rows(self) -> list[dict[str, object]]:
        return [{"source": u, "target": v, "kind": kind, "weight": w} for u, out in enumerate(self.edges) for v, (kind, w) in sorted(out.items())]


def build_graph(templates: list[list[str]], embeddings: np.ndarray, config: RoTConfig = RoTConfig()) -> ThoughtGraph:
    """The thought graph of `templates` (each a list of step texts); embeddings: (n, d) unit rows, one per step in
    order (template 0's steps, then template 1's, ...). A pair both sequential and semantic keeps the sequential edge
    (weight 1): the traversal must still recognise the sequential child."""
    tids = np.array([t for t, steps in enumerate(templates) for _ in steps], dtype=np.int64)
    pos = np.array([i for steps in templates for i in range(len(steps))], dtype=np.int64)
    texts = [s for steps in templates for s in steps]
    n = len(texts)
    if embeddings.shape[0] != n:
        raise ValueError(f"build_graph: {embeddings.shape[0]} embeddings for {n} steps; encode every step once, in order")
    edges: list[dict[int, tuple[str, float]]] = [{} for _ in range(n)]
    for u in range(n - 1):
        if tids[u] == tids[u + 1]:
            edges[u][u + 1] = (SEQUENTIAL, 1.0)
    g = (embeddings @ embeddings.T + 1.0) / 2.0  # (n, n) g(u, v) = (cos + 1) / 2
    for u, v in zip(*np.nonzero(np.triu(g >= config.tau, k=1)), strict=True):
        for a, b in ((int(u), int(v)), (int(v), int(u))):
            if b not in edges[a]:
                edges[a][b] = (SEMANTIC, float(g[u, v]))
    return ThoughtGraph(tids, pos, texts, edges)


def start_node(sim: np.ndarray, graph: ThoughtGraph, config: RoTConfig = RoTConfig()) -> int:
    """s_0 = argmax alpha * cos(q, e_v) + (1 - alpha) * 1[position(v) = 0]; the lowest index on a tie."""
    score = config.alpha * sim + (1.0 - config.alpha) * (graph.position == 0)  # (n,)
    return int(np.argmax(score))


@dataclass(frozen=True)
class Path:
    nodes: list[int]
    stop: str  # "threshold" | "max_steps" | "no_successor"


def traverse(sim: np.ndarray, graph: ThoughtGraph, config: RoTConfig = RoTConfig(), start_sim: np.ndarray | None = None) -> Path:
    """The dynamic template's node path for a query whose cosine similarity to every node is `sim` (n,) in the
    traversal's reward and stop rule and `start_sim` (n,; default `sim`) in the start rule."""
    path = [start_node(sim if start_sim is None else start_sim, graph, config)]
    while len(path) < config.max_steps:
        current = path[-1]
        candidates = [v for v in graph.edges[current] if v not in path]
        if not candidates:
            return Path(path, "no_successor")
        child = graph.sequential_child(current)
        reward = [config.w_sim * sim[v] + config.w_seq * (v == child) for v in candidates]  # r(v)
        best = int(np.argmax(reward))  # first candidate in edge order on a tie
        if sim[candidates[best]] < config.theta and reward[best] < config.theta:
            return Path(path, "threshold")
        path.append(candidates[best])
    return Path(path, "max_steps")


def graph_from_rows(nodes: list[dict], edges: list[dict]) -> ThoughtGraph:
    """The graph build_graph made, back from its node rows (node, template, position, text, in node order) and
    edge rows (source, target, kind, weight)."""
    if [n["node"] for n in nodes] != list(range(len(nodes))):
        raise ValueError("graph_from_rows: node rows must be numbered 0..n-1 in order (rerun rot:build_graph)")
    out: list[dict[int, tuple[str, float]]] = [{} for _ in nodes]
    for e in edges:
        out[int(e["source"])][int(e["target"])] = (str(e["kind"]), float(e["weight"]))
    return ThoughtGraph(np.array([n["template"] for n in nodes], dtype=np.int64), np.array([n["position"] for n in nodes], dtype=np.int64),
                        [str(n["text"]) for n in nodes], out)

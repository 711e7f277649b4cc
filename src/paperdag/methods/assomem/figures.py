"""AssoMem's plots: Recall@k per method (mean over replicates, min-max band), the fitted fusion weights per
question type, and one drawn example subgraph (a test question's matched clues and candidate utterances)."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from paperdag.methods.assomem.evaluation import KS
from paperdag.methods.assomem.memory import SIGNALS

STYLE = {"assomem": ("tab:red", "-"), "no_time": ("tab:orange", "--"), "no_importance": ("tab:olive", "--"),
         "no_clues": ("tab:pink", "--"), "equal_weights": ("tab:purple", ":"), "flat_dense": ("tab:blue", "-"),
         "bm25": ("tab:green", "-"), "two_stage": ("tab:cyan", "-"), "pagerank_only": ("tab:gray", "-")}


def recall_curves(tables: list[list[dict]], set_names: list[str]) -> Figure:
    """A panel per set: Recall@k for k in KS per method, the mean over replicates and a min-max band."""
    fig = Figure(figsize=(5 * len(set_names), 3.6), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, len(set_names)))
    for ax, st in zip(axes, set_names, strict=True):
        for method, (color, line) in STYLE.items():
            vals = np.asarray([[next(r[f"r{k}"] for r in t if r["set"] == st and r["method"] == method and r["qtype"] == "all")
                                for k in KS] for t in tables])  # (replicates, len(KS))
            ax.plot(KS, vals.mean(axis=0), line, color=color, label=method, marker="o", ms=3)
            ax.fill_between(KS, vals.min(axis=0), vals.max(axis=0), color=color, alpha=0.12)
        ax.set_xticks(KS)
        ax.set_xlabel("k")
        ax.set_ylabel("Recall@k (%)")
        ax.set_title(f"{st} set (test dialogues)", fontsize=9, loc="left")
        ax.grid(alpha=0.3)
    axes[-1].legend(fontsize=7, loc="upper left", ncols=2)
    return fig


def weight_bars(weights: list[dict[str, dict[str, float]]]) -> Figure:
    """Per question type, AssoMem's weight of each signal (mean over replicates, a dot per replicate)."""
    fig = Figure(figsize=(6, 3.2), layout="constrained")
    ax = fig.subplots()
    types = sorted(weights[0])
    width = 0.8 / len(SIGNALS)
    for i, k in enumerate(SIGNALS):
        vals = np.asarray([[w[t][k] for t in types] for w in weights])
        x = np.arange(len(types)) + (i - 1) * width
        ax.bar(x, vals.mean(axis=0), width, label=k, alpha=0.8)
        for row in vals:
            ax.scatter(x, row, color="black", s=8, zorder=3)
    ax.set_xticks(range(len(types)), types)
    ax.set_ylabel("fusion weight softmax(CMI / T)")
    ax.set_ylim(0, 1)
    ax.legend(fontsize=8)
    ax.set_title("fitted on the dev dialogues (chat set)", fontsize=9, loc="left")
    return fig


def example_subgraph(graph, n_utterances: int, labels: dict[int, str], useful: set[int], ranked: list[int],
                     matched: list[int], question: str) -> Figure:
    """The matched clue nodes, their utterances (useful in green, AssoMem's top-6 circled) and the similarity
    edges among them. Node ids are the graph's local ids (utterances < n_utterances <= clues)."""
    import networkx as nx

    keep = set(matched)
    for c in matched:
        keep |= {u for u in graph.neighbors(c) if u < n_utterances}
    sub = graph.subgraph(sorted(keep))
    pos = nx.spring_layout(sub, seed=0, weight="weight")
    fig = Figure(figsize=(9, 6.5), layout="constrained")
    ax = fig.subplots()
    colors = ["gold" if v >= n_utterances else "tab:green" if v in useful else "lightgray" for v in sub.nodes]
    edges = [(u, v) for u, v in sub.edges]
    kinds = [sub.edges[e]["kind"] for e in edges]
    nx.draw_networkx_edges(sub, pos, ax=ax, edgelist=edges, alpha=0.3,
                           style=["solid" if k == "belonging" else "dotted" for k in kinds])
    nx.draw_networkx_nodes(sub, pos, ax=ax, node_color=colors, node_size=[260 if v >= n_utterances else 90 for v in sub.nodes],
                           edgecolors=["tab:red" if v in set(ranked[:6]) else "none" for v in sub.nodes], linewidths=1.5)
    nx.draw_networkx_labels(sub, pos, ax=ax, labels={v: labels[v][:38] for v in sub.nodes}, font_size=5)
    ax.set_title(f"{question}\nclues gold, useful utterances green, AssoMem top-6 outlined red; belonging solid, "
                 "similarity dotted", fontsize=8, loc="left")
    ax.set_axis_off()
    return fig

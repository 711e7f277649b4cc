"""SynthKG's two figures: coverage against theta per extractor, and Hits@k against k per retrieval method (means
over replicates with their 95 % intervals as bands, each replicate a thin line)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from matplotlib.figure import Figure

from paperdag.figures import decorate, mean_band, panels
from paperdag.stats import interval

STYLES = {"teacher": ("tab:blue", "-"), "distilled": ("tab:green", "--"), "single_step": ("tab:gray", ":"),
          "graph": ("tab:blue", "-"), "dense": ("tab:orange", "--"), "bm25": ("tab:gray", ":"), "ppr": ("tab:red", "-.")}
LABELS = {"teacher": "multi-step teacher (SynthKG)", "distilled": "distilled one-step (Distill-SynthKG)",
          "single_step": "single-step, no decontextualisation", "graph": "graph retrieval (SynthKG)",
          "dense": "dense chunks (MiniLM)", "bm25": "BM25 chunks", "ppr": "entity-graph PPR (HippoRAG-like)"}


def _curves(ax, x: Sequence[float], curves: Mapping[str, Sequence[Sequence[float]]]) -> None:
    for name, reps in curves.items():
        stats = [interval([r[i] for r in reps]) for i in range(len(x))]
        low = [s["ci95_low"] for s in stats] if len(reps) > 1 else None
        high = [s["ci95_high"] for s in stats] if len(reps) > 1 else None
        colour, style = STYLES[name]
        mean_band(ax, x, [s["mean"] for s in stats], low=low, high=high, colour=colour, style=style, label=LABELS[name],
                  replicates=reps)


def coverage_figure(thetas: Sequence[float], curves: Mapping[str, Sequence[Sequence[float]]], theta: float) -> Figure:
    """curves: extractor -> per replicate, coverage (%) at each theta."""
    fig, (ax,) = panels(7.5, 3.8)
    _curves(ax, thetas, curves)
    ax.axvline(theta, color="black", linewidth=0.8, linestyle=":")
    decorate(ax, xlabel="theta (semantic score threshold)", ylabel="coverage of gold triples (%)", ylim=(0, 101),
             title=f"KG coverage on held-out pages (dotted: the headline theta = {theta})")
    return fig


def hits_figure(ks: Sequence[int], curves: Mapping[str, Sequence[Sequence[float]]], k: int) -> Figure:
    """curves: method -> per replicate, Hits@k (%) of supporting chunks at each k (test questions)."""
    fig, (ax,) = panels(7.5, 3.8)
    _curves(ax, ks, curves)
    ax.axvline(k, color="black", linewidth=0.8, linestyle=":")
    decorate(ax, xlabel="k (chunks retrieved)", ylabel="Hits@k of supporting chunks (%)", ylim=(0, 101), xticks=list(ks),
             title=f"multi-hop retrieval, test questions (dotted: K = {k}, the same for every method)")
    return fig

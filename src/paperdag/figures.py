"""Figures several pipelines draw (matplotlib's object API, never pyplot): Pareto panels of two metrics (a point per
parameter value, a line per method), bars per arm with their intervals and a dot per replicate. A stage returns
the Figure; the engine writes it as PNG. Only the plotting stages import this module.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np
from matplotlib.artist import Artist
from matplotlib.figure import Figure


def pareto_panels(table: list[dict], panel: Sequence[str], x: str, y: str, styles: Mapping[str, tuple[str, str]], *,
                  series: str = "method", param: str = "param", title: Callable[[dict], str], xlabel: str, ylabel: str,
                  dashed: Sequence[str] = (), cols: int = 3) -> Figure:
    """A panel per distinct value of the `panel` keys: per series (styles: name -> (colour, marker), in legend
    order) a line through its rows sorted by `param`, each point labelled with its param when there are several;
    title(first row of the panel) heads it; one legend for all panels."""
    panels = list(dict.fromkeys(tuple(r[k] for k in panel) for r in table))
    nrows = math.ceil(len(panels) / cols)
    fig = Figure(figsize=(5 * cols, 4 * nrows + 0.6), layout="constrained")
    axes = fig.subplots(nrows, cols, squeeze=False).ravel()
    for ax, key in zip(axes, panels, strict=False):
        mine = [r for r in table if tuple(r[k] for k in panel) == key]
        for name, (color, marker) in styles.items():
            curve = sorted((r for r in mine if r[series] == name), key=lambda r: r[param] if r[param] is not None else 0)
            if not curve:
                continue
            ax.plot([r[x] for r in curve], [r[y] for r in curve], color=color, marker=marker, markersize=5, linewidth=1, label=name,
                    linestyle="--" if name in dashed else "-", alpha=0.9)
            if len(curve) > 1:
                for r in curve:
                    ax.annotate(f"{r[param]:g}", (r[x], r[y]), fontsize=6, color=color, xytext=(3, 2), textcoords="offset points")
        ax.set_title(title(mine[0]), fontsize=10, loc="left")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    handles: dict[str, Artist] = {}
    for ax in axes[: len(panels)]:
        for h, label in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, h)
    fig.legend(list(handles.values()), list(handles), loc="outside upper center", ncols=len(handles), fontsize=8)
    return fig


def per_arm_bars(arms: Sequence[str], means: Sequence[float], errors: Sequence[float], replicates: Sequence[Sequence[float]], *,
                 colors: Sequence[str], ylabel: str, title: str, ylim: tuple[float, float] | None = None) -> Figure:
    """A bar per arm at its mean with its interval (errors: half-widths), a dot per replicate on it."""
    fig = Figure(figsize=(7, 3.4), layout="constrained")
    ax = fig.subplots()
    ax.bar(range(len(arms)), means, yerr=errors, capsize=4, color=list(colors), alpha=0.8)
    for i, vals in enumerate(replicates):
        ax.scatter(np.full(len(vals), i), vals, color="black", s=10, zorder=3)
    ax.set_xticks(range(len(arms)), arms, fontsize=8)
    ax.set_ylabel(ylabel)
    if ylim is not None:
        ax.set_ylim(*ylim)
    ax.grid(axis="y", alpha=0.3)
    ax.set_title(title, fontsize=9, loc="left")
    return fig

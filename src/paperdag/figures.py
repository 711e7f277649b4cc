"""Figures every pipeline draws (matplotlib's object API, never pyplot): loss curves, trade-off curves (a metric
against a knob, one line per method), a mean over replicates with its interval band, Pareto panels of two metrics (a
point per parameter value, a line per method), bars per arm with their intervals and a dot per replicate. A stage
makes the Figure (`panels(...)`), draws, and returns it; the engine writes it as PNG. Only the plotting stages
import this module.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure

Style = tuple[str, str]  # (colour, line style) of one method's line


def panels(width: float, height: float, n: int = 1) -> tuple[Figure, list[Axes]]:
    """A constrained-layout Figure of `n` side-by-side Axes."""
    fig = Figure(figsize=(width, height), layout="constrained")
    if n == 1:
        return fig, [fig.subplots()]
    return fig, list(fig.subplots(1, n, squeeze=False)[0])


def loss_curves(ax: Axes, curves: Mapping[str, Sequence[float]], *, ylabel: str = "loss", title: str | None = None) -> None:
    """Each named loss per step, faint, with its running mean over len/50 steps on top (one curve: "step loss")."""
    colours = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown")
    for (name, history), colour in zip(curves.items(), colours * (len(curves) // len(colours) + 1)):
        if not history:
            continue
        window = max(1, len(history) // 50)
        smooth = [sum(history[max(0, i - window + 1) : i + 1]) / len(history[max(0, i - window + 1) : i + 1]) for i in range(len(history))]
        single = len(curves) == 1
        ax.plot(history, color=colour, alpha=0.25, linewidth=0.8, label="step loss" if single else f"{name} (step)")
        ax.plot(smooth, color=colour, linewidth=1.5, label=f"mean of {window}" if single else f"{name}, mean of {window}")
    if any(curves.values()):
        ax.legend(fontsize=8)
    ax.set_xlabel("step")
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title, fontsize=10, loc="left")
    ax.grid(alpha=0.3)


def tradeoff(ax: Axes, x: Sequence[float], lines: Mapping[str, Sequence[float]], *, styles: Mapping[str, Style] | None = None,
             markersize: float | None = None, **decoration: object) -> None:
    """One line per method of a metric against a knob (budget, procedures added, alpha); `styles` fixes each
    method's colour and line style, else the colour cycle; then `decorate(ax, **decoration)`."""
    for name, y in lines.items():
        kwargs: dict[str, object] = {"marker": "o", "label": name}
        if markersize is not None:
            kwargs["markersize"] = markersize
        if styles:
            kwargs["color"], kwargs["linestyle"] = styles[name]
        ax.plot(x, y, **kwargs)
    decorate(ax, **decoration)  # type: ignore[arg-type]


def tradeoff_panels(x: Sequence[float], curves: Mapping[str, Mapping[str, Sequence[float]]], *, ylabel: str, xlabel: str,
                    width: float = 4, height: float = 3.4, **options: object) -> Figure:
    """One trade-off panel per title (curves: title -> method -> values at x), side by side, sharing the y label
    (left) and one legend (right); x ticked at its values."""
    fig, axes = panels(width * len(curves), height, len(curves))
    for i, (ax, (title, lines)) in enumerate(zip(axes, curves.items(), strict=True)):
        tradeoff(ax, x, lines, xlabel=xlabel, ylabel=ylabel if i == 0 else None, xticks=x, title=title, title_size=10,
                 legend=i == len(curves) - 1, **options)
    return fig


def decorate(ax: Axes, *, xlabel: str, ylabel: str | None = None, ylim: tuple[float, float] | None = None,
             xticks: Sequence[float] | None = None, log2_x: bool = False, title: str | None = None, title_size: float = 9,
             legend: bool = True) -> None:
    """Labels, limits, grid, the legend outside to the right, a left title; log2_x: a log2 axis ticked at `xticks`."""
    if log2_x:
        ax.set_xscale("log", base=2)
    if xticks is not None:
        ax.set_xticks(xticks, [str(v) for v in xticks]) if log2_x else ax.set_xticks(xticks)
    if ylim is not None:
        ax.set_ylim(*ylim)
    ax.set_xlabel(xlabel)
    if ylabel is not None:
        ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    if legend:
        ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    if title:
        ax.set_title(title, fontsize=title_size, loc="left")


def reference_lines(ax: Axes, levels: Mapping[str, tuple[float, str, str]]) -> None:
    """A horizontal line per baseline: label -> (value, colour, line style)."""
    for label, (value, colour, style) in levels.items():
        ax.axhline(value, color=colour, linestyle=style, linewidth=1, label=label)


def mean_band(ax: Axes, x: Sequence[float], means: Sequence[float], *, low: Sequence[float] | None = None,
              high: Sequence[float] | None = None, colour: str, style: str = "-", marker: str = "o", label: str,
              band_alpha: float = 0.12, replicates: Sequence[Sequence[float]] = ()) -> None:
    """A mean over replicates against a knob, its interval as a band (when given), each replicate as a thin line."""
    ax.plot(x, means, marker=marker, linestyle=style, color=colour, label=label)
    if low is not None and high is not None:
        ax.fill_between(x, low, high, color=colour, alpha=band_alpha, linewidth=0)
    for values in replicates:
        ax.plot(x, values, color=colour, alpha=0.35, linewidth=0.8, marker=".", markersize=3)



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

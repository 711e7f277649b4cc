"""Figures every pipeline draws, as functions on a matplotlib Axes: loss curves, trade-off curves (a metric against
a knob, one line per method), a mean over replicates with its interval band. A stage makes the Figure
(`panels(...)`), draws, and returns it; the engine writes it as PNG. matplotlib.figure only: never pyplot.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

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

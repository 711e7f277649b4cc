"""mfc's figures: the trade-off (tree cost against distance calls per instance and variant) and the replicated
comparison (the same, mean over seeds with a band, per operating point); matplotlib's object API, no pyplot.
Only the evaluate stage imports this module, so redrawing it reruns that stage alone."""

from __future__ import annotations

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

_CURVES = {"fixed-r": ("tab:green", "s"), "greedy-B": ("tab:blue", "^"), "dp-B": ("tab:orange", "v")}
_REFERENCES = {"simple": ("black", "o"), "opt": ("tab:red", "D"), "exact-mst": ("tab:purple", "*")}


def tradeoff(table: list[dict]) -> Figure:
    """The trade-off curve per instance: tree cost / MST (left) and / optimal completion (right) against distance
    calls / n^2, one line per swept variant; simple, opt and exact MST as reference markers; default budgets ringed."""
    names = list(dict.fromkeys(r["instance"] for r in table))
    fig = Figure(figsize=(10, 2.7 * len(names) + 0.6), layout="constrained")
    axes = fig.subplots(len(names), 2, squeeze=False)
    ratios = (("cost_ratio_mst", "cost / MST"), ("cost_ratio_opt_completion", "cost / opt. completion"))
    for (left, right), name in zip(axes, names, strict=True):
        mine = [r for r in table if r["instance"] == name]
        first = mine[0]
        for ax, (key, ylabel) in zip((left, right), ratios, strict=True):
            for variant, (color, marker) in _CURVES.items():
                curve = sorted((r for r in mine if r["variant"] == variant), key=lambda r: r["distance_call_fraction"])
                if not curve:
                    continue
                xs, ys = [r["distance_call_fraction"] for r in curve], [r[key] for r in curve]
                ax.plot(xs, ys, color=color, marker=marker, markersize=4, linewidth=1.2, label=variant)
                for r in curve:
                    if r["default_budget"]:
                        ax.scatter(r["distance_call_fraction"], r[key], s=90, facecolors="none", edgecolors=color, linewidths=1.2)
            for variant, (color, marker) in _REFERENCES.items():
                for r in (r for r in mine if r["variant"] == variant):
                    ax.scatter(r["distance_call_fraction"], r[key], color=color, marker=marker, s=60 if marker == "*" else 30,
                               zorder=3, label=variant)
            ax.set_xscale("log")
            ax.set_ylabel(ylabel)
            ax.ticklabel_format(axis="y", useOffset=False)  # ratios read as 1.0008, not "+1" and 0.0008
            ax.grid(alpha=0.3, which="both")
        _zoom_past_exact(right, mine)
        noise = f", noise={first['noise']:g}" if first["noise"] else ""
        left.set_title(f"{name} (n={first['n']}, t={first['t']}, gamma={first['gamma']:.3g}{noise})", fontsize=10, loc="left")
    for ax in axes[-1]:
        ax.set_xlabel("distance calls / n^2")
    handles, labels = axes[0][0].get_legend_handles_labels()
    ring = Line2D([], [], linestyle="none", marker="o", markersize=9, markerfacecolor="none", markeredgecolor="gray")
    fig.legend([*handles, ring], [*labels, "default budget (headline)"], loc="outside upper center", ncols=7, fontsize=8)
    return fig


def _zoom_past_exact(ax: Axes, rows: list[dict]) -> None:
    """Fit the y axis to the completions (the exact MST is cheaper than any completion of a poor forest and would
    flatten the curves), pointing at the exact MST with an arrow when it falls below."""
    ys = [r["cost_ratio_opt_completion"] for r in rows if r["variant"] != "exact-mst"]
    exact = next(r for r in rows if r["variant"] == "exact-mst")
    low, high = min(ys), max(ys)
    pad = 0.08 * max(high - low, 1e-4)
    if exact["cost_ratio_opt_completion"] >= low - pad:
        return
    ax.set_ylim(low - 2 * pad, high + pad)
    x = exact["distance_call_fraction"]
    ax.annotate(
        f"exact MST {exact['cost_ratio_opt_completion']:.3f}",
        xy=(x, low - 2 * pad),
        xytext=(x, low + 0.25 * (high - low)),
        ha="right",
        fontsize=8,
        color=_REFERENCES["exact-mst"][0],
        arrowprops={"arrowstyle": "->", "color": _REFERENCES["exact-mst"][0]},
    )


def replicated(rows: list[dict]) -> Figure:
    """The replicated comparison (compare stage rows, the worst case left out): per (family, noise) row and t
    column, cost / optimal completion against the completion's distance calls / n^2, each variant's mean over the
    seeds with its 95 % band (fixed-r over r = 1..r_max, simple its first point; greedy-B and dp-B over R / t)."""
    from paperdag.figures import mean_band
    from paperdag.stats import interval

    rows = [r for r in rows if r["family"] != "worst"]
    grid = list(dict.fromkeys((r["family"], r["noise"]) for r in rows))
    columns = list(dict.fromkeys(r["t_label"] for r in rows))
    fig = Figure(figsize=(4.2 * len(columns), 3.0 * len(grid) + 0.6), layout="constrained")
    axes = fig.subplots(len(grid), len(columns), squeeze=False)
    for (family, noise), line in zip(grid, axes, strict=True):
        for label, ax in zip(columns, line, strict=True):
            cell = [r for r in rows if (r["family"], r["noise"], r["t_label"]) == (family, noise, label)]
            for variant, (colour, marker) in _CURVES.items():
                knobs = sorted({r["knob"] for r in cell if r["variant"] == variant})
                if not knobs:
                    continue
                at = [[r for r in cell if r["variant"] == variant and r["knob"] == k] for k in knobs]
                ratios = [interval([r["cost_ratio_opt"] for r in group]) for group in at]
                xs = [sum(r["calls"] / r["n"] ** 2 for r in group) / len(group) for group in at]
                mean_band(ax, xs, [i["mean"] for i in ratios], low=[i["ci95_low"] for i in ratios],
                          high=[i["ci95_high"] for i in ratios], colour=colour, marker=marker, label=variant)
            ax.set_xscale("log")
            ax.ticklabel_format(axis="y", useOffset=False)
            ax.grid(alpha=0.3, which="both")
            t = cell[0]["t"] if cell else 0
            ax.set_title(f"{family}, t={label} (~{t}), noise={noise:g}", fontsize=9, loc="left")
        line[0].set_ylabel("cost / opt. completion")
    for ax in axes[-1]:
        ax.set_xlabel("completion distance calls / n^2")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside upper center", ncols=3, fontsize=8)
    return fig

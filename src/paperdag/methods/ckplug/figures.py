"""ckplug's result figures: MR, ConR, ParR and the share answering neither against alpha, mean over replicates with its interval, beside the
baselines' MR; and accuracy on the adaptive set against the noise level, adaptive CK-PLUG beside its baselines
(paperdag.figures' blocks). Only the stage drawing it imports this module, so restyling it reruns
evaluate and no training."""

from __future__ import annotations

from matplotlib.figure import Figure

from paperdag.figures import decorate, mean_band, panels, reference_lines
from paperdag.stats import interval


def mr_vs_alpha(arms: dict[str, dict[str, dict]]) -> Figure:
    """arms: training arm -> replicate -> its numbers (metrics.replicate_numbers), each with its memory_recall_table;
    one panel per arm."""
    fig, axes = panels(6.4 * len(arms), 3.8, n=len(arms))
    for ax, (arm, per) in zip(axes, arms.items(), strict=True):
        _panel(ax, arm, per)
    return fig


def _panel(ax, arm: str, per: dict[str, dict]) -> None:
    tables = [sorted((r for r in p["table"] if r["method"] == "ck-plug"), key=lambda r: r["alpha"]) for p in per.values()]
    alphas, several = [r["alpha"] for r in tables[0]], len(tables) > 1
    for column, colour, style, marker in (("MR", "tab:blue", "-", "o"), ("ConR", "tab:orange", ":", "."), ("ParR", "tab:green", ":", "."),
                                            ("neither", "tab:gray", "-.", "x")):
        stats = [interval([t[i][column] for t in tables]) for i in range(len(alphas))]
        mean_band(ax, alphas, [s["mean"] for s in stats], low=[s["ci95_low"] for s in stats] if several else None,
                  high=[s["ci95_high"] for s in stats], colour=colour, style=style, marker=marker, label=f"CK-PLUG {column} (mean)",
                  band_alpha=0.12 if column == "MR" else 0.06, replicates=[[r["MR"] for r in t] for t in tables] if column == "MR" else ())
    baselines = {"rag": ("black", "--"), "ck-plug-adaptive": ("tab:purple", ":")}
    mr = {m: [next(r["MR"] for r in p["table"] if r["method"] == m) for p in per.values()] for m in baselines}
    reference_lines(ax, {f"{m} MR (mean)": (sum(mr[m]) / len(mr[m]), colour, style) for m, (colour, style) in baselines.items()})
    band = "band: 95 % t interval, thin lines: replicates" if several else "one replicate: no interval"
    decorate(ax, xlabel="alpha (0: trust context, 1: trust memory)", ylabel="percent (counterfactual set)", ylim=(-2, 102),
             xticks=alphas, title=f"{arm}: MR vs alpha, {len(tables)} replicates\n({band})")


ACCURACY_LINES = {"adaptive": ("adaptive CK-PLUG", "tab:purple", "-", "o"), "rag": ("RAG", "black", "--", "s"),
                  "norag": ("no-RAG", "tab:gray", "--", "v"), "cad": ("CAD, best beta per level", "tab:orange", ":", "."),
                  "fixed_alpha": ("CK-PLUG, best fixed alpha per level", "tab:green", ":", "D")}


def accuracy_vs_noise(arms: dict[str, dict[str, dict]]) -> Figure:
    """One panel per training arm: accuracy on the adaptive set per noise level (share of counterfactual contexts),
    mean over replicates with its 95 % t band, for adaptive CK-PLUG and each baseline (CAD and fixed-alpha CK-PLUG at
    their best setting per level, chosen on the test items)."""
    fig, axes = panels(6.4 * len(arms), 3.8, n=len(arms))
    for ax, (arm, per) in zip(axes, arms.items(), strict=True):
        reps = list(per.values())
        levels = sorted(reps[0]["adaptive_acc_by_noise"], key=float)
        x = [float(k) for k in levels]
        for name, (label, colour, style, marker) in ACCURACY_LINES.items():
            stats = [interval([r[f"{name}_acc_by_noise"][k] for r in reps]) for k in levels]
            several = len(reps) > 1
            mean_band(ax, x, [s["mean"] for s in stats], low=[s["ci95_low"] for s in stats] if several else None,
                      high=[s["ci95_high"] for s in stats], colour=colour, style=style, marker=marker, label=label,
                      band_alpha=0.12 if name == "adaptive" else 0.05)
        decorate(ax, xlabel="noise (share of counterfactual contexts)", ylabel="accuracy, percent (adaptive set)",
                 ylim=(-2, 102), xticks=x, title=f"{arm}: accuracy vs noise, {len(reps)} replicates\n(band: 95 % t interval)")
    return fig

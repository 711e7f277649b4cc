"""milco's figure: nDCG@10 against active dimensions under mass pruning, per variant, the baselines as levels
(matplotlib's object API, no pyplot). Only the evaluate stage imports this module."""

from __future__ import annotations

from matplotlib.figure import Figure

from paperdag.methods.milco.evaluation import find_row

_STYLE = {"milco": ("tab:blue", "o"), "no_echo": ("tab:orange", "s"), "no_connector": ("tab:green", "^"), "no_align": ("tab:red", "v")}
_FLAT = {"dense_trained": ("black", "-"), "dense": ("tab:brown", "-."), "bm25": ("tab:gray", "--"), "translate_bm25": ("tab:purple", ":")}


def pruning_curve(table: list[dict], headline_rho: float) -> Figure:
    """nDCG@10 against average active dimensions per document (mass-pruning curve) per variant, on both query sets;
    baselines as horizontal lines (the dense ones labelled with their dimensions); the mean over replicates."""
    fig = Figure(figsize=(11, 4.2), layout="constrained")
    axes = fig.subplots(1, 2)
    for ax, kind, title in zip(axes, ("crosslingual", "propernoun"), ("cross-lingual queries", "proper-noun queries (same language)"), strict=True):
        for variant, (color, marker) in _STYLE.items():
            curve = sorted((r for r in table if r["variant"] == variant), key=lambda r: r["active_dims"])
            ax.plot([r["active_dims"] for r in curve], [r[f"ndcg10_{kind}"] for r in curve], color=color, marker=marker,
                    markersize=4, label=variant)
            for r in curve:
                if r["rho"] == headline_rho and variant == "milco":
                    ax.scatter(r["active_dims"], r[f"ndcg10_{kind}"], s=110, facecolors="none", edgecolors=color, zorder=3,
                               label=f"milco at rho={headline_rho:g} (headline)")
        for variant, (color, style) in _FLAT.items():
            r = find_row(table, variant)
            label = f"{variant} ({r['active_dims']:g} dims)" if variant.startswith("dense") else variant
            ax.axhline(r[f"ndcg10_{kind}"], color=color, linestyle=style, linewidth=1.2, label=label)
        ax.set_xscale("log")
        ax.set_xlabel("average active dimensions per document (after mass pruning)")
        ax.set_ylabel("nDCG@10")
        ax.set_title(title, fontsize=10, loc="left")
        ax.grid(alpha=0.3, which="both")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside upper center", ncols=4, fontsize=8)
    return fig

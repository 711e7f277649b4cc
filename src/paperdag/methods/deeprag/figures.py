"""deeprag's result figures (paperdag.figures' blocks): EM against retrievals per question for every arm, the
boundary MCC per arm, and the per-hop decision matrix. Only the evaluate stage imports this module."""

from __future__ import annotations

from matplotlib.figure import Figure

from paperdag.figures import panels, per_arm_bars

COLOURS = {"deeprag": "tab:red", "imitation_only": "tab:orange", "always_retrieve": "tab:blue", "never_retrieve": "tab:gray",
           "threshold": "tab:green", "classifier": "tab:purple", "oracle_boundary": "black"}


def em_vs_retrievals(per_arm: dict[str, list[tuple[float, float]]]) -> Figure:
    """per_arm: arm -> [(retrievals per question, EM %) per replicate]; a dot per replicate, a cross at the mean."""
    fig, (ax,) = panels(6.5, 4)
    for arm, points in per_arm.items():
        xs, ys = [p[0] for p in points], [p[1] for p in points]
        ax.scatter(xs, ys, color=COLOURS[arm], s=14, alpha=0.5)
        ax.scatter([sum(xs) / len(xs)], [sum(ys) / len(ys)], color=COLOURS[arm], marker="X", s=80, label=arm)
    ax.set_xlabel("retrievals per question")
    ax.set_ylabel("exact match (%)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    ax.set_title("deeprag: EM vs retrievals (dots: replicates, crosses: means)", fontsize=9, loc="left")
    return fig


def mcc_bars(arms: list[str], means: list[float], errors: list[float], replicates: list[list[float]]) -> Figure:
    return per_arm_bars(arms, means, errors, replicates, colors=[COLOURS[a] for a in arms], ylabel="MCC (retrieve vs fact not memorised)",
                        title="deeprag: knowledge-boundary MCC per arm (95% interval, dots: replicates)", ylim=(-0.2, 1.05))


def decision_heatmap(matrix: list[dict], arms: list[str]) -> Figure:
    """Retrieve rate per arm (rows) and hop x boundary side (columns), first replicate."""
    import numpy as np

    columns = sorted({(r["hop"], r["unknown"]) for r in matrix})
    grid = np.full((len(arms), len(columns)), np.nan)
    for r in matrix:
        if r["arm"] in arms:
            grid[arms.index(r["arm"]), columns.index((r["hop"], r["unknown"]))] = r["retrieve_rate"]
    fig, (ax,) = panels(7, 3.6)
    image = ax.imshow(grid, vmin=0, vmax=1, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(columns)), [f"hop {h}\n{'unknown' if u else 'known'}" for h, u in columns], fontsize=7)
    ax.set_yticks(range(len(arms)), arms, fontsize=7)
    for i in range(len(arms)):
        for j in range(len(columns)):
            if not np.isnan(grid[i, j]):
                ax.text(j, i, f"{grid[i, j]:.2f}", ha="center", va="center", fontsize=6, color="white" if grid[i, j] < 0.5 else "black")
    fig.colorbar(image, ax=ax, label="retrieve rate")
    ax.set_title("deeprag: retrieve rate per hop, fact known / unknown to the LM (replicate 0)", fontsize=9, loc="left")
    return fig

"""RAP's result figures: one held-out roll-out as an image strip with the arms' paths, and closed-loop PDMS per arm
(matplotlib's object API, no pyplot). Only the stages drawing them import this module, so recolouring a figure reruns
those stages and no training."""

from __future__ import annotations

import numpy as np
import polars as pl
from matplotlib.figure import Figure


def rollout_strip(road, expert, episodes: dict, strip_arm: str, dt: float, replan_every: int) -> Figure:
    """One held-out roll-out as an image strip: the real frames the strip arm's planner saw, every 2 s, and the
    paths of the expert, IL-on-real and the strip arm on the road."""
    shown = episodes.get(strip_arm)
    frames = shown.frames[:: max(1, round(2.0 / (dt * replan_every)))][:6] if shown else []
    fig = Figure(figsize=(2.0 * max(1, len(frames)) + 3.5, 2.4), layout="constrained")
    axes = fig.subplots(1, len(frames) + 1, squeeze=False, width_ratios=[1] * len(frames) + [1.6])[0]
    for k, (ax, image) in enumerate(zip(axes, frames)):
        ax.imshow(image, interpolation="nearest")
        ax.set_title(f"{strip_arm} t={2 * k} s", fontsize=8)
        ax.axis("off")
    ax = axes[-1]
    s = road.s[road.s <= max(shown.progress if shown else 0, expert.progress) + 60]
    for d in (-road.half_width, road.half_width):
        x, y, _ = road.pose(s, d)
        ax.plot(x, y, color="0.4", linewidth=1)
    ax.plot(expert.trajectory[:, 0], expert.trajectory[:, 1], color="black", linestyle="--", linewidth=1, label="expert")
    for arm, color in (("il_real", "tab:orange"), (strip_arm, "tab:blue")):
        if arm in episodes:
            e = episodes[arm]
            end = " x collision" if e.collision else " x off-road" if e.off_road else ""
            ax.plot(e.trajectory[:, 0], e.trajectory[:, 1], color=color, linewidth=1.5, label=f"{arm}{end}")
    ax.set_aspect("equal")
    ax.legend(fontsize=6)
    ax.set_title("paths (m)", fontsize=8)
    return fig


def pdms_per_arm(table: list[dict], per_rep: pl.DataFrame) -> Figure:
    """Closed-loop PDMS per arm: bars of the mean over replicates with their std, a dot per replicate."""
    fig = Figure(figsize=(7, 3.4), layout="constrained")
    ax = fig.subplots()
    arms = [r["arm"] for r in table]
    ax.bar(range(len(arms)), [r["PDMS"] for r in table], yerr=[r.get("PDMS_std", 0.0) for r in table], capsize=4,
           color=["0.6"] + ["tab:blue"] * (len(arms) - 1), alpha=0.8)
    for i, arm in enumerate(arms):
        vals = per_rep.filter(pl.col("arm") == arm)["PDMS"].to_numpy()
        ax.scatter(np.full(len(vals), i), vals, color="black", s=10, zorder=3)
    ax.set_xticks(range(len(arms)), arms, fontsize=8)
    ax.set_ylabel("closed-loop PDMS (0-100)")
    ax.set_ylim(0, 105)
    ax.grid(axis="y", alpha=0.3)
    ax.set_title("PDMS per arm on held-out scenarios (bar: mean over replicates, dots: replicates)", fontsize=9, loc="left")
    return fig

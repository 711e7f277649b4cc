"""RAP's roll-out figure: one held-out roll-out as an image strip with the arms' paths (matplotlib's object API, no
pyplot); PDMS per arm is paperdag.figures.per_arm_bars. Only the simulate stage imports this module, so recolouring
the figure reruns that stage and no training."""

from __future__ import annotations

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

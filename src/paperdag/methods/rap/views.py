"""The figure of the cameras the planner is trained and driven with (paperdag.sim.driving.render): real, raster at the training size and at 64 x 128, and the bird's-eye raster, for a few
moments of one log. Only the synthesize stage imports it, so redrawing it reruns that stage alone."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from paperdag.sim.driving import Camera, Scenario, bev_view
from paperdag.sim.driving.render import raster_view, real_view


def views_figure(sc: Scenario, ego_log: np.ndarray, agent_log: np.ndarray, cam: Camera, rng: np.random.Generator, every: int) -> Figure:
    """A row per moment (0, 10 and 20 waypoint intervals into the log): real, raster, raster 64 x 128, BEV."""
    road, big = sc.road(), Camera(64, 128)
    moments = [t for t in (0, 10 * every, 20 * every) if t < len(ego_log)]
    fig = Figure(figsize=(9, 1.6 * len(moments) + 0.4), layout="constrained")
    axes = fig.subplots(len(moments), 4, squeeze=False, width_ratios=[2, 2, 2, 1])
    for row, t in zip(axes, moments):
        a, e = agent_log[t], ego_log[t]
        shown = {f"real {cam.height}x{cam.width} (step {t})": real_view(road, a, e, cam, rng), "raster (training size)": raster_view(road, a, e, cam),
                 "raster 64x128": raster_view(road, a, e, big), "BEV raster": bev_view(road, a, e)}
        for ax, (title, image) in zip(row, shown.items()):
            ax.imshow(image, interpolation="nearest")
            ax.set_title(title, fontsize=8)
            ax.axis("off")
    return fig

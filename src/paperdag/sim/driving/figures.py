"""A figure of the driving world's two renderers: the noisy camera, the raster and the bird's-eye view of the same
scene (matplotlib's object API, no pyplot). Imported by the stage that draws it only, so that redrawing it changes no
other stage's code."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from paperdag.sim.driving.render import Camera, bev_view, raster_view, real_view
from paperdag.sim.driving.world import Scenario


def views_figure(sc: Scenario, ego_log: np.ndarray, agent_log: np.ndarray, cam: Camera, rng: np.random.Generator, every: int) -> Figure:
    """Side by side for a few moments of one log: the real camera, the raster of the same scene, the BEV raster."""
    road, big = sc.road(), Camera(64, 128)
    moments = [0, 10 * every, 20 * every]
    moments = [t for t in moments if t < len(ego_log)]
    fig = Figure(figsize=(9, 1.6 * len(moments) + 0.4), layout="constrained")
    axes = fig.subplots(len(moments), 4, squeeze=False, width_ratios=[2, 2, 2, 1])
    for row, t in zip(axes, moments):
        images = [real_view(road, agent_log[t], ego_log[t], cam, rng), raster_view(road, agent_log[t], ego_log[t], cam),
                  raster_view(road, agent_log[t], ego_log[t], big), bev_view(road, agent_log[t], ego_log[t])]
        for ax, image, title in zip(row, images, (f"real {cam.height}x{cam.width} (t={t * 0.1:.0f} s)", "raster (training size)",
                                                  "raster 64x128", "BEV raster")):
            ax.imshow(image, interpolation="nearest")
            ax.set_title(title, fontsize=8)
            ax.axis("off")
    return fig

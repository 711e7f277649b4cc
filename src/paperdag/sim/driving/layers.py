"""The two cameras with ground primitives painted in layers: road surface, then lane lines, then vehicle faces, each
layer far to near, and the closed loop that drives with them.

render.camera_primitives depth-sorts road strips and lane lines together, although they lie in one plane: on a
curve a nearer road strip then paints over a farther part of a lane line (up to ~40 % of the edge-line pixels lost).
Sorting by (is_box, is_line, -depth) fixes that; clipping is per polygon, so re-sorting its clipped output is the
same as sorting before the clip. render.py is left as it is (other code may pin its images); this module is what the
rap pipeline renders and drives with.
"""

from __future__ import annotations

import numpy as np

from paperdag.sim.driving.closed_loop import Episode, Planner, comfortable
from paperdag.sim.driving.render import (
    EDGE_LINE,
    LANE_LINE,
    RASTER_COLOURS,
    REAL_COLOURS,
    Camera,
    Primitives,
    _background,
    _vehicle_paint,
    camera_primitives,
    fill_polygons,
)
from paperdag.sim.driving.road import Road
from paperdag.sim.driving.vehicles import A, V, from_frame, to_frame, track
from paperdag.sim.driving.world import Scenario, World, expert_control


def layered(prims: Primitives) -> Primitives:
    """The same primitives in paint order (is_box, is_line, -depth): road strips far to near, then lane lines far
    to near, then vehicle faces far to near."""
    is_box = prims.owner >= 0
    is_line = np.isin(prims.kind, (EDGE_LINE, LANE_LINE))
    order = np.lexsort((-prims.depth, is_line, is_box))
    return Primitives(prims.polys[order], prims.counts[order], prims.kind[order], prims.depth[order], prims.owner[order])


def scene_primitives(road: Road, agents: np.ndarray, pose: np.ndarray, cam: Camera) -> Primitives:
    """render.camera_primitives in layered paint order."""
    return layered(camera_primitives(road, agents, pose, cam))


def raster_view(road: Road, agents: np.ndarray, pose: np.ndarray, cam: Camera) -> np.ndarray:
    """The clean raster (render.raster_view's colours, alpha = (d_max - d) / d_max, black background), layered."""
    prims = scene_primitives(road, agents, pose, cam)
    label = fill_polygons(prims.polys, prims.counts, cam.height, cam.width)
    alpha = np.clip((cam.far - prims.depth) / cam.far, 0.0, 1.0)
    return np.concatenate([RASTER_COLOURS[prims.kind] * alpha[:, None], np.zeros((1, 3))])[label].astype(np.uint8)


def real_view(road: Road, agents: np.ndarray, pose: np.ndarray, cam: Camera, rng: np.random.Generator) -> np.ndarray:
    """The noisy "camera" of render.real_view (its palette, sky and grass, per-vehicle paint, lighting jitter,
    shading, texture noise, drawn from rng in the same order), layered."""
    prims = scene_primitives(road, agents, pose, cam)
    label = fill_polygons(prims.polys, prims.counts, cam.height, cam.width)
    light = np.array([1.0, 1.0, 1.0, 0.8, 1.05, 0.6])[prims.kind][:, None]
    body = _vehicle_paint(max(1, len(agents)))[np.maximum(prims.owner, 0)] * light
    colours = np.concatenate([np.where((prims.owner >= 0)[:, None], body, REAL_COLOURS[prims.kind]), np.zeros((1, 3))])
    h, w = cam.height, cam.width
    shade = (np.arange(h)[:, None] + 0.5) / h  # (H, 1): row position
    sky = np.array([150, 190, 235]) + (shade / cam.horizon)[..., None] * np.array([60, 40, 10])
    grass = np.array([70, 110, 45]) * (0.8 + 0.4 * shade)[..., None]
    backdrop = np.where(_background(cam)[:, None, None], grass, sky) * np.ones((1, w, 1))
    image = np.where((label >= 0)[..., None], colours[label], backdrop)
    image = image * (rng.uniform(0.65, 1.3) * rng.uniform(0.85, 1.15, size=3)) * (0.85 + 0.3 * shade)[..., None]
    image = image + rng.normal(0, 14, size=image.shape) + rng.normal(0, 10, size=(h, 1, 1))
    return np.clip(image, 0, 255).astype(np.uint8)


def _observe(worlds: list[World], cam: Camera, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """What a planner sees of each world: its layered real camera image (B, H, W, 3) and ego speed, accel (B, 2)."""
    images = np.stack([real_view(w.road, w.agents(), w.ego, cam, rng) for w in worlds])
    return images, np.array([[w.ego[V], w.ego[A]] for w in worlds])


def drive(scenarios: list[Scenario], planner: Planner | None, cam: Camera, duration: float, dt: float, replan_every: int,
          waypoint_interval: float, route_length: float, rng: np.random.Generator, keep_frames: bool = False) -> list[Episode]:
    """closed_loop.drive with the layered real camera: every scenario driven in lock-step for `duration` seconds
    (planner None: the expert); every replan_every steps the planner sees real images and returns ego-frame
    waypoints, which the tracker follows until the next plan; an episode ends at a collision, off-road, or its
    route's end."""
    worlds = [World.start(s) for s in scenarios]
    paths = [[w.ego.copy()] for w in worlds]
    seen: list[list[np.ndarray]] = [[] for _ in worlds]
    plans: list[np.ndarray | None] = [None] * len(worlds)
    done = np.zeros(len(worlds), bool)
    for step in range(round(duration / dt)):
        live = np.flatnonzero(~done)
        if not len(live):
            break
        if planner is not None and step % replan_every == 0:
            images, status = _observe([worlds[i] for i in live], cam, rng)
            for j, (i, plan) in enumerate(zip(live, planner(images, status))):
                plans[i] = from_frame(plan, worlds[i].ego)  # world coordinates: followed until the next plan
                seen[i] += [images[j]] if keep_frames else []
        for i in live:
            w = worlds[i]
            w.step(*(expert_control(w) if planner is None else track(w.ego, to_frame(plans[i], w.ego), waypoint_interval)), dt)
            paths[i].append(w.ego.copy())
            done[i] = w.events["collision"] or w.events["off_road"] or w.progress() >= route_length
    out = []
    for w, path, frames in zip(worlds, paths, seen):
        progress, t = max(0.0, w.progress()), np.stack(path)
        out.append(Episode(t, w.events["collision"], w.events["off_road"], w.events["ttc"], progress, min(1.0, progress / route_length),
                           comfortable(t, dt), frames))
    return out

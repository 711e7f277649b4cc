"""RAP's data: expert futures in a vehicle's frame, recovery perturbations of the ego pose, cross-agent viewpoints,
and the augmentation of the logged training frames with both."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import polars as pl
from rich.progress import track

from paperdag.sim.driving import YAW, A, Camera, Road, V, to_frame
from paperdag.sim.driving.render import raster_view


@dataclass(frozen=True)
class Perturbation:
    """Uniform ranges of the recovery perturbation (the paper's): position +- metres, yaw +- degrees, speed and
    acceleration +- a share of their value."""

    position: float = 0.5
    yaw_deg: float = 15.0
    speed: float = 0.2
    accel: float = 0.1


def future_in_frame(log: np.ndarray, t: int, pose: np.ndarray, every: int, count: int) -> np.ndarray:
    """The logged positions log[t + every], ..., log[t + count * every] (log (T, 5)) in the frame of `pose`: (count, 2)."""
    idx = t + every * np.arange(1, count + 1)
    if idx[-1] >= len(log):
        raise ValueError(f"future_in_frame: the log has {len(log)} steps, the future of step {t} needs {idx[-1] + 1}")
    return to_frame(log[idx, :2], pose)


def perturb(state: np.ndarray, rng: np.random.Generator, p: Perturbation) -> np.ndarray:
    """A recovery start: x, y, yaw shifted uniformly within +-position, +-yaw_deg; speed and acceleration scaled by
    1 + U(-speed, speed) and 1 + U(-accel, accel)."""
    out = state.copy()
    out[:2] += rng.uniform(-p.position, p.position, size=2)
    out[YAW] += np.radians(rng.uniform(-p.yaw_deg, p.yaw_deg))
    out[V] *= 1 + rng.uniform(-p.speed, p.speed)
    out[A] *= 1 + rng.uniform(-p.accel, p.accel)
    return out


def recovery_sample(ego_log: np.ndarray, t: int, rng: np.random.Generator, p: Perturbation, every: int,
                    count: int) -> tuple[np.ndarray, np.ndarray]:
    """(perturbed pose, target): the expert's logged future re-expressed from the perturbed pose, a trajectory that
    leads back onto the expert's path."""
    pose = perturb(ego_log[t], rng, p)
    return pose, future_in_frame(ego_log, t, pose, every, count)


def cross_agent_candidates(ego: np.ndarray, agents: np.ndarray, radius: float, road_end_s: np.ndarray,
                           agent_s: np.ndarray) -> np.ndarray:
    """Indices of agents within `radius` metres of the ego whose logged future stays on the road (s before its end):
    the viewpoints for cross-agent synthesis."""
    near = np.linalg.norm(agents[:, :2] - ego[:2], axis=1) <= radius
    return np.flatnonzero(near & (agent_s < road_end_s))


@dataclass(frozen=True)
class Augmentation:
    """How many augmented views each logged training frame gets, and how they are drawn."""

    perturbation: Perturbation
    recovery_per_frame: int
    cross_agents_per_frame: int
    cross_agent_radius: float  # metres from the ego
    every: int  # simulation steps between waypoints
    waypoints: int


def augment_frames(train: pl.DataFrame, roads: dict[int, Road], ego_log: np.ndarray, agent_log: np.ndarray, cam: Camera,
                   aug: Augmentation, rng: np.random.Generator) -> tuple[pl.DataFrame, np.ndarray, dict]:
    """The training table of every sample kind for the logged frames `train` (columns frame, scenario, step, speed,
    accel, target): each frame as real_log and raster_log, then per frame `recovery_per_frame` recovery rasters from
    perturbed ego poses (target: the logged expert future seen from the perturbed pose) and up to
    `cross_agents_per_frame` cross-agent rasters from nearby agents' poses (target: their logged futures), the ego a
    car in their view. Returns (the table, the augmented rasters (N, H, W, 3), stats: counts per kind, render time);
    rows of kind recovery and cross_agent index the rasters ("aug"), the others the logged images."""
    rows: list[dict] = []
    for f in train.iter_rows(named=True):
        for source, image in (("real_log", "real"), ("raster_log", "raster")):
            rows.append({"source": source, "image": image, "index": f["frame"], "speed": f["speed"], "accel": f["accel"], "target": f["target"]})
    images, render_s = [], 0.0
    for f in track(train.iter_rows(named=True), total=len(train), description="rap augment"):
        i, t = f["scenario"], f["step"]
        road, ego, agents = roads[i], ego_log[i], agent_log[i]
        views = []
        for _ in range(aug.recovery_per_frame):
            pose, target = recovery_sample(ego, t, rng, aug.perturbation, aug.every, aug.waypoints)
            views.append(("recovery", road, agents[t], pose, target))
        s_agents = road.frenet(agents[t, :, :2])[0]
        candidates = cross_agent_candidates(ego[t], agents[t], aug.cross_agent_radius, road.length - 80.0, s_agents)
        for k in rng.permutation(candidates)[: aug.cross_agents_per_frame]:
            others = np.concatenate([np.delete(agents[t], k, axis=0), ego[t][None]])  # the ego is a car in their view
            views.append(("cross_agent", road, others, agents[t, k], future_in_frame(agents[:, k], t, agents[t, k], aug.every, aug.waypoints)))
        for source, road_, others, pose, target in views:
            t0 = time.perf_counter()
            images.append(raster_view(road_, others, pose, cam))
            render_s += time.perf_counter() - t0
            rows.append({"source": source, "image": "aug", "index": len(images) - 1, "speed": float(pose[V]), "accel": float(pose[A]),
                         "target": target.ravel().tolist()})
    table = pl.DataFrame(rows)
    stats = {"counts": dict(table.group_by("source").len().iter_rows()), "augmented_frames": len(images), "render_seconds": render_s,
             "raster_frames_per_s": len(images) / max(render_s, 1e-9)}
    return table, np.stack(images) if images else np.zeros((0, cam.height, cam.width, 3), np.uint8), stats


def augment_split(scenarios: pl.DataFrame, frames: pl.DataFrame, ego_log: np.ndarray, agent_log: np.ndarray, image_size: list[int],
                  aug: Augmentation, rng: np.random.Generator) -> tuple[pl.DataFrame, np.ndarray, dict]:
    """augment_frames on the train split only (validation and test frames never reach training)."""
    from paperdag.methods.rap.logs import scenario_of

    need = {"scenario", "split", "seg_length"} - set(scenarios.columns)
    if need:
        raise ValueError(f"augment: scenarios.parquet lacks columns {sorted(need)}: rerun synthesize")
    roads = {r["scenario"]: scenario_of(r).road() for r in scenarios.iter_rows(named=True)}
    return augment_frames(frames.filter(pl.col("split") == "train"), roads, ego_log, agent_log, Camera(*image_size), aug, rng)

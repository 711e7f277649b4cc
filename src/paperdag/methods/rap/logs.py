"""The logged data RAP learns from: scenarios as table rows and back, the expert's logs with a real and a raster
camera view at every waypoint interval, and the rasteriser's frames per second."""

from __future__ import annotations

import time

import numpy as np
import polars as pl
from rich.progress import track

from paperdag.methods.rap.augment import future_in_frame
from paperdag.sim.driving import A, V, Camera, Scenario, ScenarioConfig, log_expert, make_scenario
from paperdag.sim.driving.render import raster_view, real_view


def scenario_rows(scenarios: list[Scenario]) -> list[dict]:
    """One table row per scenario, numbered in order."""
    return [{"scenario": i, "split": "", "seg_length": [a for a, _ in s.segments], "seg_curvature": [k for _, k in s.segments],
             "lanes": s.lanes, "lane_width": s.lane_width, "ego_lane": s.ego_lane, "ego_s": s.ego_s, "ego_speed": s.ego_speed,
             "agent_s": s.agent_s, "agent_lane": s.agent_lane, "agent_speed": s.agent_speed, "agent_v0": s.agent_v0}
            for i, s in enumerate(scenarios)]


def scenario_of(row: dict) -> Scenario:
    """The scenario a table row holds."""
    return Scenario(list(zip(row["seg_length"], row["seg_curvature"], strict=True)), row["lanes"], row["lane_width"], row["ego_lane"],
                    row["ego_s"], row["ego_speed"], row["agent_s"], row["agent_lane"], row["agent_speed"], row["agent_v0"])


def log_frames(scenarios: list[Scenario], splits: list[str], duration: float, dt: float, waypoint_interval: float, every: int,
               waypoints: int, cam: Camera, rng: np.random.Generator) -> tuple[list, list, list[dict], list, list, dict[str, float]]:
    """Each scenario driven by the expert for `duration` (plus the last frame's future); at every waypoint interval
    (`every` steps of dt) a frame: its real view (noise from rng) and raster view, ego status and the expert's future
    in the ego frame. Returns (ego logs, agent logs, frame rows, real images, raster images, render seconds by renderer)."""
    egos, agents, rows, real, raster = [], [], [], [], []
    render_s = {"real": 0.0, "raster": 0.0}
    for i, sc in enumerate(track(scenarios, description="rap synthesize")):
        ego_log, agent_log = log_expert(sc, duration + waypoints * waypoint_interval, dt)
        egos.append(ego_log)
        agents.append(agent_log)
        road = sc.road()
        for t in range(0, round(duration / dt) + 1, every):
            t0 = time.perf_counter()
            real.append(real_view(road, agent_log[t], ego_log[t], cam, rng))
            t1 = time.perf_counter()
            raster.append(raster_view(road, agent_log[t], ego_log[t], cam))
            render_s["real"] += t1 - t0
            render_s["raster"] += time.perf_counter() - t1
            rows.append({"frame": len(rows), "scenario": i, "split": splits[i], "step": t, "speed": float(ego_log[t, V]),
                         "accel": float(ego_log[t, A]), "target": future_in_frame(ego_log, t, ego_log[t], every, waypoints).ravel().tolist()})
    return egos, agents, rows, real, raster, render_s


def synthesize_logs(config: ScenarioConfig, splits: dict[str, int], duration: float, dt: float, waypoint_interval: float,
                    every: int, waypoints: int, cam: Camera, fps_probe_frames: int, rng: np.random.Generator) -> dict[str, object]:
    """Random scenarios (`splits`: how many per split, in order: train, val, test) logged by log_frames: the scenarios and frames tables, the ego and
    agent logs, the real and raster images, and stats (frame count, image size, render times and frames per second,
    the rasteriser's frames/s at 64 x 128)."""
    names = [name for name, count in splits.items() for _ in range(count)]
    scenarios = [make_scenario(rng, config) for _ in names]
    egos, agents, rows, real, raster, render_s = log_frames(scenarios, names, duration, dt, waypoint_interval, every, waypoints, cam, rng)
    probe_fps = raster_fps(scenarios[0], egos[0], agents[0], fps_probe_frames)
    stats = {"frames": len(rows), "image_size": [cam.height, cam.width], "render_seconds": render_s,
             "raster_frames_per_s": len(rows) / max(render_s["raster"], 1e-9), "real_frames_per_s": len(rows) / max(render_s["real"], 1e-9),
             "raster_frames_per_s_64x128": probe_fps}
    return {"scenarios": pl.DataFrame(scenario_rows(scenarios)).with_columns(pl.Series("split", names)),
            "frames": pl.DataFrame(rows), "ego_log": np.stack(egos), "agent_log": np.stack(agents),
            "real": np.stack(real), "raster": np.stack(raster), "synth_stats": stats, "scenario_list": scenarios}


def raster_fps(sc: Scenario, ego_log: np.ndarray, agent_log: np.ndarray, frames: int) -> float:
    """Raster frames per CPU second at 64 x 128 (the spec's size) over `frames` poses of one log: process time, the
    single-threaded renderer's own work, so that other jobs on the machine do not change the figure."""
    road, cam = sc.road(), Camera(64, 128)
    steps = np.arange(frames) % len(ego_log)
    t0 = time.process_time()
    for t in steps:
        raster_view(road, agent_log[t], ego_log[t], cam)
    return frames / max(time.process_time() - t0, 1e-9)

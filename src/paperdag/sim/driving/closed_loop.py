"""Closed-loop driving of many scenarios in lock-step: a planner (camera images + ego status -> ego-frame waypoints)
or the expert drives each ego; the episode records its trajectory, infractions, progress and comfort."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from paperdag.sim.driving.render import Camera, real_view
from paperdag.sim.driving.vehicles import A, V, YAW, from_frame, to_frame, track
from paperdag.sim.driving.world import Scenario, World, expert_control

Planner = Callable[[np.ndarray, np.ndarray], np.ndarray]  # (B, H, W, 3) uint8, (B, 2) speed, accel -> (B, K, 2)

# NAVSIM's comfort bounds (m/s^2, m/s^3, rad/s, rad/s^2)
COMFORT = {"lon_accel": (-4.05, 2.40), "lat_accel": 4.89, "jerk": 4.13, "yaw_rate": 0.95, "yaw_accel": 1.93}


@dataclass
class Episode:
    trajectory: np.ndarray  # (T + 1, 5) ego states
    collision: bool
    off_road: bool
    ttc: bool  # a time-to-collision violation happened
    progress: float  # metres along the road
    route_completion: float
    comfortable: bool
    frames: list[np.ndarray]  # planner inputs at each replanning (kept only when asked)


def comfortable(trajectory: np.ndarray, dt: float, window: int = 5) -> bool:
    """Whether the trajectory (T, 5) stays within NAVSIM's comfort bounds, on a `window`-step moving average."""
    if len(trajectory) < 3 * window:
        return True

    def smooth(x: np.ndarray) -> np.ndarray:
        return np.convolve(x, np.ones(window) / window, mode="valid")

    yaw_rate = smooth(np.diff(np.unwrap(trajectory[:, YAW])) / dt)
    accel = smooth(trajectory[1:, A])
    speed = smooth(trajectory[1:, V])
    lo, hi = COMFORT["lon_accel"]
    return bool((accel.min() >= lo) and (accel.max() <= hi) and (np.abs(speed * yaw_rate).max() <= COMFORT["lat_accel"])
                and (np.abs(np.diff(accel) / dt).max() <= COMFORT["jerk"]) and (np.abs(yaw_rate).max() <= COMFORT["yaw_rate"])
                and (np.abs(np.diff(yaw_rate) / dt).max() <= COMFORT["yaw_accel"]))


def drive(scenarios: list[Scenario], planner: Planner | None, cam: Camera, duration: float, dt: float, replan_every: int,
          waypoint_interval: float, route_length: float, rng: np.random.Generator, keep_frames: bool = False) -> list[Episode]:
    """Drive every scenario for `duration` seconds (planner None: the expert drives). Every `replan_every` steps the
    planner sees real camera images and returns waypoints, which the tracker follows until the next plan. An episode
    ends early at a collision, when leaving the road or at the end of its route."""
    worlds = [World.start(s) for s in scenarios]
    trajectories = [[w.ego.copy()] for w in worlds]
    frames: list[list[np.ndarray]] = [[] for _ in worlds]
    plans: list[np.ndarray | None] = [None] * len(worlds)
    done = [False] * len(worlds)
    for step in range(round(duration / dt)):
        live = [i for i, d in enumerate(done) if not d]
        if not live:
            break
        if planner is not None and step % replan_every == 0:
            images = np.stack([real_view(worlds[i].road, worlds[i].agents(), worlds[i].ego, cam, rng) for i in live])
            status = np.stack([[worlds[i].ego[V], worlds[i].ego[A]] for i in live])
            waypoints = planner(images, status)
            for j, i in enumerate(live):
                plans[i] = from_frame(waypoints[j], worlds[i].ego)
                if keep_frames:
                    frames[i].append(images[j])
        for i in live:
            w = worlds[i]
            control = expert_control(w) if planner is None else track(w.ego, to_frame(plans[i], w.ego), waypoint_interval)
            w.step(*control, dt)
            trajectories[i].append(w.ego.copy())
            done[i] = w.events["collision"] or w.events["off_road"] or w.progress() >= route_length
    episodes = []
    for w, traj, fr in zip(worlds, trajectories, frames):
        progress = max(0.0, w.progress())
        t = np.stack(traj)
        episodes.append(Episode(t, w.events["collision"], w.events["off_road"], w.events["ttc"], progress,
                                min(1.0, progress / route_length), comfortable(t, dt), fr))
    return episodes

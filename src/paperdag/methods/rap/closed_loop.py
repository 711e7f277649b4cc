"""Closed-loop evaluation of the trained planners on held-out scenarios, seeing real camera images only: every
episode scored (NC, DAC, TTC, EP, comfort, PDMS) against the expert's progress, and open-loop L2 on held-out frames."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from rich.progress import track

from paperdag.methods.rap.metrics import episode_rows, l2_at
from paperdag.methods.rap.model import load_planner
from paperdag.methods.rap.train import predict
from paperdag.sim.driving import Camera, Scenario, drive


@dataclass(frozen=True)
class Drive:
    """How each episode is driven: its length, step, planner calls every replan_every steps, route, waypoints."""

    duration: float
    dt: float
    replan_every: int
    waypoint_interval: float
    route_length: float
    seed: int  # every episode's noise (real camera) starts from this seed


def roll_out(held_out: list[Scenario], ids: list[int], models: dict[tuple[str, int], dict], frames: tuple[np.ndarray, np.ndarray, np.ndarray],
             how: Drive, l2_horizons: tuple[float, ...], keep_arms: tuple[str, ...]) -> tuple[list[dict], list[dict], list, dict]:
    """The expert's episodes, then each planner's (models: (arm, replicate) -> planner state, in that order).
    frames: the held-out logged (images, status, target) for open-loop L2. Returns (episode rows, open-loop rows,
    the expert's episodes, replicate 0's episodes with their frames for keep_arms)."""
    def episodes_of(planner, cam: Camera, keep: bool = False) -> list:
        return drive(held_out, planner, cam, how.duration, how.dt, how.replan_every, how.waypoint_interval, how.route_length,
                     np.random.default_rng(how.seed), keep_frames=keep)

    expert = episodes_of(None, Camera())
    reference = [e.progress for e in expert]
    rows = episode_rows("expert", 0, ids, expert, reference)
    images, status, target = frames
    open_loop, kept = [], {}
    for (arm, replicate), state in track(models.items(), description="rap simulate"):
        model = load_planner(state)
        h, w = (int(x) for x in state["meta.image_size"])
        planner = lambda images, st, m=model: predict(m, images, st.astype(np.float32))  # noqa: E731
        keep = replicate == 0 and arm in keep_arms
        episodes = episodes_of(planner, Camera(h, w), keep)
        rows += episode_rows(arm, replicate, ids, episodes, reference)
        if keep:
            kept[arm] = episodes[0]
        open_loop.append({"arm": arm, "replicate": replicate, **{f"l2_{k}": v for k, v in
                          l2_at(predict(model, images, status), target, how.waypoint_interval, l2_horizons).items()}})
    return rows, open_loop, expert, kept

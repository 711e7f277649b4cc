"""Closed-loop evaluation of the trained planners on held-out scenarios, seeing real camera images only: every
episode scored (NC, DAC, TTC, EP, comfort, PDMS) with NAVSIM's rules, and open-loop L2 on the held-out frames."""

from __future__ import annotations

from dataclasses import dataclass

import time

import numpy as np
import polars as pl
from rich.progress import track

from paperdag.methods.rap.metrics import episode_rows, l2_at
from paperdag.methods.rap.model import load_planner
from paperdag.methods.rap.figures import rollout_strip
from paperdag.methods.rap.logs import scenario_of
from paperdag.methods.rap.train import Samples, frames_samples, predict
from paperdag.sim.driving import Camera, Scenario
from paperdag.sim.driving.closed_loop import drive


@dataclass(frozen=True)
class Drive:
    """How each episode is driven: its length, step, planner calls every replan_every steps, route, waypoints."""

    duration: float
    dt: float
    replan_every: int
    waypoint_interval: float
    route_length: float
    seed: int  # every planner's episodes draw their camera noise from this seed: the same noise for every arm


def roll_out(held_out: list[Scenario], ids: list[int], models: dict[tuple[str, int], dict], logged: Samples, how: Drive,
             l2_horizons: tuple[float, ...], keep_arms: tuple[str, ...]) -> tuple[list[dict], list[dict], list, dict]:
    """The expert's episodes, then each planner's (models: (arm, replicate) -> planner state, in that order).
    logged: the held-out logged frames for open-loop L2. Returns (episode rows, open-loop rows, the expert's
    episodes, replicate 0's first episode with its frames for keep_arms)."""
    def episodes_of(planner, cam: Camera, keep: bool = False) -> list:
        return drive(held_out, planner, cam, how.duration, how.dt, how.replan_every, how.waypoint_interval, how.route_length,
                     np.random.default_rng(how.seed), keep_frames=keep)

    expert = episodes_of(None, Camera())
    rows = episode_rows("expert", 0, ids, expert, expert, how.dt)
    open_loop, kept = [], {}
    for (arm, replicate), state in track(models.items(), description="rap simulate"):
        model = load_planner(state)
        h, w = (int(x) for x in state["meta.image_size"])
        planner = lambda images, st, m=model: predict(m, images, st.astype(np.float32))  # noqa: E731
        keep = replicate == min(r for _, r in models) and arm in keep_arms
        episodes = episodes_of(planner, Camera(h, w), keep)
        rows += episode_rows(arm, replicate, ids, episodes, expert, how.dt)
        if keep:
            kept[arm] = episodes[0]
        open_loop.append({"arm": arm, "replicate": replicate, **{f"l2_{k}": v for k, v in
                          l2_at(predict(model, logged.images, logged.status), logged.target, how.waypoint_interval, l2_horizons).items()}})
    return rows, open_loop, expert, kept


def simulate_held_out(scenarios: pl.DataFrame, frames: pl.DataFrame, real: np.ndarray, planners: dict[tuple[str, int], dict], how: Drive,
                      l2_horizons: tuple[float, ...], strip_arm: str) -> dict[str, object]:
    """roll_out on the test split of the scenarios and frames tables: the episode and open-loop tables, stats, and
    the roll-out strip of the first held-out scenario (strip_arm against il_real)."""
    test = scenarios.filter(pl.col("split") == "test")
    if not len(test):
        raise ValueError("simulate: scenarios.parquet has no test scenarios (params.yaml rap.synthesize.test_scenarios)")
    held_out = [scenario_of(r) for r in test.iter_rows(named=True)]
    start = time.perf_counter()
    rows, open_loop, expert, kept = roll_out(held_out, test["scenario"].to_list(), planners,
                                             frames_samples(frames.filter(pl.col("split") == "test"), real), how, l2_horizons,
                                             (strip_arm, "il_real"))
    stats = {"episodes": len(rows), "test_scenarios": len(held_out), "seconds": time.perf_counter() - start}
    return {"rollouts": pl.DataFrame(rows), "open_loop": pl.DataFrame(open_loop), "sim_stats": stats,
            "rollout_strip": rollout_strip(held_out[0].road(), expert[0], kept, strip_arm, how.dt, how.replan_every)}

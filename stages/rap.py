"""Glue between the paperdag engine and the rap method: synthesize -> augment -> train (arm x replicate) -> simulate
-> evaluate.

The world, its renderers and the closed loop live in paperdag.sim.driving; RAP's augmentations, planner, R2R losses
and PDM score in paperdag.methods.rap. These functions turn logs into images and tables, tables into planners,
planners into roll-outs and roll-outs into metrics.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Annotated, Literal

import numpy as np
import polars as pl
from pydantic import Field, NonNegativeFloat, NonNegativeInt, PositiveFloat, PositiveInt

from paperdag.engine import Item
from paperdag.methods.rap import SOURCES

# The planner's model and training need torch: they are imported inside train and simulate, so that importing this
# module (every rap stage process does) stays cheap for synthesize, augment and evaluate (tests/engine/test_imports.py).
# The arms are the keys of params.yaml rap.arms (the train matrix runs over them), in the order of the gathered inputs.


@dataclass(frozen=True)
class WaypointParams:
    """`waypoints` planned every waypoint_interval seconds, a whole number of dt steps (checked at load)."""

    dt: PositiveFloat
    waypoints: PositiveInt
    waypoint_interval: PositiveFloat

    def __post_init__(self) -> None:
        if self.every < 1 or abs(self.every * self.dt - self.waypoint_interval) > 1e-9:
            raise ValueError("waypoint_interval", f"{self.waypoint_interval} must be a multiple of dt {self.dt}")

    @property
    def every(self) -> int:
        """Simulation steps between two waypoints."""
        return round(self.waypoint_interval / self.dt)


# ---------------------------------------------------------------- synthesize


@dataclass(frozen=True)
class SynthesizeParams(WaypointParams):
    train_scenarios: PositiveInt
    test_scenarios: PositiveInt
    lanes: PositiveInt
    agents: NonNegativeInt
    max_curvature: NonNegativeFloat
    ego_speed: PositiveFloat
    duration: PositiveFloat
    image_height: PositiveInt
    image_width: PositiveInt
    fps_probe_frames: PositiveInt
    seed: int


def synthesize(params: SynthesizeParams) -> dict[str, object]:
    """Random scenarios (train and held-out test), each driven by the expert; at every waypoint interval a logged
    frame with its real and raster camera views, ego status and the expert's future in the ego frame. Also the
    rasteriser's frames/s at 64 x 128 on this core and the raster-vs-real figure."""
    from paperdag.methods.rap.logs import synthesize_logs
    from paperdag.sim.driving import Camera, ScenarioConfig
    from paperdag.sim.driving.figures import views_figure

    p = params
    rng = np.random.default_rng(p.seed)
    cfg = ScenarioConfig(lanes=p.lanes, agents=p.agents, max_curvature=p.max_curvature, ego_speed=p.ego_speed)
    cam = Camera(p.image_height, p.image_width)
    logs = synthesize_logs(cfg, p.train_scenarios, p.test_scenarios, p.duration, p.dt, p.waypoint_interval, p.every, p.waypoints, cam,
                           p.fps_probe_frames, rng)
    scenarios = logs.pop("scenario_list")
    return logs | {"views": views_figure(scenarios[0], logs["ego_log"][0], logs["agent_log"][0], cam, rng, p.every)}


# ---------------------------------------------------------------- augment


@dataclass(frozen=True)
class AugmentParams(WaypointParams):
    position: NonNegativeFloat
    yaw_deg: NonNegativeFloat
    speed: NonNegativeFloat
    accel: NonNegativeFloat
    recovery_per_frame: NonNegativeInt
    cross_agents_per_frame: NonNegativeInt
    cross_agent_radius: NonNegativeFloat
    seed: int


def augment(params: AugmentParams, scenarios: pl.DataFrame, frames: pl.DataFrame, ego_log: np.ndarray, agent_log: np.ndarray,
            synth_stats: dict) -> dict[str, object]:
    """The training table of every sample kind (train split only): real logs, their rasters, recovery rasters from
    perturbed ego poses (target: the logged expert future seen from the perturbed pose) and cross-agent rasters from
    nearby agents' poses (target: their logged futures). Augmented rasters go to aug.npy."""
    from paperdag.methods.rap.augment import Augmentation, Perturbation, augment_frames
    from paperdag.methods.rap.logs import scenario_of
    from paperdag.sim.driving import Camera

    p = params
    rng = np.random.default_rng(p.seed)
    need = {"scenario", "split", "seg_length"} - set(scenarios.columns)
    if need:
        raise ValueError(f"augment: scenarios.parquet lacks columns {sorted(need)}: rerun synthesize")
    cam = Camera(*synth_stats["image_size"])
    aug = Augmentation(Perturbation(p.position, p.yaw_deg, p.speed, p.accel), p.recovery_per_frame, p.cross_agents_per_frame,
                       p.cross_agent_radius, p.every, p.waypoints)
    roads = {r["scenario"]: scenario_of(r).road() for r in scenarios.iter_rows(named=True)}
    table, images, stats = augment_frames(frames.filter(pl.col("split") == "train"), roads, ego_log, agent_log, cam, aug, rng)
    return {"train_set": table, "aug": images, "augment_stats": stats}


# ---------------------------------------------------------------- train (one element per arm x replicate)


@dataclass(frozen=True)
class TrainParams:
    sources: Annotated[list[Literal[SOURCES]], Field(min_length=1)]  # from rap.arms.<arm>
    domain_adversarial: bool
    paired_l2: bool
    steps: PositiveInt  # from rap.train
    batch_size: PositiveInt
    lr: PositiveFloat
    channels: list[PositiveInt]
    feature_dim: PositiveInt
    domain_weight: NonNegativeFloat
    pair_weight: NonNegativeFloat
    pair_batch: PositiveInt
    threads: PositiveInt
    item: Item  # the matrix element: item.arm, item.replicate
    seed: int


def train(params: TrainParams, train_set: pl.DataFrame, real: np.ndarray, raster: np.ndarray, aug: np.ndarray) -> dict[str, object]:
    """One arm's planner, trained on its sample kinds (rap.arms.<arm>.sources) with its R2R switches."""
    import torch

    from paperdag.methods.rap import TrainConfig, history_summary, planner_state, samples_of, train_planner

    p = params
    torch.set_num_threads(p.threads)
    start = time.perf_counter()
    samples = samples_of(train_set, p.sources, {"real": real, "raster": raster, "aug": aug})
    paired = train_set.filter(pl.col("source") == "real_log")["index"].to_numpy()
    cfg = TrainConfig(p.steps, p.batch_size, p.lr, tuple(p.channels), p.feature_dim, p.domain_adversarial, p.paired_l2, p.domain_weight,
                      p.pair_weight, p.pair_batch)
    model, history = train_planner(samples, raster[paired], real[paired], cfg, p.seed, description=f"rap train {p.item}")
    stats = {"arm": p.item.arm, "replicate": p.item.replicate, "samples": len(samples.images),
             "samples_by_source": dict(train_set.filter(pl.col("source").is_in(p.sources)).group_by("source").len().iter_rows()),
             **history_summary(history), "train_seconds": time.perf_counter() - start}
    h, w = real.shape[1:3]
    return {"model": planner_state(model, h, w, tuple(p.channels)), "train_stats": stats}


# ---------------------------------------------------------------- simulate


@dataclass(frozen=True)
class SimulateParams:
    duration: PositiveFloat
    dt: PositiveFloat
    replan_every: PositiveInt
    route_length: PositiveFloat
    waypoint_interval: PositiveFloat
    l2_horizons: list[PositiveFloat]
    strip_arm: str
    threads: PositiveInt
    seed: int


def simulate(params: SimulateParams, scenarios: pl.DataFrame, frames: pl.DataFrame, real: np.ndarray,
             models: dict[Item, dict]) -> dict[str, object]:
    """Closed-loop roll-outs of every trained planner (and of the expert) on the held-out scenarios, seeing real
    camera images only; per-episode NC, DAC, TTC, EP, comfort and PDMS; open-loop L2 on the held-out logged frames."""
    import torch

    from paperdag.methods.rap.closed_loop import Drive, roll_out
    from paperdag.methods.rap.figures import rollout_strip
    from paperdag.methods.rap.logs import scenario_of

    p = params
    torch.set_num_threads(p.threads)
    test = scenarios.filter(pl.col("split") == "test")
    if not len(test):
        raise ValueError("simulate: scenarios.parquet has no test scenarios (params.yaml rap.synthesize.test_scenarios)")
    held_out = [scenario_of(r) for r in test.iter_rows(named=True)]
    test_frames = frames.filter(pl.col("split") == "test")
    idx = test_frames["frame"].to_numpy()
    logged = (real[idx], test_frames.select("speed", "accel").to_numpy().astype(np.float32),
              np.array(test_frames["target"].to_list(), np.float32).reshape(len(idx), -1, 2))
    start = time.perf_counter()
    how = Drive(p.duration, p.dt, p.replan_every, p.waypoint_interval, p.route_length, p.seed)
    planners = {(item.arm, item.replicate): state for item, state in models.items()}  # the train matrix's order
    rows, open_loop, expert, kept = roll_out(held_out, test["scenario"].to_list(), planners, logged, how, tuple(p.l2_horizons),
                                             (p.strip_arm, "il_real"))
    stats = {"episodes": len(rows), "test_scenarios": len(held_out), "seconds": time.perf_counter() - start}
    return {"rollouts": pl.DataFrame(rows), "open_loop": pl.DataFrame(open_loop), "sim_stats": stats,
            "rollout_strip": rollout_strip(held_out[0].road(), expert[0], kept, p.strip_arm, p.dt, p.replan_every)}


# ---------------------------------------------------------------- evaluate


@dataclass(frozen=True)
class EvaluateParams:
    """None: the thresholds the evaluation is judged by are the tests of pipelines/rap.yaml's claims."""


def evaluate(params: EvaluateParams, rollouts: pl.DataFrame, open_loop: pl.DataFrame, synth_stats: dict, augment_stats: dict,
             sim_stats: dict, train_stats: dict[str, dict]) -> dict[str, object]:
    """PDMS and its parts per arm (mean and spread over replicates of the per-replicate means over scenarios),
    collision / off-road rates, route completion, open-loop L2; the rasteriser's speed and time share (the claims' numbers)."""
    from paperdag.methods.rap.evaluation import arm_table, headline, pdms_per_arm, per_replicate

    per_rep = per_replicate(rollouts, open_loop)
    table = arm_table(per_rep, rollouts["arm"].unique(maintain_order=True).to_list())  # the expert first, then simulate's order
    return {"metrics": {"headline": headline(table, synth_stats, augment_stats, sim_stats, train_stats), "table": table},
            "pdms_per_arm": pdms_per_arm(table, per_rep)}

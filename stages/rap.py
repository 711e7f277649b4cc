"""Glue between the paperdag engine and the rap method: synthesize -> augment -> train (arm x replicate) -> simulate
-> evaluate.

The world lives in paperdag.sim.driving (cameras, closed loop); RAP's
augmentations, planner, training, R2R losses, PDM score and paired comparisons in paperdag.methods.rap.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import numpy as np
import polars as pl
from pydantic import Field, NonNegativeFloat, NonNegativeInt, PositiveFloat, PositiveInt

from paperdag.engine import Item
from paperdag.methods.rap import SOURCES

# torch is imported inside train and simulate only: importing this module stays cheap (tests/engine/test_imports.py).
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
    val_scenarios: PositiveInt  # held-out logs whose real frames early-stop training
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
    """Random scenarios (train, validation, held-out test), each driven by the expert; at every waypoint interval
    a logged frame with its real and raster camera views, ego status and the expert's future in the ego frame; the
    rasteriser's frames/s at 64 x 128 on this core and the raster-vs-real figure."""
    from paperdag.methods.rap.logs import synthesize_logs
    from paperdag.sim.driving import Camera, ScenarioConfig
    from paperdag.methods.rap.views import views_figure

    p = params
    rng = np.random.default_rng(p.seed)
    cfg = ScenarioConfig(lanes=p.lanes, agents=p.agents, max_curvature=p.max_curvature, ego_speed=p.ego_speed)
    cam = Camera(p.image_height, p.image_width)
    splits = {"train": p.train_scenarios, "val": p.val_scenarios, "test": p.test_scenarios}
    logs = synthesize_logs(cfg, splits, p.duration, p.dt, p.waypoint_interval, p.every, p.waypoints, cam, p.fps_probe_frames, rng)
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
    from paperdag.methods.rap.augment import Augmentation, Perturbation, augment_split

    p = params
    aug = Augmentation(Perturbation(p.position, p.yaw_deg, p.speed, p.accel), p.recovery_per_frame, p.cross_agents_per_frame,
                       p.cross_agent_radius, p.every, p.waypoints)
    table, images, stats = augment_split(scenarios, frames, ego_log, agent_log, synth_stats["image_size"], aug, np.random.default_rng(p.seed))
    return {"train_set": table, "aug": images, "augment_stats": stats}


# ---------------------------------------------------------------- train (one element per arm x replicate)


@dataclass(frozen=True)
class TrainParams:
    sources: Annotated[list[Literal[SOURCES]], Field(min_length=1)]  # from rap.arms.<arm>
    domain_adversarial: bool
    paired_l2: bool
    steps: PositiveInt  # from rap.train
    batch_size: PositiveInt
    real_share: Annotated[float, Field(ge=0.5, le=1.0)]
    lr: PositiveFloat
    channels: list[PositiveInt]
    feature_dim: PositiveInt
    domain_weight: NonNegativeFloat
    pair_weight: NonNegativeFloat
    pair_batch: PositiveInt
    anchor_real: bool
    pair_distance: Literal["cosine", "l2"]
    eval_every: PositiveInt
    patience: NonNegativeInt
    threads: PositiveInt
    item: Item  # the matrix element: item.arm, item.replicate
    seed: int


def train(params: TrainParams, train_set: pl.DataFrame, frames: pl.DataFrame, real: np.ndarray, raster: np.ndarray,
          aug: np.ndarray) -> dict[str, object]:
    """One arm's planner, trained on its sample kinds (rap.arms.<arm>.sources) with its R2R switches, early-stopped
    on the validation scenarios' real frames."""
    import torch

    from paperdag.methods.rap import TrainConfig, planner_state, train_arm

    p = params
    torch.set_num_threads(p.threads)
    cfg = TrainConfig(p.steps, p.batch_size, p.lr, tuple(p.channels), p.feature_dim, p.domain_adversarial, p.paired_l2, p.domain_weight,
                      p.pair_weight, p.pair_batch, p.real_share, p.eval_every, p.patience, p.anchor_real, p.pair_distance)
    model, stats = train_arm(train_set, frames, {"real": real, "raster": raster, "aug": aug}, p.sources, cfg, p.seed, f"rap train {p.item}")
    return {"model": planner_state(model, *real.shape[1:3], tuple(p.channels)),
            "train_stats": {"arm": p.item.arm, "replicate": p.item.replicate, **stats}}


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

    from paperdag.methods.rap.closed_loop import Drive, simulate_held_out

    p = params
    torch.set_num_threads(p.threads)
    how = Drive(p.duration, p.dt, p.replan_every, p.waypoint_interval, p.route_length, p.seed)
    planners = {(item.arm, item.replicate): state for item, state in models.items()}  # the train matrix's order
    return simulate_held_out(scenarios, frames, real, planners, how, tuple(p.l2_horizons), p.strip_arm)


# ---------------------------------------------------------------- evaluate


@dataclass(frozen=True)
class EvaluateParams:
    """None: the thresholds the evaluation is judged by are the tests of pipelines/rap.yaml's claims."""


def evaluate(params: EvaluateParams, rollouts: pl.DataFrame, open_loop: pl.DataFrame, synth_stats: dict, augment_stats: dict,
             sim_stats: dict, train_stats: dict[str, dict]) -> dict[str, object]:
    """PDMS and its parts per arm (mean and spread over replicates of the per-replicate means over scenarios), the
    paired arm - baseline differences over the same replicates and scenarios (the claims' numbers), infraction
    rates, route completion, open-loop L2; the rasteriser's speed and time share."""
    from paperdag.methods.rap.evaluation import evaluate_rollouts

    return evaluate_rollouts(rollouts, open_loop, synth_stats, augment_stats, sim_stats, train_stats)

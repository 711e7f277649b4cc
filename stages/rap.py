"""Glue between the paperdag engine and the rap method: synthesize -> augment -> train (arm x replicate) -> simulate
-> evaluate.

The world, its renderers and the closed loop live in paperdag.sim.driving; RAP's augmentations, planner, R2R losses
and PDM score in paperdag.methods.rap. These functions turn logs into images and tables, tables into planners,
planners into roll-outs and roll-outs into metrics.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import polars as pl
from pydantic import NonNegativeFloat, NonNegativeInt, PositiveFloat, PositiveInt
from rich.progress import track

from paperdag.engine import Item
from paperdag.methods.rap.figures import pdms_per_arm, rollout_strip
from paperdag.methods.rap import Perturbation, cross_agent_candidates, ego_progress, future_in_frame, l2_at, pdm_score, recovery_sample
from paperdag.sim.driving.figures import views_figure
from paperdag.sim.driving import (
    A,
    V,
    Camera,
    Scenario,
    ScenarioConfig,
    drive,
    log_expert,
    make_scenario,
    raster_view,
    real_view,
)

if TYPE_CHECKING:
    from paperdag.methods.rap import Samples

# The planner's model and training need torch: they are imported inside train and simulate, so that importing this
# module (every rap stage process does) stays cheap for synthesize, augment and evaluate (tests/engine/test_imports.py).

ARMS = ("il_real", "raster", "recovery", "cross_agent", "rap_r2r")  # the spec's five arms, in order

# ---------------------------------------------------------------- synthesize


@dataclass(frozen=True)
class SynthesizeParams:
    train_scenarios: PositiveInt
    test_scenarios: PositiveInt
    lanes: PositiveInt
    agents: NonNegativeInt
    max_curvature: NonNegativeFloat
    ego_speed: PositiveFloat
    duration: PositiveFloat
    dt: PositiveFloat
    waypoints: PositiveInt
    waypoint_interval: PositiveFloat
    image_height: PositiveInt
    image_width: PositiveInt
    fps_probe_frames: PositiveInt
    seed: int


def _scenario_rows(scenarios: list[Scenario], split: str, offset: int) -> list[dict]:
    return [{"scenario": offset + i, "split": split, "seg_length": [a for a, _ in s.segments], "seg_curvature": [k for _, k in s.segments],
             "lanes": s.lanes, "lane_width": s.lane_width, "ego_lane": s.ego_lane, "ego_s": s.ego_s, "ego_speed": s.ego_speed,
             "agent_s": s.agent_s, "agent_lane": s.agent_lane, "agent_speed": s.agent_speed, "agent_v0": s.agent_v0}
            for i, s in enumerate(scenarios)]


def _scenario(row: dict) -> Scenario:
    return Scenario(list(zip(row["seg_length"], row["seg_curvature"], strict=True)), row["lanes"], row["lane_width"], row["ego_lane"],
                    row["ego_s"], row["ego_speed"], row["agent_s"], row["agent_lane"], row["agent_speed"], row["agent_v0"])


def _every(dt: float, interval: float) -> int:
    every = round(interval / dt)
    if every < 1 or abs(every * dt - interval) > 1e-9:
        raise ValueError(f"params.yaml rap: waypoint_interval {interval} must be a multiple of dt {dt}")
    return every


def synthesize(params: SynthesizeParams) -> dict[str, object]:
    """Random scenarios (train and held-out test), each driven by the expert; at every waypoint interval a logged
    frame with its real and raster camera views, ego status and the expert's future in the ego frame. Also the
    rasteriser's frames/s at 64 x 128 on this core and the raster-vs-real figure."""
    p = params
    rng = np.random.default_rng(p.seed)
    cfg = ScenarioConfig(lanes=p.lanes, agents=p.agents, max_curvature=p.max_curvature, ego_speed=p.ego_speed)
    scenarios = [make_scenario(rng, cfg) for _ in range(p.train_scenarios + p.test_scenarios)]
    splits = ["train"] * p.train_scenarios + ["test"] * p.test_scenarios
    every = _every(p.dt, p.waypoint_interval)
    cam = Camera(p.image_height, p.image_width)
    egos, agents, rows, real, raster = [], [], [], [], []
    render_s = {"real": 0.0, "raster": 0.0}
    for i, sc in enumerate(track(scenarios, description="rap synthesize")):
        ego_log, agent_log = log_expert(sc, p.duration + p.waypoints * p.waypoint_interval, p.dt)
        egos.append(ego_log)
        agents.append(agent_log)
        road = sc.road()
        for t in range(0, round(p.duration / p.dt) + 1, every):
            t0 = time.perf_counter()
            real.append(real_view(road, agent_log[t], ego_log[t], cam, rng))
            t1 = time.perf_counter()
            raster.append(raster_view(road, agent_log[t], ego_log[t], cam))
            render_s["real"] += t1 - t0
            render_s["raster"] += time.perf_counter() - t1
            rows.append({"frame": len(rows), "scenario": i, "split": splits[i], "step": t, "speed": float(ego_log[t, V]),
                         "accel": float(ego_log[t, A]), "target": future_in_frame(ego_log, t, ego_log[t], every, p.waypoints).ravel().tolist()})
    probe_fps = _raster_fps(scenarios[0], egos[0], agents[0], p.fps_probe_frames)
    stats = {"frames": len(rows), "image_size": [p.image_height, p.image_width], "render_seconds": render_s,
             "raster_frames_per_s": len(rows) / max(render_s["raster"], 1e-9), "real_frames_per_s": len(rows) / max(render_s["real"], 1e-9),
             "raster_frames_per_s_64x128": probe_fps}
    return {"scenarios": pl.DataFrame(_scenario_rows(scenarios, "", 0)).with_columns(pl.Series("split", splits)),
            "frames": pl.DataFrame(rows), "ego_log": np.stack(egos), "agent_log": np.stack(agents),
            "real": np.stack(real), "raster": np.stack(raster), "synth_stats": stats,
            "views": views_figure(scenarios[0], egos[0], agents[0], cam, rng, every)}


def _raster_fps(sc: Scenario, ego_log: np.ndarray, agent_log: np.ndarray, frames: int) -> float:
    """Raster frames per second at 64 x 128 (the spec's size) over `frames` poses of one log, this process only."""
    road, cam = sc.road(), Camera(64, 128)
    steps = np.arange(frames) % len(ego_log)
    t0 = time.perf_counter()
    for t in steps:
        raster_view(road, agent_log[t], ego_log[t], cam)
    return frames / (time.perf_counter() - t0)


# ---------------------------------------------------------------- augment


@dataclass(frozen=True)
class AugmentParams:
    position: NonNegativeFloat
    yaw_deg: NonNegativeFloat
    speed: NonNegativeFloat
    accel: NonNegativeFloat
    recovery_per_frame: NonNegativeInt
    cross_agents_per_frame: NonNegativeInt
    cross_agent_radius: NonNegativeFloat
    dt: PositiveFloat
    waypoints: PositiveInt
    waypoint_interval: PositiveFloat
    seed: int


def augment(params: AugmentParams, scenarios: pl.DataFrame, frames: pl.DataFrame, ego_log: np.ndarray, agent_log: np.ndarray,
            synth_stats: dict) -> dict[str, object]:
    """The training table of every sample kind (train split only): real logs, their rasters, recovery rasters from
    perturbed ego poses (target: the logged expert future seen from the perturbed pose) and cross-agent rasters from
    nearby agents' poses (target: their logged futures). Augmented rasters go to aug.npy."""
    p = params
    rng = np.random.default_rng(p.seed)
    every = _every(p.dt, p.waypoint_interval)
    need = {"scenario", "split", "seg_length"} - set(scenarios.columns)
    if need:
        raise ValueError(f"augment: scenarios.parquet lacks columns {sorted(need)}: rerun synthesize")
    cam = Camera(*synth_stats["image_size"])
    perturbation = Perturbation(p.position, p.yaw_deg, p.speed, p.accel)
    train = frames.filter(pl.col("split") == "train")
    rows: list[dict] = []
    for f in train.iter_rows(named=True):
        for source, image in (("real_log", "real"), ("raster_log", "raster")):
            rows.append({"source": source, "image": image, "index": f["frame"], "speed": f["speed"], "accel": f["accel"], "target": f["target"]})
    images, render_s = [], 0.0
    roads = {r["scenario"]: _scenario(r).road() for r in scenarios.iter_rows(named=True)}
    for f in track(train.iter_rows(named=True), total=len(train), description="rap augment"):
        i, t = f["scenario"], f["step"]
        road, ego, agents = roads[i], ego_log[i], agent_log[i]
        views = []
        for _ in range(p.recovery_per_frame):
            pose, target = recovery_sample(ego, t, rng, perturbation, every, p.waypoints)
            views.append(("recovery", road, agents[t], pose, target))
        s_agents = road.frenet(agents[t, :, :2])[0]
        candidates = cross_agent_candidates(ego[t], agents[t], p.cross_agent_radius, road.length - 80.0, s_agents)
        for k in rng.permutation(candidates)[: p.cross_agents_per_frame]:
            others = np.concatenate([np.delete(agents[t], k, axis=0), ego[t][None]])  # the ego is a car in their view
            views.append(("cross_agent", road, others, agents[t, k], future_in_frame(agents[:, k], t, agents[t, k], every, p.waypoints)))
        for source, road_, others, pose, target in views:
            t0 = time.perf_counter()
            images.append(raster_view(road_, others, pose, cam))
            render_s += time.perf_counter() - t0
            rows.append({"source": source, "image": "aug", "index": len(images) - 1, "speed": float(pose[V]), "accel": float(pose[A]),
                         "target": target.ravel().tolist()})
    table = pl.DataFrame(rows)
    counts = dict(table.group_by("source").len().iter_rows())
    stats = {"counts": counts, "augmented_frames": len(images), "render_seconds": render_s,
             "raster_frames_per_s": len(images) / max(render_s, 1e-9)}
    aug = np.stack(images) if images else np.zeros((0, cam.height, cam.width, 3), np.uint8)
    return {"train_set": table, "aug": aug, "augment_stats": stats}


# ---------------------------------------------------------------- train (one element per arm x replicate)


@dataclass(frozen=True)
class TrainParams:
    sources: list[str]  # from rap.arms.<arm>
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


def _samples(train_set: pl.DataFrame, sources: list[str], images: dict[str, np.ndarray]) -> Samples:
    from paperdag.methods.rap import Samples

    rows = train_set.filter(pl.col("source").is_in(sources))
    picked = np.zeros((len(rows), *images["real"].shape[1:]), np.uint8)
    kind, index = rows["image"].to_numpy(), rows["index"].to_numpy()
    for name, array in images.items():
        sel = kind == name
        picked[sel] = array[index[sel]]
    target = np.array(rows["target"].to_list(), np.float32)
    return Samples(picked, rows.select("speed", "accel").to_numpy().astype(np.float32), target.reshape(len(rows), -1, 2))


def train(params: TrainParams, train_set: pl.DataFrame, real: np.ndarray, raster: np.ndarray, aug: np.ndarray) -> dict[str, object]:
    """One arm's planner, trained on its sample kinds (rap.arms.<arm>.sources) with its R2R switches."""
    import torch

    from paperdag.methods.rap import SOURCES, TrainConfig, planner_state, train_planner

    p = params
    torch.set_num_threads(p.threads)
    unknown = sorted(set(p.sources) - set(SOURCES))
    if unknown or not p.sources:
        raise ValueError(f"params.yaml rap.arms.{p.item.arm}.sources: unknown or empty {unknown or p.sources}; choose from {SOURCES}")
    start = time.perf_counter()
    samples = _samples(train_set, p.sources, {"real": real, "raster": raster, "aug": aug})
    paired = train_set.filter(pl.col("source") == "real_log")["index"].to_numpy()
    cfg = TrainConfig(p.steps, p.batch_size, p.lr, tuple(p.channels), p.feature_dim, p.domain_adversarial, p.paired_l2, p.domain_weight,
                      p.pair_weight, p.pair_batch)
    model, history = train_planner(samples, raster[paired], real[paired], cfg, p.seed, description=f"rap train {p.item}")
    tail = history[-max(1, len(history) // 10):]
    stats = {"arm": p.item.arm, "replicate": p.item.replicate, "samples": len(samples.images),
             "samples_by_source": dict(train_set.filter(pl.col("source").is_in(p.sources)).group_by("source").len().iter_rows()),
             "final": {k: float(np.mean([h[k] for h in tail])) for k in tail[0]} if tail else {},
             "l1": [h["l1"] for h in history], "train_seconds": time.perf_counter() - start}
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

    from paperdag.methods.rap import load_planner, predict

    p = params
    torch.set_num_threads(p.threads)
    test = scenarios.filter(pl.col("split") == "test")
    if not len(test):
        raise ValueError("simulate: scenarios.parquet has no test scenarios (params.yaml rap.synthesize.test_scenarios)")
    held_out = [_scenario(r) for r in test.iter_rows(named=True)]
    ids = test["scenario"].to_list()
    start = time.perf_counter()
    expert = drive(held_out, None, Camera(), p.duration, p.dt, p.replan_every, p.waypoint_interval, p.route_length, np.random.default_rng(p.seed))
    reference = [e.progress for e in expert]
    rows = _episode_rows("expert", 0, ids, expert, reference)
    test_frames = frames.filter(pl.col("split") == "test")
    idx = test_frames["frame"].to_numpy()
    status = test_frames.select("speed", "accel").to_numpy().astype(np.float32)
    target = np.array(test_frames["target"].to_list(), np.float32).reshape(len(idx), -1, 2)
    open_loop, strip_episodes = [], {}
    for item, weights in track(models.items(), description="rap simulate"):
        arm, replicate = item.arm, item.replicate
        model = load_planner(weights)
        h, w = (int(x) for x in weights["meta.image_size"])
        planner = lambda images, st, m=model: predict(m, images, st.astype(np.float32))  # noqa: E731
        keep = replicate == 0 and arm in (p.strip_arm, "il_real")
        episodes = drive(held_out, planner, Camera(h, w), p.duration, p.dt, p.replan_every, p.waypoint_interval, p.route_length,
                         np.random.default_rng(p.seed), keep_frames=keep)
        rows += _episode_rows(arm, replicate, ids, episodes, reference)
        if keep:
            strip_episodes[arm] = episodes[0]
        open_loop.append({"arm": arm, "replicate": replicate, **{f"l2_{k}": v for k, v in
                          l2_at(predict(model, real[idx], status), target, p.waypoint_interval, tuple(p.l2_horizons)).items()}})
    stats = {"episodes": len(rows), "test_scenarios": len(held_out), "seconds": time.perf_counter() - start}
    road = held_out[0].road()
    return {"rollouts": pl.DataFrame(rows), "open_loop": pl.DataFrame(open_loop), "sim_stats": stats,
            "rollout_strip": rollout_strip(road, expert[0], strip_episodes, p.strip_arm, p.dt, p.replan_every)}


def _episode_rows(arm: str, replicate: int, ids: list[int], episodes: list, reference: list[float]) -> list[dict]:
    rows = []
    for sid, e, ref in zip(ids, episodes, reference, strict=True):
        nc, dac, ttc, c = float(not e.collision), float(not e.off_road), float(not e.ttc), float(e.comfortable)
        ep = ego_progress(e.progress, ref)
        rows.append({"arm": arm, "replicate": replicate, "scenario": sid, "NC": nc, "DAC": dac, "TTC": ttc, "EP": ep, "C": c,
                     "PDMS": 100 * pdm_score(nc, dac, ttc, ep, c), "collision": e.collision, "off_road": e.off_road,
                     "route_completion": e.route_completion, "progress": e.progress})
    return rows


# ---------------------------------------------------------------- evaluate


@dataclass(frozen=True)
class EvaluateParams:
    """None: the thresholds the evaluation is judged by are the tests of pipelines/rap.yaml's claims."""


def evaluate(params: EvaluateParams, rollouts: pl.DataFrame, open_loop: pl.DataFrame, synth_stats: dict, augment_stats: dict,
             sim_stats: dict, train_stats: dict[str, dict]) -> dict[str, object]:
    """PDMS and its parts per arm (mean and spread over replicates of the per-replicate means over scenarios),
    collision / off-road rates, route completion, open-loop L2; the rasteriser's speed and time share (the claims' numbers)."""
    per_rep = (rollouts.group_by("arm", "replicate")
               .agg(pl.col("PDMS", "NC", "DAC", "TTC", "EP", "C", "route_completion").mean(),
                    pl.col("collision").cast(pl.Float64).mean().alias("collision_rate"),
                    pl.col("off_road").cast(pl.Float64).mean().alias("off_road_rate"))
               .join(open_loop, on=["arm", "replicate"], how="left"))
    value_cols = [c for c in per_rep.columns if c not in ("arm", "replicate")]
    table = []
    for arm in ("expert", *ARMS):
        mine = per_rep.filter(pl.col("arm") == arm)
        if not len(mine):
            continue
        row: dict[str, object] = {"arm": arm, "replicates": len(mine)}
        for c in value_cols:
            vals = mine[c].drop_nulls().to_numpy()
            if len(vals):
                row[c] = float(vals.mean())
                row[f"{c}_std"] = float(vals.std(ddof=1)) if len(vals) > 1 else 0.0
        table.append(row)
    by = {r["arm"]: r for r in table}
    missing = [a for a in ARMS if a not in by]
    if missing:
        raise ValueError(f"evaluate: rollouts.parquet has no episodes of arms {missing}")
    raster_render = synth_stats["render_seconds"]["raster"] + augment_stats["render_seconds"]
    train_seconds = sum(s["train_seconds"] for s in train_stats.values())
    pipeline = synth_stats["render_seconds"]["raster"] + synth_stats["render_seconds"]["real"] + augment_stats["render_seconds"] \
        + train_seconds + sim_stats["seconds"]
    headline: dict[str, object] = {}
    for arm in ARMS:
        headline[f"pdms_{arm}"] = by[arm]["PDMS"]
        headline[f"pdms_{arm}_std"] = by[arm]["PDMS_std"]
    headline |= {
        "pdms_expert": by["expert"]["PDMS"],
        "pdms_margin_rap_r2r_vs_il_real": by["rap_r2r"]["PDMS"] - by["il_real"]["PDMS"],
        # "a clear margin over seeds" as one number: the margin minus the two arms' sample std over replicates summed
        "pdms_margin_rap_r2r_vs_il_real_minus_std_sum": by["rap_r2r"]["PDMS"] - by["il_real"]["PDMS"]
        - (by["rap_r2r"]["PDMS_std"] + by["il_real"]["PDMS_std"]),
        "collision_rate_il_real": by["il_real"]["collision_rate"], "collision_rate_rap_r2r": by["rap_r2r"]["collision_rate"],
        "off_road_rate_il_real": by["il_real"]["off_road_rate"], "off_road_rate_rap_r2r": by["rap_r2r"]["off_road_rate"],
        "route_completion_il_real": by["il_real"]["route_completion"], "route_completion_rap_r2r": by["rap_r2r"]["route_completion"],
        "l2_2s_il_real": by["il_real"].get("l2_2s"), "l2_2s_rap_r2r": by["rap_r2r"].get("l2_2s"),
        "raster_frames_per_s": synth_stats["raster_frames_per_s_64x128"],
        "raster_frames_per_s_training_size": synth_stats["raster_frames_per_s"],
        "real_frames_per_s_training_size": synth_stats["real_frames_per_s"],
        "raster_render_seconds": raster_render, "train_seconds": train_seconds,
        "raster_render_share_of_training": raster_render / max(train_seconds, 1e-9),
        "raster_render_share_of_pipeline": raster_render / max(pipeline, 1e-9),
        "test_scenarios": sim_stats["test_scenarios"],
        "units": "PDMS in points (0-100), mean over held-out scenarios per replicate, then mean and sample std over replicates",
    }
    return {"metrics": {"headline": headline, "table": table}, "pdms_per_arm": pdms_per_arm(table, per_rep)}

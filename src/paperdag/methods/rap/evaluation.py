"""Closed-loop results per arm (the mean and spread over replicates of each replicate's means over the held-out
scenarios) and the paired comparisons the claims read: each arm against its baseline on the same scenarios and
the same replicate seeds, with an interval over both and the smallest difference this design detects."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
from matplotlib.figure import Figure

from paperdag.figures import per_arm_bars

# (arm, baseline) pairs the claims and the headline compare: RAP (arm 5) and every other arm against IL on real
# images (arm 1); recovery data (arm 3) against rasters of the logs alone (arm 2); R2R (arm 5) against arm 4
COMPARISONS = (("rap_r2r", "il_real"), ("raster", "il_real"), ("recovery", "il_real"), ("cross_agent", "il_real"),
               ("recovery", "raster"), ("rap_r2r", "cross_agent"))


def per_replicate(rollouts: pl.DataFrame, open_loop: pl.DataFrame) -> pl.DataFrame:
    """A row per (arm, replicate): means over its episodes, with its open-loop L2."""
    return (rollouts.group_by("arm", "replicate")
            .agg(pl.col("PDMS", "NC", "DAC", "TTC", "EP", "C", "route_completion").mean(),
                 pl.col("collision").cast(pl.Float64).mean().alias("collision_rate"),
                 pl.col("off_road").cast(pl.Float64).mean().alias("off_road_rate"))
            .join(open_loop, on=["arm", "replicate"], how="left"))


def arm_table(per_rep: pl.DataFrame, arms: list[str]) -> list[dict]:
    """A row per arm (in `arms` order, those with episodes): each value's mean over replicates and sample std."""
    value_cols = [c for c in per_rep.columns if c not in ("arm", "replicate")]
    table = []
    for arm in arms:
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
    return table


def pdms_grid(rollouts: pl.DataFrame, arm: str) -> tuple[np.ndarray, list[int], list[int]]:
    """PDMS of one arm as a (replicate, scenario) grid, rows and columns sorted; a missing episode raises."""
    mine = rollouts.filter(pl.col("arm") == arm)
    reps, scen = sorted(set(mine["replicate"].to_list())), sorted(set(mine["scenario"].to_list()))
    if len(mine) != len(reps) * len(scen):
        raise ValueError(f"rollouts: arm {arm} has {len(mine)} episodes, not one per replicate x scenario ({len(reps)} x {len(scen)})")
    grid = mine.sort("replicate", "scenario")["PDMS"].to_numpy().reshape(len(reps), len(scen))
    return grid, reps, scen


def paired_grid(diff: np.ndarray, confidence: float = 0.95, power: float = 0.8) -> dict[str, object]:
    """The mean of per-episode differences diff (R replicates, S scenarios: method - baseline, same seed and
    scenario) with an interval over both sources of noise: SE^2 = var(replicate means) / R + var(scenario means) / S
    (a conservative crossed design: each term also holds some of the other's noise), Student-t with R - 1 degrees of
    freedom (S - 1 with one replicate). mdd: the smallest true difference this design detects at alpha = 1 -
    confidence (two-sided) with `power`: (t_{1 - alpha/2} + t_power) * SE."""
    from scipy import stats as st

    r, s = diff.shape
    mean = float(diff.mean())
    var = (diff.mean(1).var(ddof=1) / r if r > 1 else 0.0) + (diff.mean(0).var(ddof=1) / s if s > 1 else 0.0)
    df = r - 1 if r > 1 else s - 1
    if df < 1:
        return {"mean": mean, "std": None, "ci95_low": None, "ci95_high": None, "n": r, "scenarios": s, "mdd": None}
    se = math.sqrt(var)
    half = float(st.t.ppf((1 + confidence) / 2, df)) * se
    return {"mean": mean, "std": se, "ci95_low": mean - half, "ci95_high": mean + half, "n": r, "scenarios": s, "df": df,
            "mdd": float((st.t.ppf((1 + confidence) / 2, df) + st.t.ppf(power, df)) * se),
            "replicate_means": [float(v) for v in diff.mean(1)]}


def comparisons(rollouts: pl.DataFrame) -> dict[str, dict]:
    """Every COMPARISONS pair present in the roll-outs: paired_grid of arm - baseline PDMS over the same replicates
    and scenarios."""
    arms = set(rollouts["arm"].to_list())
    out = {}
    for arm, base in COMPARISONS:
        if arm in arms and base in arms:
            (a, ra, sa), (b, rb, sb) = pdms_grid(rollouts, arm), pdms_grid(rollouts, base)
            if (ra, sa) != (rb, sb):
                raise ValueError(f"rollouts: {arm} and {base} do not share replicates and scenarios; rerun simulate")
            out[f"{arm}_vs_{base}"] = paired_grid(a - b)
    return out


def headline(table: list[dict], paired: dict[str, dict], synth_stats: dict, augment_stats: dict, sim_stats: dict,
             train_stats: dict[str, dict]) -> dict[str, object]:
    """PDMS per arm, the paired differences the claims read, infractions, L2, the design's size and power, the
    lowest real-camera share of any arm's batches, and the rasteriser's frames per second and time share."""
    by = {r["arm"]: r for r in table}
    missing = [a for a in ("il_real", "rap_r2r", "expert") if a not in by]
    if missing:
        raise ValueError(f"rollouts have no episodes of arms {missing} (the headline compares rap_r2r and il_real)")
    raster_render = synth_stats["render_seconds"]["raster"] + augment_stats["render_seconds"]
    train_seconds = sum(s["train_seconds"] for s in train_stats.values())
    pipeline = synth_stats["render_seconds"]["raster"] + synth_stats["render_seconds"]["real"] + augment_stats["render_seconds"] \
        + train_seconds + sim_stats["seconds"]
    out: dict[str, object] = {}
    for arm in (a for a in by if a != "expert"):
        out[f"pdms_{arm}"] = by[arm]["PDMS"]
        out[f"pdms_{arm}_std"] = by[arm]["PDMS_std"]
    mdds = [p["mdd"] for p in paired.values() if p.get("mdd") is not None]
    out |= {
        "pdms_expert": by["expert"]["PDMS"],
        "paired": paired,
        "collision_rate_il_real": by["il_real"]["collision_rate"], "collision_rate_rap_r2r": by["rap_r2r"]["collision_rate"],
        "off_road_rate_il_real": by["il_real"]["off_road_rate"], "off_road_rate_rap_r2r": by["rap_r2r"]["off_road_rate"],
        "l2_2s_il_real": by["il_real"].get("l2_2s"), "l2_2s_rap_r2r": by["rap_r2r"].get("l2_2s"),
        "test_scenarios": sim_stats["test_scenarios"],
        "replicates": min(r["replicates"] for r in table if r["arm"] != "expert"),
        "real_share_min": min(s["real_share"] for s in train_stats.values()),
        "min_detectable_pdms_diff": max(mdds) if mdds else None,
        "raster_frames_per_s": synth_stats["raster_frames_per_s_64x128"],
        "raster_frames_per_s_training_size": synth_stats["raster_frames_per_s"],
        "real_frames_per_s_training_size": synth_stats["real_frames_per_s"],
        "raster_render_seconds": raster_render, "train_seconds": train_seconds,
        "raster_render_share_of_training": raster_render / max(train_seconds, 1e-9),
        "raster_render_share_of_pipeline": raster_render / max(pipeline, 1e-9),
        "units": "PDMS in points (0-100); paired: arm - baseline per (replicate, scenario) episode, mean with a 95 % "
                 "interval over replicates and scenarios; mdd at alpha 0.05, power 0.8",
    }
    return out


def evaluate_rollouts(rollouts: pl.DataFrame, open_loop: pl.DataFrame, synth_stats: dict, augment_stats: dict, sim_stats: dict,
                      train_stats: dict[str, dict]) -> dict[str, object]:
    """metrics (the headline and the per-arm table) and the PDMS-per-arm figure of the roll-outs."""
    per_rep = per_replicate(rollouts, open_loop)
    table = arm_table(per_rep, rollouts["arm"].unique(maintain_order=True).to_list())  # the expert first, then simulate's order
    paired = comparisons(rollouts)
    return {"metrics": {"headline": headline(table, paired, synth_stats, augment_stats, sim_stats, train_stats), "table": table},
            "pdms_per_arm": pdms_per_arm(table, per_rep)}


def pdms_per_arm(table: list[dict], per_rep: pl.DataFrame) -> Figure:
    """Closed-loop PDMS per arm: a bar at the mean over replicates with its std, a dot per replicate (the expert grey)."""
    return per_arm_bars([r["arm"] for r in table], [r["PDMS"] for r in table], [r.get("PDMS_std", 0.0) for r in table],
                        [per_rep.filter(pl.col("arm") == r["arm"])["PDMS"].to_numpy() for r in table],
                        colors=["0.6"] + ["tab:blue"] * (len(table) - 1), ylabel="closed-loop PDMS (0-100)", ylim=(0, 105),
                        title="PDMS per arm on held-out scenarios (bar: mean over replicates, dots: replicates)")

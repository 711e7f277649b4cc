"""Closed-loop results per arm: the mean and spread over replicates of each replicate's means over the held-out
scenarios (PDMS and its parts, infraction rates, route completion, open-loop L2), and the headline the claims read
(arm 5, rap_r2r, against arm 1, il_real; the rasteriser's speed and time share)."""

from __future__ import annotations

import polars as pl
from matplotlib.figure import Figure

from paperdag.figures import per_arm_bars

COMPARED = ("il_real", "rap_r2r")  # the claims' arms: IL on real images only (arm 1), RAP with R2R (arm 5)


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


def headline(table: list[dict], synth_stats: dict, augment_stats: dict, sim_stats: dict, train_stats: dict[str, dict]) -> dict[str, object]:
    """PDMS per arm, the rap_r2r - il_real margin (and less the two arms' std summed), their infractions, L2, and the
    rasteriser's frames per second and share of the training and pipeline time."""
    by = {r["arm"]: r for r in table}
    missing = [a for a in COMPARED if a not in by]
    if missing:
        raise ValueError(f"rollouts have no episodes of arms {missing} (the headline compares {' and '.join(COMPARED)})")
    raster_render = synth_stats["render_seconds"]["raster"] + augment_stats["render_seconds"]
    train_seconds = sum(s["train_seconds"] for s in train_stats.values())
    pipeline = synth_stats["render_seconds"]["raster"] + synth_stats["render_seconds"]["real"] + augment_stats["render_seconds"] \
        + train_seconds + sim_stats["seconds"]
    headline: dict[str, object] = {}
    for arm in (a for a in by if a != "expert"):
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
    return headline


def pdms_per_arm(table: list[dict], per_rep: pl.DataFrame) -> Figure:
    """Closed-loop PDMS per arm: a bar at the mean over replicates with its std, a dot per replicate (the expert grey)."""
    return per_arm_bars([r["arm"] for r in table], [r["PDMS"] for r in table], [r.get("PDMS_std", 0.0) for r in table],
                        [per_rep.filter(pl.col("arm") == r["arm"])["PDMS"].to_numpy() for r in table],
                        colors=["0.6"] + ["tab:blue"] * (len(table) - 1), ylabel="closed-loop PDMS (0-100)", ylim=(0, 105),
                        title="PDMS per arm on held-out scenarios (bar: mean over replicates, dots: replicates)")

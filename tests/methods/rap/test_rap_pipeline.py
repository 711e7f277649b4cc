"""The rap pipeline at smoke scale, end to end (the shared repo conftest.py `smoke_build` built once; what every
pipeline must satisfy is tests/pipelines/test_contract.py): a model per arm and replicate, the headline PDMS per arm
and the paired comparisons, every augmentation kind and split, and each paired claim failing when the method's
roll-outs are replaced by its baseline's (pipeline contract, section 3)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
import yaml

from support import judged_after, smoke_group

pytestmark = smoke_group("rap")

ARMS = ["il_real", "raster", "recovery", "cross_agent", "rap_r2r"]
HEADLINE_KEYS = {f"pdms_{a}" for a in ARMS} | {f"pdms_{a}_std" for a in ARMS} | {
    "pdms_expert", "paired", "raster_frames_per_s", "raster_render_share_of_training", "test_scenarios", "replicates",
    "real_share_min", "min_detectable_pdms_diff"}
PAIRED_CLAIMS = {"rap_beats_il_real": ("rap_r2r", "il_real"), "recovery_beats_raster": ("recovery", "raster"),
                 "r2r_beats_cross_agent": ("rap_r2r", "cross_agent")}
CLAIMS = set(PAIRED_CLAIMS) | {"raster_500_fps", "augmentation_never_dominates"}


@pytest.fixture(scope="module")
def repo(smoke_build) -> Path:
    """The rap smoke repo after its one `dvc repro` (shared: copy it before changing it)."""
    return smoke_build("rap").repo


def test_one_model_per_arm_and_replicate(repo: Path) -> None:
    """The train matrix saves one planner per arm and replicate, and nothing else."""
    replicates = yaml.safe_load((repo / "params.yaml").read_text())["rap"]["replicates"]
    assert sorted(p.name for p in (repo / "data/rap/models").iterdir()) == sorted(
        f"{a}-{r}.safetensors" for a in ARMS for r in replicates)


def test_headline_has_the_issue_keys_and_consistent_values(repo: Path) -> None:
    """metrics.json's headline has every key the issue asks for; PDMS values are points in [0, 100], the expert's
    roll-outs are infraction-free; each paired difference is the difference of the two arms' means (one episode per
    replicate and scenario each); every arm but il_real trains on half real-camera samples."""
    metrics = json.loads((repo / "data/rap/metrics.json").read_text())
    h = metrics["headline"]
    assert HEADLINE_KEYS <= set(h)
    assert all(0.0 <= h[f"pdms_{a}"] <= 100.0 for a in ARMS)
    assert h["pdms_expert"] > 90.0 and h["raster_frames_per_s"] > 0
    scenarios = yaml.safe_load((repo / "params.yaml").read_text())["rap"]["synthesize"]["test_scenarios"]
    assert h["test_scenarios"] == scenarios and h["replicates"] == 1
    for arm, base in PAIRED_CLAIMS.values():
        p = h["paired"][f"{arm}_vs_{base}"]
        assert p["mean"] == pytest.approx(h[f"pdms_{arm}"] - h[f"pdms_{base}"]) and p["scenarios"] == scenarios
    assert h["real_share_min"] == pytest.approx(0.5)
    stats = {p.stem: json.loads(p.read_text()) for p in (repo / "data/rap/train_stats").iterdir()}
    assert all(s["real_share"] == (1.0 if s["arm"] == "il_real" else pytest.approx(0.5)) for s in stats.values())
    assert all(len(s["val_l2"]) >= 1 for s in stats.values())
    assert [r["arm"] for r in metrics["table"]] == ["expert", *ARMS]


def test_augment_writes_every_sample_kind_from_the_train_split_only(repo: Path) -> None:
    """The training table holds real logs, their rasters, recovery and cross-agent rasters of training frames only;
    each raster log pairs with a real one; validation and test frames never reach it."""
    stats = json.loads((repo / "data/rap/augment_stats.json").read_text())
    assert set(stats["counts"]) == {"real_log", "raster_log", "recovery", "cross_agent"}
    assert stats["counts"]["real_log"] == stats["counts"]["raster_log"]
    frames = pl.read_parquet(repo / "data/rap/frames.parquet")
    train_set = pl.read_parquet(repo / "data/rap/train_set.parquet")
    logged = train_set.filter(pl.col("source") == "real_log")["index"]
    assert set(frames.filter(pl.col("frame").is_in(logged.to_list()))["split"]) == {"train"}
    assert set(frames["split"]) == {"train", "val", "test"}


def test_claims_are_declared_on_paired_intervals(repo: Path) -> None:
    """pipelines/rap.yaml declares the paired claims on intervals (over replicates and scenarios) and the raster
    claims on plain numbers (held or not held, never within noise)."""
    from paperdag.engine.claims import evaluate_pipeline

    claims = evaluate_pipeline(repo, "rap")
    assert set(claims) == CLAIMS
    assert all(claims[c]["ci95_low"] is not None for c in PAIRED_CLAIMS)
    assert all(claims[c]["status"] in {"held", "not_held"} for c in CLAIMS - set(PAIRED_CLAIMS))


def _driving_as(base: str):
    """Roll-outs with every arm's episodes given `base`'s episode scores (same replicate, same scenario)."""
    def swap(rollouts: pl.DataFrame) -> pl.DataFrame:
        baseline = rollouts.filter(pl.col("arm") == base).drop("arm")
        trained = pl.col("arm").is_in(ARMS)
        swapped = rollouts.filter(trained).select("arm", "replicate", "scenario").join(baseline, on=["replicate", "scenario"])
        return pl.concat([rollouts.filter(~trained), swapped.select(rollouts.columns)])
    return swap


def test_paired_claims_fail_when_every_arm_drives_like_il_real(repo: Path) -> None:
    """Claim falsification (contract section 3): every arm's episodes replaced by IL-real's, so each claim's
    method drives exactly like its baseline (RAP like IL-real, recovery like raster, R2R like cross-agent): every
    paired difference is 0 and every paired claim not held, whatever it was before."""
    claims = judged_after(repo, "rap:evaluate", rollouts=_driving_as("il_real"))
    for claim in PAIRED_CLAIMS:
        assert claims[claim]["status"] == "not_held", claims[claim]
        assert claims[claim]["value"] == 0.0


def test_paired_claims_hold_when_every_method_drives_better_than_its_baseline(repo: Path) -> None:
    """The paired claims read the arms' episodes (at smoke scale the arms may tie already): RAP and recovery at 100
    PDMS in every episode and their baselines (IL-real, raster, cross-agent) at 50 hold every paired claim, +50."""
    methods = {method for method, _ in PAIRED_CLAIMS.values()}
    pdms = pl.when(pl.col("arm").is_in(methods)).then(100.0).otherwise(50.0)
    claims = judged_after(repo, "rap:evaluate", rollouts=lambda r: r.with_columns(pdms.cast(r["PDMS"].dtype).alias("PDMS")))
    for claim in PAIRED_CLAIMS:
        assert claims[claim]["status"] == "held", claims[claim]
        assert claims[claim]["value"] == 50.0

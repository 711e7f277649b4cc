"""The repository's real mfc pipeline, copied into a throw-away git + DVC repo, run end to end by `dvc repro` at smoke scale."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
import yaml

from support import dvc, missing_outputs, pipeline_repo, stages_run

SMOKE = [  # small enough that the four stages' own work is a few seconds; the fixed MLflow cost dominates
    "mfc.synthesize.gaussian_n=2000",
    "mfc.synthesize.gaussian_noisy_n=600",
    "mfc.synthesize.uniform_n=600",
    "mfc.synthesize.hamming_n=400",
    "mfc.synthesize.jaccard_n=400",
    "mfc.synthesize.edit_n=300",
    "mfc.train.points_per_cluster=50",
]
HEADLINE_KEYS = {"cost_ratio_mst", "distance_call_fraction", "forest_distance_call_fraction", "speedup_vs_exact", "bound_violations"}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A git + DVC repo holding only the mfc pipeline at smoke scale, after one `dvc repro` (and that run's output)."""
    repo = pipeline_repo(tmp_path_factory.mktemp("mfc") / "repo", "mfc", SMOKE)
    return repo, dvc(repo, "repro").stdout


def test_repro_runs_every_stage_and_writes_the_declared_outputs(built: tuple[Path, str]) -> None:
    """One `dvc repro` runs the four mfc stages and leaves every declared output, the trade-off plot included."""
    repo, output = built
    assert sorted(stages_run(output)) == ["mfc-evaluate", "mfc-infer", "mfc-synthesize", "mfc-train"]
    assert missing_outputs(repo, "mfc") == []
    assert (repo / "data/mfc/plots/tradeoff.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_headline_reports_the_targets_and_no_bound_is_violated(built: tuple[Path, str]) -> None:
    """metrics.json's headline has the mfc.md target keys, at the default budget, with zero bound violations."""
    repo = built[0]
    metrics = json.loads((repo / "data/mfc/metrics.json").read_text())
    default = yaml.safe_load((repo / "params.yaml").read_text())["mfc"]["infer"]["extra_reps_per_cluster"]
    headline = metrics["headline"]
    assert HEADLINE_KEYS <= set(headline)
    assert headline["bound_violations"] == 0
    assert headline["budget"] == f"B={default}t"
    assert 1.0 <= headline["cost_ratio_mst"] and 0 < headline["distance_call_fraction"] < 1
    assert set(metrics["targets"]) == {"bound_violations", "cost_ratio_mst", "distance_call_fraction", "speedup_vs_exact"}
    assert all(row["within_bound"] for row in metrics["table"])


def test_table_has_a_row_per_instance_variant_and_budget(built: tuple[Path, str]) -> None:
    """Every instance has exact MST, simple, opt, and the fixed-r / greedy-B / dp-B sweeps with the default budget in each."""
    repo = built[0]
    params = yaml.safe_load((repo / "params.yaml").read_text())["mfc"]
    infer = params["infer"]
    table = pl.DataFrame(json.loads((repo / "data/mfc/metrics.json").read_text())["table"])
    r_sweep = {f"r={r}" for r in [*infer["r_sweep"], infer["reps_per_component"]]}
    budget_sweep = {f"B={e}t" for e in [*infer["budget_sweep"], infer["extra_reps_per_cluster"]]}
    expected = {"exact-mst": {""}, "simple": {""}, "opt": {""}, "fixed-r": r_sweep, "greedy-B": budget_sweep, "dp-B": budget_sweep}
    assert set(table["instance"]) == set(params["synthesize"]["instances"])
    for (instance, variant), rows in table.group_by("instance", "variant"):
        assert sorted(rows["budget"]) == sorted(expected[variant]), (instance, variant)  # one row per budget, none twice
    assert set(table["variant"]) == set(expected)
    assert table.group_by("instance").len()["len"].to_list() == [sum(map(len, expected.values()))] * len(set(table["instance"]))


def test_noisy_instance_has_a_worse_forest_and_reports_gamma(built: tuple[Path, str]) -> None:
    """gaussian_noisy gets mfc.train.noise_per_instance's noise; gamma is reported per instance and the 2 gamma bound holds."""
    metrics = json.loads((built[0] / "data/mfc/metrics.json").read_text())
    noisy = [r for r in metrics["table"] if r["instance"] == "gaussian_noisy"]
    assert {r["noise"] for r in noisy} == {0.1}
    assert all(isinstance(r["gamma"], int) and r["gamma"] >= 1 for r in metrics["table"])
    opt = next(r for r in noisy if r["variant"] == "opt")
    assert 1.0 < opt["cost_ratio_mst"] <= 2 * opt["gamma"]  # the noisy forest costs more than the MST, within 2 gamma


def test_second_repro_runs_nothing(built: tuple[Path, str]) -> None:
    """A second `dvc repro` with nothing changed reruns no stage."""
    assert stages_run(dvc(built[0], "repro").stdout) == []

"""The mfc stage functions chained by hand on tiny params: outputs named as declared, JSON-clean, no violations."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
import stages.mfc as mfc  # noqa: E402  (a module that fails to import fails this file, never skips it)


def tiny_params(points_file: str) -> dict[str, dict[str, object]]:
    params = yaml.safe_load((ROOT / "params.yaml").read_text())["mfc"]
    for key in ("gaussian_n", "gaussian_noisy_n", "uniform_n", "hamming_n", "jaccard_n", "edit_n"):
        params["synthesize"][key] = 150
    params["synthesize"]["instances"] = ["gaussian", "gaussian_noisy", "uniform", "hamming", "jaccard", "edit"]
    params["synthesize"]["points_file"] = points_file
    params["train"]["points_per_cluster"] = 25
    params["infer"]["extra_reps_per_cluster"] = 2
    return params


def declared(stage: str, kind: str) -> set[str]:
    spec = yaml.safe_load((ROOT / "pipelines" / "mfc.yaml").read_text())["stages"][stage]
    return set(spec.get(kind, {}))


def test_stages_chain_and_produce_declared_outputs(tmp_path: Path) -> None:
    """synthesize -> train -> infer -> evaluate runs, returns exactly the declared outputs, all bounds hold."""
    user_points = tmp_path / "points.npy"
    np.save(user_points, np.random.default_rng(0).random((60, 5)))
    p = tiny_params(str(user_points))
    synth = mfc.synthesize(mfc.SynthesizeParams(**p["synthesize"], seed=1))
    assert set(synth) == declared("synthesize", "outs")
    points = synth["points"]
    assert set(points["instance"].unique()) == {"gaussian", "gaussian_noisy", "uniform", "hamming", "jaccard", "edit", "file"}

    trained = mfc.train(mfc.TrainParams(**p["train"], seed=2), points=points)
    assert set(trained) == declared("train", "outs")
    inferred = mfc.infer(mfc.InferParams(**p["infer"]), points=points, **{k: trained[k] for k in ("forest", "forest_edges")})
    assert set(inferred) == declared("infer", "outs")
    assert isinstance(inferred["results"], pl.DataFrame) and inferred["results"]["spanning"].all()

    evaluated = mfc.evaluate(
        mfc.EvaluateParams(**p["evaluate"]),
        points=points,
        forest=trained["forest"],
        forest_stats=trained["forest_stats"],
        results=inferred["results"],
    )
    assert set(evaluated) == declared("evaluate", "metrics") | declared("evaluate", "plots")
    metrics = evaluated["metrics"]
    assert json.loads(json.dumps(metrics)) == metrics  # plain JSON values only
    assert metrics["headline"]["bound_violations"] == 0
    assert {"cost_ratio_mst", "distance_call_fraction", "forest_distance_call_fraction", "speedup_vs_exact", "variant"} <= set(
        metrics["headline"]
    )
    assert all(row["within_bound"] for row in metrics["table"])
    json.dumps(trained["forest_stats"])


def test_sweep_gives_a_row_per_budget_and_headline_reads_the_default() -> None:
    """Each swept variant has one table row per budget (default included); the headline is at the default budget."""
    p = tiny_params("")
    p["synthesize"]["instances"] = ["gaussian", "gaussian_noisy"]
    p["infer"].update(r_sweep=[1, 3], budget_sweep=[0, 4], reps_per_component=2, extra_reps_per_cluster=1)
    p["train"]["noise_per_instance"] = {"gaussian_noisy": 0.3}
    points = mfc.synthesize(mfc.SynthesizeParams(**p["synthesize"], seed=1))["points"]
    trained = mfc.train(mfc.TrainParams(**p["train"], seed=2), points=points)
    results = mfc.infer(mfc.InferParams(**p["infer"]), points=points, forest=trained["forest"], forest_edges=trained["forest_edges"])[
        "results"
    ]
    metrics = mfc.evaluate(
        mfc.EvaluateParams(**p["evaluate"]), points=points, forest=trained["forest"], forest_stats=trained["forest_stats"], results=results
    )["metrics"]
    budgets = {
        (r["instance"], r["variant"]): sorted((b["budget"] for b in metrics["table"] if (b["instance"], b["variant"]) == (r["instance"], r["variant"])))
        for r in metrics["table"]
    }
    for name in ("gaussian", "gaussian_noisy"):
        assert budgets[(name, "fixed-r")] == ["r=1", "r=2", "r=3"]
        assert budgets[(name, "greedy-B")] == budgets[(name, "dp-B")] == ["B=0t", "B=1t", "B=4t"]
        assert budgets[(name, "simple")] == budgets[(name, "opt")] == budgets[(name, "exact-mst")] == [""]
    assert metrics["headline"]["budget"] == "B=1t"
    assert {r["instance"]: r["noise"] for r in metrics["table"]} == {"gaussian": 0.0, "gaussian_noisy": 0.3}
    assert all(r["within_bound"] for r in metrics["table"])
    # B = 0 is `simple`: the curves start at the prior method
    simple = {r["instance"]: r["cost_ratio_mst"] for r in metrics["table"] if r["variant"] == "simple"}
    zero = {r["instance"]: r["cost_ratio_mst"] for r in metrics["table"] if r["variant"] == "greedy-B" and r["budget"] == "B=0t"}
    assert zero == pytest.approx(simple)

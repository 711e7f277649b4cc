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
mfc = pytest.importorskip("stages.mfc")


def tiny_params(points_file: str) -> dict[str, dict[str, object]]:
    params = yaml.safe_load((ROOT / "params.yaml").read_text())["mfc"]
    for key in ("gaussian_n", "uniform_n", "hamming_n", "jaccard_n", "edit_n"):
        params["synthesize"][key] = 150
    params["synthesize"]["instances"] = ["gaussian", "uniform", "hamming", "jaccard", "edit"]
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
    assert set(points["instance"].unique()) == {"gaussian", "uniform", "hamming", "jaccard", "edit", "file"}

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


def test_unknown_instance_names_the_key() -> None:
    """A misspelt instance is rejected with the params.yaml key and the valid names."""
    p = tiny_params("")
    p["synthesize"]["instances"] = ["gausian"]
    with pytest.raises(ValueError, match="mfc.synthesize.instances"):
        mfc.synthesize(mfc.SynthesizeParams(**p["synthesize"], seed=1))

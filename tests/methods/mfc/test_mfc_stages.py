"""The mfc stage functions chained by hand on tiny params: outputs named as declared, JSON-clean, no violations."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import yaml

import stages.mfc as mfc  # a module that fails to import fails this file, never skips it

ROOT = Path(__file__).resolve().parents[3]


def tiny_params(points_file: str) -> dict[str, dict[str, object]]:
    params = yaml.safe_load((ROOT / "params.yaml").read_text())["mfc"]
    for key in ("gaussian_n", "gaussian_noisy_n", "uniform_n", "hamming_n", "jaccard_n", "edit_n"):
        params["synthesize"][key] = 150
    params["synthesize"]["instances"] = ["gaussian", "gaussian_noisy", "uniform", "hamming", "jaccard", "edit"]
    params["synthesize"]["points_file"] = points_file
    params["train"]["points_per_cluster"] = 25
    params["infer"]["extra_reps_per_cluster"] = 2
    params["compare"].update(replicates=3, gaussian_n=200, digits_n=200, t_labels=["sqrt(n)", "sqrt(n)/4"], multipliers=[2],
                             r_max=3, worst_case_t=6)
    return params


def tiny_compare(p: dict) -> pl.DataFrame:
    return mfc.compare(mfc.CompareParams(**p["compare"], seed=3))["compare"]


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
        compare=(compared := tiny_compare(p)),
    )
    assert set(compared["family"]) == {"gaussian", "digits", "worst"} and set(compared["seed"]) == {0, 1, 2}
    assert set(evaluated) == declared("evaluate", "metrics") | declared("evaluate", "plots")
    metrics = evaluated["metrics"]
    assert json.loads(json.dumps(metrics)) == metrics  # plain JSON values only
    assert metrics["headline"]["bound_violations"] == 0
    headline = metrics["headline"]
    assert headline["replicates"] == 3 and headline["replicated_minus_fixed_r"]["n"] == 3
    assert isinstance(headline["gamma_weight_ratio"], float) and 1.0 <= headline["alpha_bound"] <= 2.0
    assert metrics["worst_case"]["gamma"] == pytest.approx(1.0)  # the 2 gamma bound is tight there too
    assert all(s["gamma"]["mean"] > 0 and s["gamma"]["n"] == 3 for s in metrics["replicated"]["settings"])
    assert headline["worst_case_simple_cost_ratio_opt"] == pytest.approx((6 + 5 * (1 + 0.01**2) ** 0.5) / (6 + 5 * 0.01), rel=1e-9)
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
        mfc.EvaluateParams(**p["evaluate"]), points=points, forest=trained["forest"], forest_stats=trained["forest_stats"], results=results,
        compare=tiny_compare(p),
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


def test_compare_params_are_checked_at_load() -> None:
    """r_max below the largest R / t multiplier, a multiplier of 1, or a single replicate is refused when the params
    load (paperdag.engine.params.build), on the params.yaml key at fault."""
    from paperdag.engine.errors import SpecError
    from paperdag.engine.params import build

    p = tiny_params("")["compare"]
    for key, bad in (("r_max", 1), ("multipliers", [1, 2]), ("replicates", 1)):
        flat = {k: (f"mfc.compare.{k}", v) for k, v in {**p, key: bad}.items()}
        with pytest.raises(SpecError, match=f"mfc.compare.{key}"):
            build(mfc.CompareParams, flat, seed=0, stage="mfc:compare")

"""The repository's real welfare_nns pipeline, copied into a throw-away git + DVC repo, run end to end by `dvc repro` at smoke scale."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
import yaml

from support import dvc, missing_outputs, pipeline_repo, stages_run

SMOKE = [  # a few seconds of stage work per stage; MLflow's fixed cost and the MiniLM load dominate
    "welfare_nns.synthesize.gauss_n=4000",
    "welfare_nns.synthesize.n_queries=20",
    "welfare_nns.synthesize.products_n=300",
    "welfare_nns.index.ef_construction=40",
    "welfare_nns.infer.fetch_candidates=1000",
    "welfare_nns.infer.mmr_candidates=50",
    "welfare_nns.infer.timing_repeats=1",
]
HEADLINE_KEYS = {
    "nash_vs_div_dominates", "nash_objective_vs_exact", "nash_latency_ratio", "attributes_searched",
    "greedy_ms_per_query", "nash_approx_ratio", "nash_entropy", "topk_entropy", "nash_latency_ratio_minus_bound",
}
CLAIMS = {"dominates_div_ann", "near_exact_oracle", "welfare_step_costs_less_than_a_search", "greedy_within_50ms"}
STAGES = ["welfare_nns-claims", "welfare_nns-evaluate", "welfare_nns-index", "welfare_nns-infer", "welfare_nns-synthesize"]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A git + DVC repo holding only the welfare_nns pipeline at smoke scale, after one `dvc repro` (and its output)."""
    repo = pipeline_repo(tmp_path_factory.mktemp("welfare_nns") / "repo", "welfare_nns", SMOKE)
    return repo, dvc(repo, "repro").stdout


def metrics(repo: Path) -> dict:
    return json.loads((repo / "data/welfare_nns/metrics.json").read_text())


def test_repro_runs_every_stage_and_writes_the_declared_outputs(built: tuple[Path, str]) -> None:
    """One `dvc repro` runs the four welfare_nns stages and the engine's claims stage and leaves every declared output,
    index directories and plot included."""
    repo, output = built
    assert sorted(stages_run(output)) == STAGES
    assert missing_outputs(repo, "welfare_nns") == []
    assert (repo / "data/welfare_nns/index/attribute/gauss.clus/attributes.json").exists()
    assert (repo / "data/welfare_nns/plots/pareto.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_headline_has_the_claimed_keys_and_nash_beats_top_k_on_diversity(built: tuple[Path, str]) -> None:
    """The headline carries the keys the claims read (no free-form targets block); Nash-ANN is more diverse than
    top-k, near the exact oracle, and costs one search per attribute searched (plus the welfare step)."""
    m = metrics(built[0])
    headline = m["headline"]
    assert HEADLINE_KEYS <= set(headline)
    assert "targets" not in m
    assert headline["attributes_searched"] == 20
    bound = headline["attributes_searched"] + 1
    assert headline["nash_latency_ratio_minus_bound"] == pytest.approx(headline["nash_latency_ratio"] - bound)
    assert headline["nash_entropy"] > headline["topk_entropy"]
    assert 0.5 < headline["nash_approx_ratio"] <= 1.0
    assert headline["nash_objective_vs_exact"] >= 0.9
    assert 0 < headline["greedy_ms_per_query"] < 50


def test_table_has_every_method_and_sweep_per_scheme(built: tuple[Path, str]) -> None:
    """Single-attribute schemes carry top-k, Div-ANN per cap, MMR per lambda, Nash-ANN (ANN and exact) per eta and the
    p-sweeps; multi-attribute ones the greedy per eta and p-FetchUnion per p; p = 1 equals top-k's relevance."""
    repo = built[0]
    infer = yaml.safe_load((repo / "params.yaml").read_text())["welfare_nns"]["infer"]
    table = pl.DataFrame(metrics(repo)["table"])
    sweeps = {"div-ann": infer["caps"], "mmr": infer["mmr_lambdas"], "nash-ann": infer["eta_sweep"], "nash-ann-exact": infer["eta_sweep"],
              "p-mean": infer["p_sweep"], "p-fetch-union": infer["p_sweep"], "greedy-nsw": infer["eta_sweep"]}
    for (dataset, scheme, kind), rows in table.group_by("dataset", "scheme", "kind"):
        methods = {"exact-top-k", "top-k", "mmr", "p-fetch-union"} | (
            {"div-ann", "nash-ann", "nash-ann-exact", "p-mean"} if kind == "single" else {"greedy-nsw"})
        assert set(rows["method"]) == methods, (dataset, scheme)
        for method, values in sweeps.items():
            if method in methods:
                assert sorted(rows.filter(pl.col("method") == method)["param"]) == sorted(map(float, values)), (dataset, scheme, method)
        if kind == "single":
            p_one = rows.filter((pl.col("method") == "p-mean") & (pl.col("param") == 1.0))["ratio"][0]
            cap_k = rows.filter((pl.col("method") == "div-ann") & (pl.col("param") == float(infer["k"])))["ratio"][0]
            assert p_one == pytest.approx(cap_k)  # both are top-k over the per-attribute candidates
    assert {"gauss", "products", "digits"} == set(table["dataset"])


def test_claims_are_declared_and_evaluated(built: tuple[Path, str]) -> None:
    """pipelines/welfare_nns.yaml declares the four welfare_nns.md claims on headline keys; each gets a status (plain
    numbers: held or not held) and claims.json lists them."""
    from paperdag.engine.claims import evaluate_pipeline

    repo = built[0]
    claims = evaluate_pipeline(repo, "welfare_nns")
    assert set(claims) == CLAIMS
    assert all(c["status"] in {"held", "not_held"} for c in claims.values())
    assert claims["dominates_div_ann"]["baseline"] == "div-ann"
    assert set(json.loads((repo / "data/welfare_nns/claims.json").read_text())["claims"]) == CLAIMS


def test_second_repro_runs_nothing(built: tuple[Path, str]) -> None:
    """A second `dvc repro` with nothing changed reruns no stage."""
    assert stages_run(dvc(built[0], "repro").stdout) == []

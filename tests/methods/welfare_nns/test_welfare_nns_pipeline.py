"""The welfare_nns pipeline at smoke scale, end to end (the shared repo conftest.py `smoke_build` built once; what
every pipeline must satisfy is tests/pipelines/test_contract.py): the per-attribute indexes, the headline's
diversity and cost, every method and sweep per scheme, claims on plain numbers."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
import yaml

from support import smoke_group

pytestmark = smoke_group("welfare_nns")

HEADLINE_KEYS = {
    "nash_vs_div_dominates", "nash_objective_vs_exact", "nash_latency_ratio", "attributes_searched",
    "greedy_ms_per_query", "nash_approx_ratio", "nash_entropy", "topk_entropy", "nash_latency_ratio_minus_bound",
}
CLAIMS = {"dominates_div_ann", "near_exact_oracle", "welfare_step_costs_less_than_a_search", "greedy_within_50ms"}


@pytest.fixture(scope="module")
def repo(smoke_build) -> Path:
    """The welfare_nns smoke repo after its one `dvc repro` (shared: copy it before changing it)."""
    return smoke_build("welfare_nns").repo


def metrics(repo: Path) -> dict:
    return json.loads((repo / "data/welfare_nns/metrics.json").read_text())


def test_the_per_attribute_index_is_written(repo: Path) -> None:
    """The index stage writes the per-attribute index of the Gaussian Clus scheme (its attributes.json included)."""
    assert (repo / "data/welfare_nns/index/attribute/gauss.clus/attributes.json").exists()


def test_headline_has_the_claimed_keys_and_nash_beats_top_k_on_diversity(repo: Path) -> None:
    """The headline carries the keys the claims read (no free-form targets block); Nash-ANN is more diverse than
    top-k, near the exact oracle, and costs one search per attribute searched (plus the welfare step)."""
    m = metrics(repo)
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


def test_table_has_every_method_and_sweep_per_scheme(repo: Path) -> None:
    """Single-attribute schemes carry top-k, Div-ANN per cap, MMR per lambda, Nash-ANN (ANN and exact) per eta and the
    p-sweeps; multi-attribute ones the greedy per eta and p-FetchUnion per p; p = 1 equals top-k's relevance."""
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


def test_claims_are_declared_on_plain_numbers(repo: Path) -> None:
    """pipelines/welfare_nns.yaml declares the four welfare_nns.md claims on headline keys, each against its
    baseline; each is a plain number, so held or not held, never within noise."""
    from paperdag.engine.claims import evaluate_pipeline

    claims = evaluate_pipeline(repo, "welfare_nns")
    assert set(claims) == CLAIMS
    assert all(c["status"] in {"held", "not_held"} for c in claims.values())
    assert claims["dominates_div_ann"]["baseline"] == "div-ann"

"""The milco pipeline at smoke scale, end to end (the shared repo conftest.py `smoke_build` built once; what every
pipeline must satisfy is tests/pipelines/test_contract.py): saved models per ablation, headline and table per method
and pruning level, LexEcho's dimensions, claims on plain numbers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from support import smoke_group

pytestmark = smoke_group("milco")

HEADLINE_KEYS = {"ndcg10_milco", "ndcg10_bm25", "ndcg10_dense", "ndcg10_no_echo", "active_dims_pruned",
                 "index_size_ratio_dense_over_milco", "latency_ratio_dense_over_milco", "ndcg10_milco_minus_bm25",
                 "ndcg10_milco_minus_dense", "ndcg10_milco_minus_no_echo_propernoun", "ndcg10_milco_pruned_minus_dense"}
CLAIMS = {"beats_bm25_crosslingual", "beats_dense_crosslingual", "lexecho_helps_proper_nouns", "about_30_active_dims",
          "pruned_index_5x_smaller", "pruned_search_faster", "pruned_beats_dense"}
VARIANTS = ("milco", "no_echo", "no_connector", "no_align")


@pytest.fixture(scope="module")
def repo(smoke_build) -> Path:
    """The milco smoke repo after its one `dvc repro` (shared: copy it before changing it)."""
    return smoke_build("milco").repo


def test_models_are_saved_per_ablation(repo: Path) -> None:
    """Each variant's model is a save_pretrained encoder with its tokenizer and the MILCO config; the teacher and the
    source tokenizer are saved too."""
    for variant in VARIANTS:
        model = repo / "data/milco/models" / variant
        assert (model / "encoder" / "config.json").exists() and (model / "encoder" / "tokenizer.json").exists()
        assert (model / "milco_config.json").exists()
    assert (repo / "data/milco/teacher/config.json").exists() and (repo / "data/milco/tokenizer/tokenizer.json").exists()


def test_headline_and_table(repo: Path) -> None:
    """metrics.json carries the headline keys the claims read (each difference = method - baseline; no free-form
    targets block), and a table row per method and pruning level with nDCG@10 in [0, 1]; pruning never adds active
    dimensions."""
    params = yaml.safe_load((repo / "params.yaml").read_text())["milco"]
    rhos, headline_rho = params["index"]["rhos"], params["evaluate"]["headline_rho"]
    metrics = json.loads((repo / "data/milco/metrics.json").read_text())
    headline, table = metrics["headline"], metrics["table"]
    assert HEADLINE_KEYS <= set(headline)
    assert "targets" not in metrics
    h = headline
    assert h["ndcg10_milco_minus_bm25"] == pytest.approx(h["ndcg10_milco"] - h["ndcg10_bm25"])
    assert h["ndcg10_milco_minus_dense"] == pytest.approx(h["ndcg10_milco"] - h["ndcg10_dense"])
    assert h["ndcg10_milco_minus_no_echo_propernoun"] == pytest.approx(h["ndcg10_milco_propernoun"] - h["ndcg10_no_echo"])
    assert h["ndcg10_milco_pruned_minus_dense"] == pytest.approx(h["ndcg10_milco_pruned"] - h["ndcg10_dense"])
    rows = {(r["variant"], r["rho"]) for r in table}
    expected = {(v, rho) for v in VARIANTS for rho in rhos}
    assert rows == expected | {("dense", None), ("bm25", None), ("translate_bm25", None)}
    assert all(0.0 <= r["ndcg10"] <= 1.0 and {"recall100", "active_dims", "index_bytes", "latency_ms"} <= set(r) for r in table)
    for v in VARIANTS:
        full, pruned = (next(r for r in table if r["variant"] == v and r["rho"] == rho) for rho in (1.0, headline_rho))
        assert pruned["active_dims"] <= full["active_dims"] and pruned["index_bytes"] <= full["index_bytes"]
    assert headline["active_dims_pruned"] == next(r for r in table if r["variant"] == "milco" and r["rho"] == headline_rho)["active_dims"]
    assert headline["index_size_ratio_dense_over_milco"] > 0 and headline["latency_ratio_dense_over_milco"] > 0


def test_no_echo_variant_has_no_source_token_dimensions(repo: Path) -> None:
    """The no-LexEcho ablation indexes pivot terms only; the full model adds echoed source tokens."""
    stats = json.loads((repo / "data/milco/index_stats.json").read_text())["sparse"]
    by = {(s["variant"], s["rho"]): s for s in stats}
    assert by[("no_echo", 1.0)]["echo_dims"] == 0
    assert by[("milco", 1.0)]["echo_dims"] > 0


def test_claims_are_declared_on_plain_numbers(repo: Path) -> None:
    """pipelines/milco.yaml declares one claim per milco.md target, on headline keys; each is a plain number, so held
    or not held, never within noise."""
    from paperdag.engine.claims import evaluate_pipeline

    claims = evaluate_pipeline(repo, "milco")
    assert set(claims) == CLAIMS
    assert all(c["status"] in {"held", "not_held"} for c in claims.values())

"""The repository's real milco pipeline, copied into a throw-away git + DVC repo, run end to end by `dvc repro` at smoke scale."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support import dvc, missing_outputs, pipeline_repo, stages_run

SMOKE = [  # a few seconds of work per stage; the fixed per-stage cost (imports, MLflow) dominates
    "milco.synthesize.n_docs=240",
    "milco.synthesize.n_parallel=150",
    "milco.synthesize.n_train_queries=120",
    "milco.synthesize.n_test_crosslingual=40",
    "milco.synthesize.n_test_propernoun=20",
    "milco.synthesize.real_name_locales=[fr]",
    "milco.model.src_vocab_size=1500",
    "milco.model.en_vocab_size=300",
    "milco.model.hidden_size=32",
    "milco.model.teacher_hidden_size=32",
    "milco.model.num_layers=1",
    "milco.model.intermediate_size=64",
    "milco.train_teacher.warmup_steps=10",
    "milco.train_teacher.distill_steps=10",
    "milco.align.steps=15",
    "milco.distill.steps=15",
    "milco.index.rhos=[0.4, 1.0]",
    "milco.retrieve.latency_repeats=1",
    "milco.evaluate.headline_rho=0.4",
]
STAGES = ["milco-align", "milco-align_no_connector", "milco-claims", "milco-distill", "milco-distill_no_align", "milco-distill_no_connector",
          "milco-distill_no_echo", "milco-evaluate", "milco-index", "milco-retrieve", "milco-synthesize", "milco-train_teacher"]
HEADLINE_KEYS = {"ndcg10_milco", "ndcg10_bm25", "ndcg10_dense", "ndcg10_no_echo", "active_dims_pruned",
                 "index_size_ratio_dense_over_milco", "latency_ratio_dense_over_milco", "ndcg10_milco_minus_bm25",
                 "ndcg10_milco_minus_dense", "ndcg10_milco_minus_no_echo_propernoun", "ndcg10_milco_pruned_minus_dense"}
CLAIMS = {"beats_bm25_crosslingual", "beats_dense_crosslingual", "lexecho_helps_proper_nouns", "about_30_active_dims",
          "pruned_index_5x_smaller", "pruned_search_faster", "pruned_beats_dense"}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A git + DVC repo holding only the milco pipeline at smoke scale, after one `dvc repro` (and that run's output)."""
    repo = pipeline_repo(tmp_path_factory.mktemp("milco") / "repo", "milco", SMOKE)
    return repo, dvc(repo, "repro").stdout


def test_repro_runs_every_stage_and_writes_the_declared_outputs(built: tuple[Path, str]) -> None:
    """One `dvc repro` runs all eleven milco stages and the engine's claims stage; every declared output exists,
    models as save_pretrained dirs."""
    repo, output = built
    assert sorted(stages_run(output)) == STAGES
    assert missing_outputs(repo, "milco") == []
    for variant in ("milco", "no_echo", "no_connector", "no_align"):
        model = repo / "data/milco/models" / variant
        assert (model / "encoder" / "config.json").exists() and (model / "encoder" / "tokenizer.json").exists()
        assert (model / "milco_config.json").exists()
    assert (repo / "data/milco/teacher/config.json").exists() and (repo / "data/milco/tokenizer/tokenizer.json").exists()
    assert (repo / "data/milco/plots/pruning_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_headline_and_table(built: tuple[Path, str]) -> None:
    """metrics.json carries the headline keys the claims read (each difference = method - baseline; no free-form
    targets block), and a table row per method and pruning level with nDCG@10 in [0, 1]; pruning never adds active
    dimensions."""
    metrics = json.loads((built[0] / "data/milco/metrics.json").read_text())
    headline, table = metrics["headline"], metrics["table"]
    assert HEADLINE_KEYS <= set(headline)
    assert "targets" not in metrics
    h = headline
    assert h["ndcg10_milco_minus_bm25"] == pytest.approx(h["ndcg10_milco"] - h["ndcg10_bm25"])
    assert h["ndcg10_milco_minus_dense"] == pytest.approx(h["ndcg10_milco"] - h["ndcg10_dense"])
    assert h["ndcg10_milco_minus_no_echo_propernoun"] == pytest.approx(h["ndcg10_milco_propernoun"] - h["ndcg10_no_echo"])
    assert h["ndcg10_milco_pruned_minus_dense"] == pytest.approx(h["ndcg10_milco_pruned"] - h["ndcg10_dense"])
    rows = {(r["variant"], r["rho"]) for r in table}
    expected = {(v, rho) for v in ("milco", "no_echo", "no_connector", "no_align") for rho in (0.4, 1.0)}
    assert rows == expected | {("dense", None), ("bm25", None), ("translate_bm25", None)}
    assert all(0.0 <= r["ndcg10"] <= 1.0 and {"recall100", "active_dims", "index_bytes", "latency_ms"} <= set(r) for r in table)
    for v in ("milco", "no_echo", "no_connector", "no_align"):
        full, pruned = (next(r for r in table if r["variant"] == v and r["rho"] == rho) for rho in (1.0, 0.4))
        assert pruned["active_dims"] <= full["active_dims"] and pruned["index_bytes"] <= full["index_bytes"]
    assert headline["active_dims_pruned"] == next(r for r in table if r["variant"] == "milco" and r["rho"] == 0.4)["active_dims"]
    assert headline["index_size_ratio_dense_over_milco"] > 0 and headline["latency_ratio_dense_over_milco"] > 0


def test_no_echo_variant_has_no_source_token_dimensions(built: tuple[Path, str]) -> None:
    """The no-LexEcho ablation indexes pivot terms only; the full model adds echoed source tokens."""
    stats = json.loads((built[0] / "data/milco/index_stats.json").read_text())["sparse"]
    by = {(s["variant"], s["rho"]): s for s in stats}
    assert by[("no_echo", 1.0)]["echo_dims"] == 0
    assert by[("milco", 1.0)]["echo_dims"] > 0


def test_claims_are_declared_and_evaluated(built: tuple[Path, str]) -> None:
    """pipelines/milco.yaml declares one claim per milco.md target, on headline keys; each gets a status (plain
    numbers: held or not held) and claims.json lists them."""
    from paperdag.engine.claims import evaluate_pipeline

    repo = built[0]
    claims = evaluate_pipeline(repo, "milco")
    assert set(claims) == CLAIMS
    assert all(c["status"] in {"held", "not_held"} for c in claims.values())
    assert set(json.loads((repo / "data/milco/claims.json").read_text())["claims"]) == CLAIMS


def test_second_repro_runs_nothing(built: tuple[Path, str]) -> None:
    """A second `dvc repro` with nothing changed reruns no stage."""
    assert stages_run(dvc(built[0], "repro").stdout) == []

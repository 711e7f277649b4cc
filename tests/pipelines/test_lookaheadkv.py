"""The repository's real lookaheadkv pipeline, copied into a throw-away git + DVC repo, run end to end by `dvc repro`
at smoke scale."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support import dvc, missing_outputs, pipeline_repo, stages_run

SMOKE_OVERRIDES = [  # contexts of 6 pairs, a 1-layer model trained 20 steps: the stages' own work is seconds
    "lookaheadkv.synthesize.pairs=6",
    "lookaheadkv.synthesize.lm_examples=40",
    "lookaheadkv.synthesize.drill_examples=40",
    "lookaheadkv.synthesize.lookahead_examples=8",
    "lookaheadkv.synthesize.eval_examples=6",
    "lookaheadkv.train_lm.hidden_size=32",
    "lookaheadkv.train_lm.num_layers=1",
    "lookaheadkv.train_lm.intermediate_size=64",
    "lookaheadkv.train_lm.steps=20",
    "lookaheadkv.train_lm.curriculum=[6]",
    "lookaheadkv.train_lm.batch_size=8",
    "lookaheadkv.train_lookahead.n_tokens=4",
    "lookaheadkv.train_lookahead.steps=5",
    "lookaheadkv.infer.budgets=[4, 8]",
]
STAGES = ["synthesize", "train_lm", "targets", "train_lookahead", "infer", "evaluate"]
HEADLINE_KEYS = {"exact_match", "lkv_minus_snapkv_question_before", "overlap_with_oracle_lkv", "overlap_with_oracle_snapkv",
                 "overhead_ratio_draft_over_lkv", "overhead_ratio_lkv_over_snapkv", "lkv_minus_snapkv_min_small_budgets",
                 "full_cache_exact_match_min"}
CLAIMS = {"ge_snapkv_small_budgets", "clearly_better_question_before", "overhead_5x_below_draft", "within_25pct_of_snapkv",
          "lm_solves_the_tasks"}
METHODS = {"full", "streaming", "h2o", "snapkv", "draft", "lookahead", "oracle"}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A git + DVC repo holding only the lookaheadkv pipeline at smoke scale, after one `dvc repro` (and its output)."""
    repo = pipeline_repo(tmp_path_factory.mktemp("lookaheadkv") / "repo", "lookaheadkv", SMOKE_OVERRIDES)
    return repo, dvc(repo, "repro").stdout


def test_repro_runs_every_stage_and_writes_the_declared_outputs(built: tuple[Path, str]) -> None:
    """One `dvc repro` runs the six stages and the engine's claims stage and leaves every declared output: the LM
    directory reloads with transformers, the lookahead module is saved, the accuracy-vs-budget plot is a PNG."""
    repo, output = built
    assert sorted(stages_run(output)) == sorted(f"lookaheadkv-{s}" for s in [*STAGES, "claims"])
    assert missing_outputs(repo, "lookaheadkv") == []
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= {p.name for p in (repo / "data/lookaheadkv/model").iterdir()}
    assert {"lookahead.safetensors", "lookahead_config.json"} <= {p.name for p in (repo / "data/lookaheadkv/lookahead").iterdir()}
    assert (repo / "data/lookaheadkv/plots/accuracy_vs_budget.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_headline_has_every_method_split_and_budget(built: tuple[Path, str]) -> None:
    """metrics.json's headline has the issue's keys; exact match for every split, method and budget in percent;
    overlaps are fractions; eviction costs are positive; the claimed minima and differences follow from the exact
    matches; no free-form targets block."""
    metrics = json.loads((built[0] / "data/lookaheadkv/metrics.json").read_text())
    h = metrics["headline"]
    assert HEADLINE_KEYS <= set(h)
    assert set(h["exact_match"]) == {"question_after", "question_before", "two_hop"}
    for split in h["exact_match"].values():
        assert set(split) == METHODS
        for by_budget in split.values():
            assert set(by_budget) == {"4", "8"} and all(0 <= v <= 100 for v in by_budget.values())
    assert 0 <= h["overlap_with_oracle_lkv"] <= 1 and 0 <= h["overlap_with_oracle_snapkv"] <= 1
    assert all(v > 0 for v in h["eviction_ms_per_example"].values())
    assert "targets" not in metrics
    em = h["exact_match"]
    assert h["small_budgets"] == [4, 8]
    assert h["lkv_minus_snapkv_min_small_budgets"] == min(
        em[s]["lookahead"][str(b)] - em[s]["snapkv"][str(b)] for s in em for b in h["small_budgets"])
    assert h["full_cache_exact_match_min"] == min(em[s]["full"]["4"] for s in em)


def test_predictions_cover_every_method_and_budget(built: tuple[Path, str]) -> None:
    """One prediction per evaluation row, method and budget; the oracle's overlap with itself is 1."""
    import polars as pl

    predictions = pl.read_parquet(built[0] / "data/lookaheadkv/predictions.parquet")
    assert predictions.height == 3 * 6 * len(METHODS) * 2
    assert predictions.filter(pl.col("method") == "oracle")["overlap_with_oracle"].min() == 1.0


def test_claims_are_declared_and_evaluated(built: tuple[Path, str]) -> None:
    """pipelines/lookaheadkv.yaml declares one claim per lookaheadkv.md target on headline keys; each gets a status
    (plain numbers: held or not held) and claims.json lists them."""
    from paperdag.engine.claims import evaluate_pipeline

    repo = built[0]
    claims = evaluate_pipeline(repo, "lookaheadkv")
    assert set(claims) == CLAIMS
    assert all(c["status"] in {"held", "not_held"} for c in claims.values())
    assert set(json.loads((repo / "data/lookaheadkv/claims.json").read_text())["claims"]) == CLAIMS


def test_second_repro_runs_nothing(built: tuple[Path, str]) -> None:
    """A second `dvc repro` with nothing changed reruns no stage (tokenizer, model and lookahead are deterministic)."""
    assert stages_run(dvc(built[0], "repro").stdout) == []

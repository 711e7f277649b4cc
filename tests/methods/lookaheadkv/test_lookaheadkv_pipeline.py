"""The lookaheadkv pipeline at smoke scale, end to end (the shared repo conftest.py `smoke_build` built once; what
every pipeline must satisfy is tests/pipelines/test_contract.py): saved models, the headline per split, method and
budget, one prediction per row, claims on plain numbers."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
import yaml

from support import smoke_group

pytestmark = smoke_group("lookaheadkv")

HEADLINE_KEYS = {"exact_match", "lkv_minus_snapkv_question_before", "overlap_with_oracle_lkv", "overlap_with_oracle_snapkv",
                 "overhead_ratio_lkv_over_draft", "overhead_ratio_lkv_over_snapkv", "lkv_minus_snapkv_min_small_budgets",
                 "full_cache_exact_match_min"}
CLAIMS = {"ge_snapkv_small_budgets", "clearly_better_question_before", "overhead_5x_below_draft", "within_25pct_of_snapkv",
          "lm_solves_the_tasks"}
METHODS = {"full", "streaming", "h2o", "snapkv", "draft", "lookahead", "oracle"}
SPLITS = {"question_after", "question_before", "two_hop"}


@pytest.fixture(scope="module")
def repo(smoke_build) -> Path:
    """The lookaheadkv smoke repo after its one `dvc repro` (shared: copy it before changing it)."""
    return smoke_build("lookaheadkv").repo


@pytest.fixture(scope="module")
def params(repo: Path) -> dict:
    return yaml.safe_load((repo / "params.yaml").read_text())["lookaheadkv"]


def test_the_lm_and_the_lookahead_module_are_saved(repo: Path) -> None:
    """The LM directory holds what transformers reloads; the lookahead module its weights and config."""
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= {p.name for p in (repo / "data/lookaheadkv/model").iterdir()}
    assert {"lookahead.safetensors", "lookahead_config.json"} <= {p.name for p in (repo / "data/lookaheadkv/lookahead").iterdir()}


def test_headline_has_every_method_split_and_budget(repo: Path, params: dict) -> None:
    """metrics.json's headline has the issue's keys; exact match for every split, method and budget in percent;
    overlaps are fractions; eviction costs are positive; the claimed minima and differences follow from the exact
    matches; no free-form targets block."""
    metrics = json.loads((repo / "data/lookaheadkv/metrics.json").read_text())
    budgets = sorted(params["infer"]["budgets"])
    h = metrics["headline"]
    assert HEADLINE_KEYS <= set(h)
    assert set(h["exact_match"]) == SPLITS
    for split in h["exact_match"].values():
        assert set(split) == METHODS
        for by_budget in split.values():
            assert set(by_budget) == set(map(str, budgets)) and all(0 <= v <= 100 for v in by_budget.values())
    assert 0 <= h["overlap_with_oracle_lkv"] <= 1 and 0 <= h["overlap_with_oracle_snapkv"] <= 1
    assert all(v > 0 for v in h["eviction_ms_per_example"].values())
    assert "targets" not in metrics
    em = h["exact_match"]
    assert h["small_budgets"] == budgets[: params["evaluate"]["small_budgets"]]
    assert h["lkv_minus_snapkv_min_small_budgets"] == min(
        em[s]["lookahead"][str(b)] - em[s]["snapkv"][str(b)] for s in em for b in h["small_budgets"])
    assert h["full_cache_exact_match_min"] == min(em[s]["full"][str(budgets[0])] for s in em)


def test_predictions_cover_every_method_and_budget(repo: Path, params: dict) -> None:
    """One prediction per evaluation row, method and budget; the oracle's overlap with itself is 1."""
    predictions = pl.read_parquet(repo / "data/lookaheadkv/predictions.parquet")
    rows = len(SPLITS) * params["synthesize"]["eval_examples"]
    assert predictions.height == rows * len(METHODS) * len(params["infer"]["budgets"])
    assert predictions.filter(pl.col("method") == "oracle")["overlap_with_oracle"].min() == 1.0


def test_claims_are_declared_on_plain_numbers(repo: Path) -> None:
    """pipelines/lookaheadkv.yaml declares one claim per lookaheadkv.md target on headline keys; each is a plain
    number, so held or not held, never within noise."""
    from paperdag.engine.claims import evaluate_pipeline

    claims = evaluate_pipeline(repo, "lookaheadkv")
    assert set(claims) == CLAIMS
    assert all(c["status"] in {"held", "not_held"} for c in claims.values())

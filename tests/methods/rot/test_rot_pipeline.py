"""The rot pipeline at smoke scale, end to end (the shared repo conftest.py `smoke_build` built once; what every
pipeline must satisfy is tests/pipelines/test_contract.py): the graph from the store, a row per test problem and arm,
the headline, and each claim failing once RoT's output is a baseline's."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
import yaml

from support import judged_after, smoke_group

pytestmark = smoke_group("rot")

CLAIMS = {"cuts_tokens_25pct", "accuracy_within_1_point", "beats_static_top1", "lower_latency"}


@pytest.fixture(scope="module")
def repo(smoke_build) -> Path:
    """The rot smoke repo after its one `dvc repro` (shared: copy it before changing it)."""
    return smoke_build("rot").repo


def items(repo: Path) -> list:
    from paperdag.engine import Item

    return [Item({"replicate": r}) for r in yaml.safe_load((repo / "params.yaml").read_text())["rot"]["replicates"]]


def test_graph_and_predictions_cover_the_store_and_every_test_problem_and_arm(repo: Path) -> None:
    """A node per stored step; a prediction row per (test problem, arm), tokens > 0, latency > 0; the headline's keys."""
    data = repo / "data/rot"
    problems = pl.read_parquet(data / "problems.parquet")
    store, test = problems.filter(pl.col("split") == "store"), problems.filter(pl.col("split") == "test")
    assert pl.read_parquet(data / "graph/nodes.parquet").height == store["steps"].list.len().sum()
    for item in items(repo):
        pred = pl.read_parquet(data / f"predictions/{item}.parquet")
        assert sorted(pred.select("problem", "arm").rows()) == sorted((i, a) for i in test["id"] for a in ("none", "static", "rot"))
        assert pred["output_tokens"].min() > 0 and pred["seconds"].min() > 0
    h = json.loads((data / "metrics.json").read_text())["headline"]
    assert {"acc_none", "acc_static", "acc_rot", "acc_rot_minus_none", "acc_rot_minus_static", "token_reduction_rot_vs_none_pct",
            "latency_ratio_rot_over_none", "template_exact_rot", "template_exact_static", "replicates"} <= set(h)


def _judged(repo: Path, swap) -> dict[str, dict]:
    """The claims on the metrics evaluate computes after `swap(predictions)` rewrote each replicate's predictions."""
    return judged_after(repo, "rot:evaluate", predictions=swap)


def _as_rot(arm: str, pred: pl.DataFrame) -> pl.DataFrame:
    """pred with RoT's rows replaced by `arm`'s rows renamed to rot."""
    return pl.concat([pred.filter(pl.col("arm") != "rot"), pred.filter(pl.col("arm") == arm).with_columns(pl.lit("rot").alias("arm"))],
                     how="diagonal_relaxed")


def test_claims_are_declared_and_judged(repo: Path) -> None:
    """pipelines/rot.yaml declares the four claims; each is judged (one smoke replicate: no interval ends)."""
    from paperdag.engine.claims import evaluate_pipeline

    claims = evaluate_pipeline(repo, "rot")
    assert set(claims) == CLAIMS and all(c["status"] in {"held", "within_noise", "not_held"} for c in claims.values())


def test_token_and_latency_claims_fail_when_rot_generates_as_no_template(repo: Path) -> None:
    """RoT's rows replaced by no-template's: a token reduction of exactly 0 (not >= 25) and a latency ratio of
    exactly 1 (not < 1)."""
    claims = _judged(repo, lambda p: _as_rot("none", p))
    assert claims["cuts_tokens_25pct"]["status"] == "not_held" and claims["cuts_tokens_25pct"]["value"] == 0
    assert claims["lower_latency"]["status"] == "not_held" and claims["lower_latency"]["value"] == 1


def _right(right: str, wrong: str):
    """A swap: `right`'s answers correct on every problem, `wrong`'s on none."""
    def swap(p: pl.DataFrame) -> pl.DataFrame:
        return p.with_columns(pl.when(pl.col("arm") == right).then(True).when(pl.col("arm") == wrong).then(False)
                              .otherwise(pl.col("correct")).alias("correct"))
    return swap


def test_beating_static_fails_when_rot_is_the_static_template(repo: Path) -> None:
    """RoT's rows replaced by static top-1's: a paired accuracy difference of exactly 0, not > 0. The claim reads
    RoT's answers (the smoke model's may tie static's already): RoT right everywhere and static nowhere is +100."""
    claim = _judged(repo, lambda p: _as_rot("static", p))["beats_static_top1"]
    assert claim["status"] == "not_held" and claim["value"] == 0
    right = _judged(repo, _right("rot", "static"))["beats_static_top1"]
    assert right["status"] != "not_held" and right["value"] == 100


def test_accuracy_claim_fails_when_rot_answers_worse_than_no_template(repo: Path) -> None:
    """No template right on every problem and RoT (the static template's rows) on none: -100 points, not >= -1."""
    claim = _judged(repo, lambda p: _right("none", "rot")(_as_rot("static", p)))["accuracy_within_1_point"]
    assert claim["status"] == "not_held" and claim["value"] == -100

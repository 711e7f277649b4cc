"""The deeprag pipeline at smoke scale, end to end (the shared conftest.py `smoke_build`, built once; what every
pipeline must satisfy is tests/pipelines/test_contract.py): every arm answers every test question, the headline
carries each claimed number, and each claim fails once DeepRAG's output is a baseline's."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
import yaml

from support import judged_after, smoke_group

pytestmark = smoke_group("deeprag")
CLAIMS = {"matches_always_with_half_the_retrievals", "beats_never_retrieve", "beats_threshold", "calibration_raises_mcc"}


@pytest.fixture(scope="module")
def repo(smoke_build) -> Path:
    return smoke_build("deeprag").repo


def test_every_arm_answers_the_same_test_questions(repo: Path) -> None:
    """Each arm has one prediction per test question (and only test questions); retrievals count the path's R's;
    the headline has every claimed key; the memorised table covers exactly the question people's facts."""
    from paperdag.methods.deeprag.metrics import ARMS

    questions = pl.read_parquet(repo / "data/deeprag/questions.parquet")
    test = set(questions.filter(pl.col("split") == "test")["id"])
    predictions = pl.read_parquet(repo / "data/deeprag/predictions/0.parquet")
    for arm in ARMS:
        mine = predictions.filter(pl.col("arm") == arm)
        assert set(mine["question"]) == test and mine.height == len(test)
        assert mine["retrievals"].to_list() == [p.count("R") for p in mine["path"]]
    assert set(pl.read_parquet(repo / "data/deeprag/paths/0.parquet")["question"]) <= set(questions.filter(pl.col("split") == "train")["id"])
    facts = pl.read_parquet(repo / "data/deeprag/facts.parquet")
    memorised = pl.read_parquet(repo / "data/deeprag/memorised/0.parquet")
    assert memorised.height == facts.filter(pl.col("group") != "reading").height
    h = json.loads((repo / "data/deeprag/metrics.json").read_text())["headline"]
    assert {"em_deeprag_minus_always", "retrieval_ratio_deeprag_over_always", "em_deeprag_minus_never",
            "em_deeprag_minus_threshold", "mcc_deeprag_minus_imitation"} <= set(h)


def _judged(repo: Path, swap) -> dict[str, dict]:
    """The claims on the metrics evaluate computes after `swap(predictions, steps)` rewrote each replicate's outputs."""
    def edit(inputs: dict) -> None:
        predictions, steps = inputs["predictions"], inputs["steps"]
        for i in predictions:
            predictions[i], steps[i] = swap(predictions[i], steps[i])

    return judged_after(repo, "deeprag:evaluate", edit)


def _as(arm: str, source: str):
    """A swap: `arm`'s predictions and steps replaced by `source`'s."""
    def swap(predictions: pl.DataFrame, steps: pl.DataFrame):
        def replaced(frame: pl.DataFrame) -> pl.DataFrame:
            return pl.concat([frame.filter(pl.col("arm") != arm),
                              frame.filter(pl.col("arm") == source).with_columns(pl.lit(arm).alias("arm"))], how="diagonal_relaxed")
        return replaced(predictions), replaced(steps)
    return swap


def test_claims_are_judged() -> None:
    """Every declared claim is one of the issue's."""
    from paperdag.engine.claims import parse

    file = Path(__file__).resolve().parents[3] / "pipelines/deeprag.yaml"
    assert set(parse(str(file), yaml.safe_load(file.read_text())["claims"])) == CLAIMS


def test_joint_claim_fails_when_deeprag_never_retrieves_and_always_is_right(repo: Path) -> None:
    """DeepRAG replaced by never-retrieve (0 retrievals: the retrieval half holds with 50 points to spare) while
    always-retrieve is right on every question: the EM half is -98 points, so the claim is not held."""
    def swap(predictions: pl.DataFrame, steps: pl.DataFrame):
        predictions, steps = _as("deeprag", "never_retrieve")(predictions, steps)
        correct = pl.when(pl.col("arm") == "deeprag").then(False).when(pl.col("arm") == "always_retrieve").then(True).otherwise(pl.col("correct"))
        return predictions.with_columns(correct.alias("correct")), steps

    claim = _judged(repo, swap)["matches_always_with_half_the_retrievals"]
    assert claim["status"] == "not_held" and claim["value"] == -98


def test_joint_claim_fails_when_deeprag_always_retrieves(repo: Path) -> None:
    """DeepRAG's output replaced by always-retrieve's: EM equal (that half holds, +2) but the retrieval ratio is 1,
    50 points over the bound: the claim's margin is -50."""
    claim = _judged(repo, _as("deeprag", "always_retrieve"))["matches_always_with_half_the_retrievals"]
    assert claim["status"] == "not_held" and claim["value"] == -50


@pytest.mark.parametrize(("claim", "source"), [("beats_never_retrieve", "never_retrieve"), ("beats_threshold", "threshold"),
                                               ("calibration_raises_mcc", "imitation_only")])
def test_beating_claims_fail_when_deeprag_is_the_baseline(repo: Path, claim: str, source: str) -> None:
    """DeepRAG's output replaced by the baseline's: a paired difference of exactly 0, not > 0. The claim reads
    DeepRAG's output (the smoke model may tie its baseline already): DeepRAG right on every question and retrieving
    exactly where the fact is unknown, the baseline wrong everywhere and retrieving exactly where it is known, give
    a positive difference."""
    judged = _judged(repo, _as("deeprag", source))[claim]
    assert judged["status"] == "not_held" and judged["value"] == 0
    assert _judged(repo, _better("deeprag", source))[claim]["value"] > 0


def _better(arm: str, than: str):
    """A swap: `arm` right on every question and deciding to retrieve exactly on the steps whose fact is unknown;
    `than` wrong on every question and deciding the opposite."""
    def swap(predictions: pl.DataFrame, steps: pl.DataFrame):
        correct = pl.when(pl.col("arm") == arm).then(True).when(pl.col("arm") == than).then(False).otherwise(pl.col("correct"))
        known = pl.col("unknown").is_not_null()
        retrieve = (pl.when((pl.col("arm") == arm) & known).then(pl.col("unknown"))
                    .when((pl.col("arm") == than) & known).then(~pl.col("unknown")).otherwise(pl.col("retrieve")))
        return predictions.with_columns(correct.alias("correct")), steps.with_columns(retrieve.alias("retrieve"))
    return swap

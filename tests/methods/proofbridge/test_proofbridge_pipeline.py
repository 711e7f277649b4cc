"""The proofbridge pipeline at smoke scale, end to end (the shared repo conftest.py `smoke_build` built once; what
every pipeline must satisfy is tests/pipelines/test_contract.py): the composition of the retrieval and generation
outputs, the headline, and each claim failing once the method's output is its baseline's."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
import yaml

from support import judged_after, smoke_group

pytestmark = smoke_group("proofbridge")

CLAIMS = {"joint_recall1_2x_frozen", "retrieval_repair_beats_no_retrieval", "retrieval_repair_beats_no_repair"}


@pytest.fixture(scope="module")
def repo(smoke_build) -> Path:
    """The proofbridge smoke repo after its one `dvc repro` (shared: copy it before changing it)."""
    return smoke_build("proofbridge").repo


def items(repo: Path) -> list:
    from paperdag.engine import Item

    return [Item({"replicate": r}) for r in yaml.safe_load((repo / "params.yaml").read_text())["proofbridge"]["replicates"]]


def test_outputs_cover_every_test_theorem_arm_and_retriever(repo: Path) -> None:
    """A gold rank per val / test theorem and retriever; retrieved examples are training theorems of other families;
    per test theorem, arm and sample one final attempt; repair only in the repair arms."""
    data = repo / "data/proofbridge"
    theorems = pl.read_parquet(data / "theorems.parquet")
    family = dict(zip(theorems["id"], theorems["family"]))
    split = dict(zip(theorems["id"], theorems["split"]))
    test = theorems.filter(pl.col("split") == "test")
    samples = yaml.safe_load((repo / "params.yaml").read_text())["proofbridge"]["repair"]["samples"]
    for item in items(repo):
        ranks = pl.read_parquet(data / f"retrieval/{item}.parquet")
        assert ranks.filter(pl.col("split") == "test").height == 2 * test.height and ranks["gold_rank"].min() >= 1
        contexts = pl.read_parquet(data / f"contexts/{item}.parquet")
        for i, ex in zip(contexts["id"], contexts["examples"]):
            assert len(ex) == 5 and all(split[j] == "train" and family[j] != family[i] for j in ex)
        att = pl.read_parquet(data / f"attempts/{item}.parquet")
        assert sorted(att.select("theorem", "arm", "sample").rows()) == sorted(
            (t, a, s) for t in test["id"] for a in ("plain", "plain_repair", "rag", "rag_repair") for s in range(samples))
        assert att.filter(pl.col("arm").is_in(["plain", "rag"]))["attempts"].max() == 1
    h = json.loads((data / "metrics.json").read_text())["headline"]
    assert {"recall1_joint", "recall1_frozen", "recall1_ratio_joint_over_frozen", "sem_passk_method_minus_no_retrieval",
            "sem_passk_method_minus_no_repair", "sem_passk_rag_repair", "type_passk_plain"} <= set(h)


def _judged(repo: Path, swap_retrieval=None, swap_attempts=None) -> dict[str, dict]:
    """The claims on the metrics evaluate computes after rewriting each replicate's retrieval ranks / attempts."""
    return judged_after(repo, "proofbridge:evaluate", retrieval=swap_retrieval, attempts=swap_attempts)


def _arm_as_method(arm: str, att: pl.DataFrame) -> pl.DataFrame:
    """The method's rows replaced by `arm`'s rows renamed to the method."""
    return pl.concat([att.filter(pl.col("arm") != "rag_repair"), att.filter(pl.col("arm") == arm).with_columns(pl.lit("rag_repair").alias("arm"))])


def test_claims_are_declared_and_judged(repo: Path) -> None:
    """pipelines/proofbridge.yaml declares the three claims; each is judged (one smoke replicate: no interval ends)."""
    from paperdag.engine.claims import evaluate_pipeline

    claims = evaluate_pipeline(repo, "proofbridge")
    assert set(claims) == CLAIMS and all(c["status"] in {"held", "within_noise", "not_held"} for c in claims.values())


def test_recall_claim_fails_when_the_joint_embedding_ranks_as_frozen_minilm(repo: Path) -> None:
    """The joint ranks replaced by frozen MiniLM's: a Recall@1 ratio of 1 at most (1 when frozen hits), not >= 2;
    the joint retriever ranking every gold first and frozen none: at least 2."""
    def swap(r: pl.DataFrame) -> pl.DataFrame:
        frozen = r.filter(pl.col("retriever") == "frozen")
        return pl.concat([frozen, frozen.with_columns(pl.lit("joint").alias("retriever"))])

    claim = _judged(repo, swap_retrieval=swap)["joint_recall1_2x_frozen"]
    assert claim["status"] == "not_held" and claim["value"] <= 1

    def joint_alone_first(r: pl.DataFrame) -> pl.DataFrame:  # the claim reads the joint ranks: gold first for joint only
        return r.with_columns(pl.when(pl.col("retriever") == "joint").then(1).otherwise(pl.col("gold_rank") + 1)
                              .cast(r["gold_rank"].dtype).alias("gold_rank"))

    held = _judged(repo, swap_retrieval=joint_alone_first)["joint_recall1_2x_frozen"]
    assert held["status"] != "not_held" and held["value"] >= 2


@pytest.mark.parametrize("claim, arm", [("retrieval_repair_beats_no_retrieval", "plain_repair"), ("retrieval_repair_beats_no_repair", "rag")])
def test_generation_claims_fail_when_the_method_generates_as_its_baseline(repo: Path, claim: str, arm: str) -> None:
    """The method's attempts replaced by the baseline arm's: a paired difference of exactly 0, not > 0."""
    judged = _judged(repo, swap_attempts=lambda a: _arm_as_method(arm, a))[claim]
    assert judged["status"] == "not_held" and judged["value"] == 0


def test_generation_claims_hold_when_only_the_method_is_right(repo: Path) -> None:
    """Every method attempt semantically right and no baseline attempt: both differences are +1 (the test can pass)."""
    def swap(a: pl.DataFrame) -> pl.DataFrame:
        return a.with_columns((pl.col("arm") == "rag_repair").alias("semantic"))

    judged = _judged(repo, swap_attempts=swap)
    for name in ("retrieval_repair_beats_no_retrieval", "retrieval_repair_beats_no_repair"):
        assert judged[name]["value"] == 1 and judged[name]["status"] in {"held", "within_noise"}


def test_learnability_check_holds_out_training_theorems_and_can_fail(repo: Path) -> None:
    """The generator's check is on training-family theorems it never trained on; an unreachable threshold fails
    the stage with the param named, and a hold-out that empties a family is refused."""
    import stages.proofbridge as stage
    from paperdag.engine import Item
    from paperdag.methods.proofbridge import holdout_split

    data = repo / "data/proofbridge"
    theorems = pl.read_parquet(data / "theorems.parquet")
    train, held = holdout_split(theorems, 1)
    families = set(theorems.filter(pl.col("split") == "train")["family"])
    assert {r["family"] for r in held} == families and len(held) == len(families)
    assert not {r["id"] for r in train} & {r["id"] for r in held}
    with pytest.raises(ValueError, match="holdout_per_family"):
        holdout_split(theorems, 10_000)
    params = yaml.safe_load((repo / "params.yaml").read_text())["proofbridge"]["train_gen"]
    params |= {"min_holdout_type_correct": 1.0, "item": Item({"replicate": 0}), "seed": 0}
    with pytest.raises(ValueError, match="min_holdout_type_correct"):
        stage.train_gen(stage.TrainGenParams(**params), theorems, pl.read_parquet(data / "contexts/0.parquet"))

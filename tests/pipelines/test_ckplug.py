"""The repository's real ckplug pipeline, copied into a throw-away git + DVC repo, run end to end by `dvc repro` at smoke scale."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support import dvc, missing_outputs, pipeline_repo, stages_run

SMOKE_OVERRIDES = [  # a world of 12 people and a 1-layer model trained 60 steps: the stages' own work is seconds
    "ckplug.synthesize.known_entities=12",
    "ckplug.synthesize.reading_entities=12",
    "ckplug.synthesize.fresh_entities=6",
    "ckplug.synthesize.test_facts=20",
    "ckplug.synthesize.adaptive_items=20",
    "ckplug.synthesize.conflict_items=60",
    "ckplug.synthesize.consistent_items=20",
    "ckplug.train.vocab_size=500",
    "ckplug.train.hidden_size=32",
    "ckplug.train.num_layers=1",
    "ckplug.train.intermediate_size=64",
    "ckplug.train.steps=60",
    "ckplug.train.batch_size=16",
]
HEADLINE_KEYS = {"closed_book_recall", "mr_alpha0", "mr_alpha1", "mr_baseline_rag", "mr_monotone", "adaptive_acc", "rag_acc",
                 "norag_acc", "decode_cost_ratio"}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A git + DVC repo holding only the ckplug pipeline at smoke scale, after one `dvc repro` (and that run's output)."""
    repo = pipeline_repo(tmp_path_factory.mktemp("ckplug") / "repo", "ckplug", SMOKE_OVERRIDES)
    return repo, dvc(repo, "repro").stdout


def test_repro_runs_every_stage_and_writes_the_declared_outputs(built: tuple[Path, str]) -> None:
    """One `dvc repro` runs the four ckplug stages and leaves every declared output: the model directory reloads
    with transformers, and the MR-vs-alpha plot is a PNG."""
    repo, output = built
    assert sorted(stages_run(output)) == ["ckplug-evaluate", "ckplug-infer", "ckplug-synthesize", "ckplug-train"]
    assert missing_outputs(repo, "ckplug") == []
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= {p.name for p in (repo / "data/ckplug/model").iterdir()}
    assert (repo / "data/ckplug/plots/mr_vs_alpha.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_headline_has_the_spec_keys_and_consistent_values(built: tuple[Path, str]) -> None:
    """metrics.json's headline has every required key; MR values are percentages, mr_monotone agrees with the
    per-alpha MRs, the decode cost ratio is positive (two forward passes per CK-PLUG token), and every target
    carries value / target / met."""
    metrics = json.loads((built[0] / "data/ckplug/metrics.json").read_text())
    h = metrics["headline"]
    assert HEADLINE_KEYS <= set(h)
    assert 0.0 <= h["closed_book_recall"] <= 1.0
    mrs = list(h["mr_by_alpha"].values())
    assert h["mr_monotone"] == all(b >= a for a, b in zip(mrs, mrs[1:]))
    assert (h["mr_alpha0"], h["mr_alpha1"]) == (mrs[0], mrs[-1])
    assert h["decode_cost_ratio"] > 0
    for target in metrics["targets"].values():
        assert set(target) == {"value", "target", "met"}
    assert {(r["method"], r["alpha"]) for r in metrics["table"]} >= {("rag", None), ("ck-plug", 0.0), ("ck-plug", 1.0)}


def test_train_stats_report_the_loss_curve(built: tuple[Path, str]) -> None:
    """train_stats.json holds one loss per step, and the loss fell during training."""
    stats = json.loads((built[0] / "data/ckplug/train_stats.json").read_text())
    assert len(stats["loss"]) == 60
    assert sum(stats["loss"][-10:]) < sum(stats["loss"][:10])


def test_second_repro_runs_nothing(built: tuple[Path, str]) -> None:
    """A second `dvc repro` with nothing changed reruns no stage (the tokenizer and model are deterministic inputs)."""
    assert stages_run(dvc(built[0], "repro").stdout) == []

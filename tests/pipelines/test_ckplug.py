"""The repository's real ckplug pipeline, copied into a throw-away git + DVC repo, run end to end by `dvc repro` at smoke scale."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from support import dvc, missing_outputs, pipeline_repo, stages_run

SMOKE_OVERRIDES = [  # a world of 12 people and two 1-layer models trained 60 steps: the stages' own work is seconds
    "ckplug.replicates=[0, 1]",
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
REPLICATES = ["0", "1"]
INTERVAL_KEYS = {"closed_book_recall", "mr_alpha0", "mr_alpha1", "mr_range", "mr_rag", "adaptive_acc", "rag_acc", "norag_acc",
                 "decode_cost_ratio", "adaptive_minus_rag", "adaptive_minus_norag"}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A git + DVC repo holding only the ckplug pipeline at smoke scale, after one `dvc repro` (and that run's output)."""
    repo = pipeline_repo(tmp_path_factory.mktemp("ckplug") / "repo", "ckplug", SMOKE_OVERRIDES)
    return repo, dvc(repo, "repro").stdout


def test_repro_runs_every_stage_and_replicate_and_writes_the_declared_outputs(built: tuple[Path, str]) -> None:
    """One `dvc repro` runs synthesize, train and infer once per replicate, and evaluate, and leaves every declared
    output: each replicate's model directory reloads with transformers, and the plots are PNGs."""
    repo, output = built
    assert sorted(stages_run(output)) == sorted(["ckplug-evaluate", "ckplug-synthesize",
                                                 *(f"ckplug-{s}@{r}" for s in ("train", "infer") for r in REPLICATES)])
    assert missing_outputs(repo, "ckplug") == []
    for r in REPLICATES:
        assert {"config.json", "model.safetensors", "tokenizer.json"} <= {p.name for p in (repo / f"data/ckplug/model/{r}").iterdir()}
        assert (repo / f"data/ckplug/plots/loss_curve/{r}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (repo / "data/ckplug/plots/mr_vs_alpha.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_replicates_are_different_models_decoding_the_same_items(built: tuple[Path, str]) -> None:
    """Each replicate trains with its own seed (different weights), and every replicate decodes the same test items
    in the same order (the pairing the paired differences rely on)."""
    repo = built[0]
    seeds = {json.loads((repo / f"data/ckplug/train_stats/{r}.json").read_text())["seed"] for r in REPLICATES}
    assert len(seeds) == len(REPLICATES)
    weights = {(repo / f"data/ckplug/model/{r}/model.safetensors").read_bytes() for r in REPLICATES}
    assert len(weights) == len(REPLICATES)
    items = [pl.read_parquet(repo / f"data/ckplug/predictions/{r}.parquet").select("set", "method", "alpha", "item", "question")
             for r in REPLICATES]
    assert all(i.equals(items[0]) for i in items[1:])


def test_headline_has_intervals_over_replicates_and_consistent_values(built: tuple[Path, str]) -> None:
    """metrics.json has no free-form targets; the headline's numbers are intervals over the 2 replicates whose values
    are the per-replicate numbers; MR range = MR(1) - MR(0) per replicate; the paired differences carry their mdd;
    the decode cost ratio is positive."""
    metrics = json.loads((built[0] / "data/ckplug/metrics.json").read_text())
    assert "targets" not in metrics
    h, per = metrics["headline"], metrics["replicates"]
    assert list(per) == REPLICATES and h["replicates"] == 2
    for key in INTERVAL_KEYS:
        assert h[key]["n"] == 2 and h[key]["ci95_low"] <= h[key]["mean"] <= h[key]["ci95_high"], key
    assert h["adaptive_minus_rag"]["mdd"] is not None and h["adaptive_minus_norag"]["mdd"] is not None
    for r in REPLICATES:
        p = per[r]
        assert 0.0 <= p["closed_book_recall"] <= 1.0
        mrs = list(p["mr_by_alpha"].values())
        assert (p["mr_alpha0"], p["mr_alpha1"], p["mr_range"]) == (mrs[0], mrs[-1], mrs[-1] - mrs[0])
        assert p["decode_cost_ratio"] > 0
    assert h["mr_range"]["values"] == [per[r]["mr_range"] for r in REPLICATES]
    assert h["mr_monotone"] == sum(per[r]["mr_monotone"] for r in REPLICATES) / 2
    assert {(r["method"], r["alpha"]) for r in metrics["table"]} >= {("rag", None), ("ck-plug", 0.0), ("ck-plug", 1.0)}


def test_train_stats_report_the_loss_curve(built: tuple[Path, str]) -> None:
    """Each replicate's train_stats holds one loss per step, and the loss fell during training."""
    for r in REPLICATES:
        stats = json.loads((built[0] / f"data/ckplug/train_stats/{r}.json").read_text())
        assert stats["replicate"] == int(r) and len(stats["loss"]) == 60
        assert sum(stats["loss"][-10:]) < sum(stats["loss"][:10])


def test_second_repro_runs_nothing(built: tuple[Path, str]) -> None:
    """A second `dvc repro` with nothing changed reruns no stage (the tokenizer and model are deterministic inputs)."""
    assert stages_run(dvc(built[0], "repro").stdout) == []

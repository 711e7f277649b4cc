"""The tokmem pipeline at smoke scale, end to end (the shared repo conftest.py `smoke_build` built once; what every
pipeline must satisfy is tests/pipelines/test_contract.py): the saved backbone, the headline and a table row per
method and round, claims on plain numbers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from support import smoke_group

pytestmark = smoke_group("tokmem")

HEADLINE_KEYS = {"em_tokmem", "em_rag", "em_prompt_tuning", "em_lora_seq", "routing_acc_tokmem", "forgetting_tokmem",
                 "forgetting_lora_seq", "tool_f1_tokmem", "arg_f1_tokmem", "em_tokmem_minus_rag", "forgetting_lora_seq_minus_tokmem"}
CLAIMS = {"beats_rag_em", "routing_at_least_90", "forgets_at_most_5_points", "lora_forgets_clearly_more"}
METHODS = ("tokmem", "rag", "prompt_tuning", "lora_seq", "lora_replay")


@pytest.fixture(scope="module")
def repo(smoke_build) -> Path:
    """The tokmem smoke repo after its one `dvc repro` (shared: copy it before changing it)."""
    return smoke_build("tokmem").repo


def test_the_backbone_is_saved(repo: Path) -> None:
    """The frozen backbone is a save_pretrained directory: config, weights, tokenizer."""
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= {p.name for p in (repo / "data/tokmem/backbone").iterdir()}


def test_metrics_carry_the_issue_headline_and_one_row_per_method_and_round(repo: Path) -> None:
    """metrics.json's headline has every key the issue asks for; the table has each method after each round; the
    backbone stayed bit-identical through memory training; TokMem trains one embedding row per memory procedure,
    prompt tuning a prompt of rows per procedure; the claimed differences are method - baseline; no free-form
    targets block."""
    params = yaml.safe_load((repo / "params.yaml").read_text())["tokmem"]
    procedures, round_size = params["synthesize"]["memory_procedures"], params["synthesize"]["round_size"]
    width = params["train_backbone"]["hidden_size"]
    metrics = json.loads((repo / "data/tokmem/metrics.json").read_text())
    h = metrics["headline"]
    assert HEADLINE_KEYS <= set(h)
    assert h["backbone_unchanged"] is True
    rounds = range(1, procedures // round_size + 1)
    assert {(r["method"], r["round"], r["n_procedures"]) for r in metrics["table"]} == {
        (m, r, round_size * r) for m in METHODS for r in rounds}
    assert all(0.0 <= r["em"] <= 100.0 and 0.0 <= r["rouge_l"] <= 100.0 for r in metrics["table"])
    assert h["trainable_tokmem"] == procedures * width
    assert h["trainable_prompt_tuning"] == procedures * params["baselines"]["prompt_tokens"] * width
    assert "targets" not in metrics
    assert h["em_tokmem_minus_rag"] == pytest.approx(h["em_tokmem"] - h["em_rag"])
    assert h["forgetting_lora_seq_minus_tokmem"] == pytest.approx(h["forgetting_lora_seq"] - h["forgetting_tokmem"])


def test_claims_are_declared_on_plain_numbers(repo: Path) -> None:
    """pipelines/tokmem.yaml declares one claim per tokmem.md target on headline keys; each is a plain number, so
    held or not held, never within noise."""
    from paperdag.engine.claims import evaluate_pipeline

    claims = evaluate_pipeline(repo, "tokmem")
    assert set(claims) == CLAIMS
    assert all(c["status"] in {"held", "not_held"} for c in claims.values())

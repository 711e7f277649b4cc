"""The tokmem stages as functions on a small world: train_backbone loads a real local checkpoint (model_path, a tiny
model saved with save_pretrained) and refuses a backbone that did not learn to read a description."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from stages import tokmem as st

ROOT = Path(__file__).resolve().parents[3]


def small_params() -> dict:
    """params.yaml's tokmem section at the pipeline's smoke scale."""
    params = yaml.safe_load((ROOT / "params.yaml").read_text())["tokmem"]
    for key, value in yaml.safe_load((ROOT / "pipelines/tokmem.yaml").read_text())["smoke"].items():
        *path, last = key.split(".")[1:]
        section = params
        for part in path:
            section = section[part]
        section[last] = value
    return params


@pytest.fixture(scope="module")
def world() -> tuple:
    world = st.synthesize(st.SynthesizeParams(**small_params()["synthesize"], seed=0))
    return world["procedures"], world["examples"]


def test_train_backbone_loads_a_local_checkpoint(world: tuple, tmp_path: Path) -> None:
    """model_path: the saved tiny model and its tokenizer are the backbone (its weights, its vocabulary plus one
    token per backbone procedure), trained from there, and written back as a save_pretrained directory."""
    from paperdag.lm import build_or_load, load_causal_lm

    procedures, examples = world
    config = {**small_params()["train_backbone"], "steps": 2}
    saved, tokenizer = build_or_load(st.TrainBackboneParams(**config, seed=7), ["a b c\n", "d e f\n"])
    saved.config.tie_word_embeddings = False  # an untied checkpoint, as most real ones are
    saved.save_pretrained(tmp_path / "ckpt")
    tokenizer.save_pretrained(tmp_path / "ckpt")
    out = st.train_backbone(st.TrainBackboneParams(**{**config, "model_path": str(tmp_path / "ckpt")}, seed=0), procedures, examples)
    assert out["backbone_stats"]["vocab_size"] == len(tokenizer) + (procedures["split"] == "backbone").sum()
    out["model"](tmp_path / "out")
    model, reloaded = load_causal_lm(tmp_path / "out")
    assert len(reloaded) == out["backbone_stats"]["vocab_size"]
    assert model.config.hidden_size == saved.config.hidden_size and not model.config.tie_word_embeddings


def test_a_backbone_that_cannot_read_descriptions_is_an_error(world: tuple) -> None:
    """min_described_em above what 2 steps reach: the stage stops and names the param to change."""
    procedures, examples = world
    config = {**small_params()["train_backbone"], "steps": 2, "min_described_em": 1.0}
    with pytest.raises(ValueError, match="min_described_em"):
        st.train_backbone(st.TrainBackboneParams(**config, seed=0), procedures, examples)

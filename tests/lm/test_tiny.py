"""The tiny-LM lifecycle: TinyLMConfig's checks, build_or_load from scratch (seeded, special tokens) or from a local
checkpoint, fit_pools / lm_stats, and fit's report of several named losses."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from paperdag.lm import TinyLMConfig, TrainConfig, build_or_load, checkpoint_writer, fit, fit_pools, lm_stats, train_loop

TEXTS = ["Q: Where was Bolani born?\nA: Tirenzo", "The red boat sails to Tirenzo.", "Bolani plays the harp."] * 10


@dataclass(frozen=True)
class Params(TinyLMConfig):
    extra: int = 0  # a stage's own field beside the shared ones


def config(**kw) -> Params:
    sizes = dict(vocab_size=300, hidden_size=32, num_layers=1, num_heads=4, num_kv_heads=2, intermediate_size=64, steps=8,
                 batch_size=4, lr=3e-3, warmup_steps=2, seed=5)
    return Params(**(sizes | kw))


def test_head_counts_are_checked_naming_the_field() -> None:
    """hidden_size must be a multiple of num_heads, num_heads of num_kv_heads: ValueError(field, why), which the engine
    reports on that field's params.yaml key."""
    with pytest.raises(ValueError) as e:
        config(hidden_size=30)
    assert e.value.args[0] == "hidden_size"
    with pytest.raises(ValueError) as e:
        config(num_kv_heads=3)
    assert e.value.args[0] == "num_heads"


def test_from_scratch_is_seeded_and_holds_the_special_tokens() -> None:
    """Two builds with one seed have the same weights, another seed differs; special tokens are in the tokenizer as
    single ids and in the model's vocabulary."""
    model, tokenizer = build_or_load(config(), TEXTS, special_tokens=["<proc_0>", "<proc_1>"])
    again, _ = build_or_load(config(), TEXTS, special_tokens=["<proc_0>", "<proc_1>"])
    other, _ = build_or_load(config(seed=6), TEXTS, special_tokens=["<proc_0>", "<proc_1>"])
    weight = model.get_input_embeddings().weight
    assert torch.equal(weight, again.get_input_embeddings().weight)
    assert not torch.equal(weight, other.get_input_embeddings().weight)
    assert tokenizer("<proc_1>", add_special_tokens=False)["input_ids"] == [tokenizer.convert_tokens_to_ids("<proc_1>")]
    assert weight.shape[0] == len(tokenizer)


def test_model_path_loads_the_checkpoint_not_a_new_model(tmp_path: Path) -> None:
    """model_path names a save_pretrained directory: its weights come back (texts unused), a new special token
    resizes its vocabulary; a path that is no local directory is an error, never a hub download."""
    model, tokenizer = build_or_load(config(), TEXTS)
    checkpoint_writer(model, tokenizer)(tmp_path / "ckpt")
    loaded, loaded_tokenizer = build_or_load(config(model_path=str(tmp_path / "ckpt"), seed=99), [])
    assert torch.equal(loaded.get_input_embeddings().weight, model.get_input_embeddings().weight)
    grown, grown_tokenizer = build_or_load(config(model_path=str(tmp_path / "ckpt")), [], special_tokens=["<new>"])
    assert len(grown_tokenizer) == len(loaded_tokenizer) + 1 == grown.get_input_embeddings().weight.shape[0]
    with pytest.raises(FileNotFoundError, match="not a local directory"):
        build_or_load(config(model_path="gpt2"), [])


def test_fit_pools_trains_and_lm_stats_reports_it() -> None:
    """fit_pools lowers the target loss over its steps; lm_stats names the model's size, origin and the loss."""
    cfg = config(steps=30)
    model, tokenizer = build_or_load(cfg, TEXTS)
    pool = [(tokenizer("Q: Where was Bolani born?\nA:")["input_ids"], tokenizer(" Tirenzo")["input_ids"] + [tokenizer.eos_token_id])]
    report = fit_pools(model, {"qa": pool}, {"qa": 1.0}, cfg, tokenizer.pad_token_id, "test")
    history = report.losses["loss"]
    assert len(history) == 30 and history[-1] < history[0]
    stats = lm_stats(model, tokenizer, cfg, history, 1.5)
    assert stats["model"] == "tiny Llama from scratch" and stats["steps"] == 30 and stats["loss"] == history
    assert stats["final_loss"] == pytest.approx(sum(history[-30:]) / 30)
    assert stats["parameters"] == sum(p.numel() for p in model.parameters())


def test_fit_records_every_named_loss_and_minimises_loss() -> None:
    """A step returning several named losses: each is recorded per step, "loss" is the one minimised (its
    components fall with it), and train_loop is fit for one loss (the same history with the same seed)."""
    def objective():
        torch.manual_seed(0)
        w = torch.nn.Parameter(torch.tensor([3.0, -2.0]))
        return w, lambda step: {"loss": (w[0] ** 2) + (w[1] ** 2), "first": w[0] ** 2, "second": w[1] ** 2}

    w, step = objective()
    report = fit([w], step, TrainConfig(steps=20, lr=0.1), progress=False)
    assert set(report.losses) == {"loss", "first", "second"} and report.steps == 20
    assert all(t == pytest.approx(a + b) for t, a, b in zip(*(report.losses[k] for k in ("loss", "first", "second"))))
    assert report.losses["first"][-1] < report.losses["first"][0] and report.losses["second"][-1] < report.losses["second"][0]
    assert report.final(last=5) == pytest.approx(sum(report.losses["loss"][-5:]) / 5)
    w2, step2 = objective()
    assert train_loop([w2], lambda i: step2(i)["loss"], TrainConfig(steps=20, lr=0.1), progress=False) == report.losses["loss"]

"""Shared LM building blocks: the WordPiece tokenizer round trip, tiny encoders from config, the training loop."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoTokenizer

from paperdag.lm import (
    SPECIAL_TOKENS,
    TrainConfig,
    load_encoder_and_tokenizer,
    tiny_bert_config,
    tiny_encoder,
    tiny_masked_lm,
    train_loop,
    train_wordpiece,
)

TEXTS = ["the red boat sails", "ο κόκκινος βάρκα", "ყვითელი ნავი მიცურავს", "the blue boat sinks"] * 5


def test_wordpiece_round_trips_through_auto_tokenizer(tmp_path: Path) -> None:
    """A trained tokenizer saved with save_pretrained reloads with AutoTokenizer and encodes identically."""
    tok = train_wordpiece(TEXTS, vocab_size=200)
    tok.save_pretrained(tmp_path)
    again = AutoTokenizer.from_pretrained(tmp_path)
    for text in ["the red boat", "ο κόκκινος", "ყვითელი ნავი"]:
        assert again(text)["input_ids"] == tok(text)["input_ids"]
    assert [tok.convert_ids_to_tokens(i) for i in range(len(SPECIAL_TOKENS))] == list(SPECIAL_TOKENS)


def test_wordpiece_keeps_scripts_and_wraps_in_cls_sep() -> None:
    """Non-Latin words are whole tokens (no [UNK]), accents kept, and an encoding is [CLS] ... [SEP]."""
    tok = train_wordpiece(TEXTS + ["café"] * 3, vocab_size=300)
    ids = tok("ყვითელი café")["input_ids"]
    assert tok.convert_ids_to_tokens(ids) == ["[CLS]", "ყვითელი", "café", "[SEP]"]


def test_tiny_models_have_the_requested_sizes_and_reload(tmp_path: Path) -> None:
    """tiny_encoder gives (B, T, hidden) states; a saved encoder + tokenizer reloads through load_encoder_and_tokenizer."""
    tok = train_wordpiece(TEXTS, vocab_size=200)
    config = tiny_bert_config(len(tok), hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64)
    enc = tiny_encoder(config).eval()
    batch = tok(["the red boat", "ο κόκκινος"], padding=True, return_tensors="pt")
    states = enc(**batch).last_hidden_state
    assert states.shape == (2, batch["input_ids"].shape[1], 32)
    enc.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    model, tok2 = load_encoder_and_tokenizer(tmp_path)
    assert torch.allclose(model.eval()(**batch).last_hidden_state, states, atol=1e-6)
    assert tok2("the red boat")["input_ids"] == tok("the red boat")["input_ids"]
    mlm = tiny_masked_lm(config)
    assert mlm(**batch).logits.shape[-1] == len(tok)


def test_tiny_config_rejects_heads_not_dividing_hidden() -> None:
    """hidden_size must be a multiple of num_heads, with the sizes named in the error."""
    with pytest.raises(ValueError, match="hidden_size 30 must be a multiple of num_heads 4"):
        tiny_bert_config(100, hidden_size=30, num_heads=4)


def test_load_encoder_names_a_missing_directory(tmp_path: Path) -> None:
    """A checkpoint path that is not a directory fails at once, naming the path."""
    with pytest.raises(FileNotFoundError, match="nope"):
        load_encoder_and_tokenizer(tmp_path / "nope")


def test_train_loop_is_seeded_and_lowers_the_loss() -> None:
    """The loop returns one loss per step, decreasing on a regression, and the same history for the same seed."""

    def run() -> list[float]:
        torch.manual_seed(0)
        model = torch.nn.Linear(4, 1)
        x = torch.randn(64, 4)
        y = x @ torch.tensor([[1.0], [-2.0], [0.5], [3.0]])

        def loss_at(step: int) -> torch.Tensor:
            rows = torch.randint(0, 64, (16,))
            return torch.nn.functional.mse_loss(model(x[rows]), y[rows])

        return train_loop(model.parameters(), loss_at, TrainConfig(steps=150, lr=0.05, warmup_steps=5, seed=3), progress=False)

    first, second = run(), run()
    assert len(first) == 150 and first == second
    assert sum(first[-10:]) / 10 < 0.05 * sum(first[:10]) / 10


def test_wordpiece_vocabulary_is_deterministic_and_prefers_frequent_pieces() -> None:
    """The same texts give the same vocabulary in any order; frequent whole words win pieces, rare words split."""
    texts = ["boat boat boat sails", "zorvak boat"] * 3
    a, b = train_wordpiece(texts, vocab_size=40), train_wordpiece(list(reversed(texts)), vocab_size=40)
    assert a.get_vocab() == b.get_vocab()
    assert a.tokenize("boat") == ["boat"]
    assert len(a.tokenize("zorvaks")) > 1 and "[UNK]" not in a.tokenize("zorvaks")  # seen characters, unseen word
    assert a.tokenize("q") == ["[UNK]"]  # a character never seen

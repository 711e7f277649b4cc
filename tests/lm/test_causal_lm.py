"""Causal-LM building blocks: deterministic byte-level BPE, tiny Llama from config, target-only training, local
checkpoint loading, generation with per-view KV caches and step rules, the fact world."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest
import torch
from transformers import AutoTokenizer, DynamicCache

from paperdag.lm import (
    BPE_SPECIAL_TOKENS,
    TrainConfig,
    checkpoint_writer,
    collate,
    contains_answer,
    fit_causal_lm,
    generate,
    load_causal_lm,
    make_fact_world,
    normalize_answer,
    tiny_causal_lm,
    tiny_llama_config,
    train_byte_bpe,
)
from paperdag.lm.tokenizer import bpe_merges

TEXTS = ["Q: Where was Bolani born?\nA: Tirenzo", "The red boat sails to Tirenzo.", "Bolani plays the harp."] * 10


def tiny(vocab: int, **kw) -> torch.nn.Module:
    torch.manual_seed(0)
    return tiny_causal_lm(tiny_llama_config(vocab, hidden_size=32, num_layers=2, num_heads=4, num_kv_heads=2, intermediate_size=64, **kw)).eval()


def test_byte_bpe_round_trips_and_starts_with_bos(tmp_path: Path) -> None:
    """Any text (unseen bytes too) decodes back to itself; with add_bos, ids start with <bos>; save/AutoTokenizer
    reload encodes identically; special tokens are ids 0, 1, 2."""
    tok = train_byte_bpe(TEXTS, 400, add_bos=True)
    for text in ["Q: Where was Bolani born?", "ünïcödé ✓ 42"]:
        ids = tok(text)["input_ids"]
        assert ids[0] == tok.bos_token_id == 1
        assert tok.decode(ids, skip_special_tokens=True) == text
    tok.save_pretrained(tmp_path)
    again = AutoTokenizer.from_pretrained(tmp_path)
    assert again("Bolani plays")["input_ids"] == tok("Bolani plays")["input_ids"]
    assert [tok.convert_ids_to_tokens(i) for i in range(3)] == list(BPE_SPECIAL_TOKENS)


def test_bpe_merges_break_ties_by_pair() -> None:
    """Equal pair counts merge in pair order (deterministic), and frequent words become one token."""
    assert bpe_merges(Counter({"ab": 2, "cd": 2}), 2) == [("a", "b"), ("c", "d")]
    tok = train_byte_bpe(TEXTS, 400)
    assert tok.convert_ids_to_tokens(tok(" Bolani")["input_ids"]) == ["ĠBolani"]
    assert train_byte_bpe(TEXTS, 400).get_vocab() == tok.get_vocab()


def test_config_checks_head_counts() -> None:
    """hidden_size must divide by num_heads and num_heads by num_kv_heads, sizes named in the error."""
    with pytest.raises(ValueError, match="num_kv_heads 3"):
        tiny_llama_config(100, hidden_size=32, num_heads=4, num_kv_heads=3)


def test_collate_puts_loss_on_targets_only() -> None:
    """Labels are -100 on prompt and padding, the target ids elsewhere; rows are right-padded."""
    batch = collate([([1, 5, 6], [7, 2]), ([1, 5], [8, 2])], pad_id=0)
    assert batch["input_ids"].tolist() == [[1, 5, 6, 7, 2], [1, 5, 8, 2, 0]]
    assert batch["labels"].tolist() == [[-100, -100, -100, 7, 2], [-100, -100, 8, 2, -100]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 1, 1], [1, 1, 1, 1, 0]]


def test_fit_memorises_a_tiny_mapping_and_is_seeded() -> None:
    """Four prompt -> answer pairs are learned (greedy generation returns them) and the loss curve is returned;
    the same seed gives the same losses."""
    pairs = [([1, 10 + i, 20], [30 + i, 2]) for i in range(4)]

    def run() -> tuple[list[float], torch.nn.Module]:
        model = tiny(40)
        hist = fit_causal_lm(model, {"all": pairs}, {"all": 1.0}, TrainConfig(steps=200, lr=1e-2, seed=3, weight_decay=0.0), 8, 0, progress=False)
        return hist, model

    hist, model = run()
    assert len(hist) == 200 and hist[-1] < 0.02 * hist[0]
    assert run()[0] == hist
    out = generate(model, [[p for p, _ in pairs]], pad_id=0, eos_id=2, max_new_tokens=3)
    assert out.tokens == [[30 + i] for i in range(4)]


def test_batched_left_padded_generation_equals_one_by_one() -> None:
    """Prompts of different lengths generate the same tokens in one left-padded batch as alone."""
    model = tiny(50)
    prompts = [[1, 5, 6, 7, 8, 9], [1, 11], [1, 12, 13, 14]]
    batched = generate(model, [prompts], pad_id=0, eos_id=2, max_new_tokens=5).tokens
    alone = [generate(model, [[p]], pad_id=0, eos_id=2, max_new_tokens=5).tokens[0] for p in prompts]
    assert batched == alone


def test_cached_steps_match_full_recomputation() -> None:
    """Greedy tokens from the KV-cached loop equal those from re-running the whole sequence each step."""
    model = tiny(50)
    prompt = [1, 5, 6, 7]
    cached = generate(model, [[prompt]], pad_id=0, eos_id=[], max_new_tokens=6).tokens[0]
    seq = list(prompt)
    with torch.no_grad():
        for _ in range(6):
            seq.append(int(model(input_ids=torch.tensor([seq])).logits[0, -1].argmax()))
    assert cached == seq[len(prompt):]


def test_step_rule_sees_every_view_and_chooses_the_token() -> None:
    """A rule receives one (B, V) logits tensor per view each step and its argmax is emitted; each step costs one
    forward pass per view; each view has its own DynamicCache."""
    model = tiny(50)
    seen = []

    def rule(logits):
        seen.append([tuple(x.shape) for x in logits])
        forced = torch.full_like(logits[0], -1e9)
        forced[:, 42] = 0.0
        return forced

    out = generate(model, [[[1, 5, 6]], [[1, 7]]], pad_id=0, eos_id=2, rule=rule, max_new_tokens=3)
    assert out.tokens == [[42, 42, 42]]
    assert seen == [[(1, 50), (1, 50)]] * 3
    assert out.forward_passes == 2 * 3
    assert isinstance(DynamicCache(config=model.config), DynamicCache)


def test_generation_stops_rows_at_eos() -> None:
    """A row that emits eos stops (its tokens end before eos) while others continue up to max_new_tokens."""
    model = tiny(50)

    def rule(logits):
        scores = torch.full_like(logits[0], -1e9)
        scores[0, 2] = 0.0  # row 0: eos at once
        scores[1, 9] = 0.0  # row 1: never eos
        return scores

    out = generate(model, [[[1, 5], [1, 6]]], pad_id=0, eos_id=2, rule=rule, max_new_tokens=4)
    assert out.tokens == [[], [9, 9, 9, 9]]
    assert out.new_tokens == 1 + 4


def test_local_checkpoint_loads_without_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A tiny model + tokenizer written by checkpoint_writer load back with load_causal_lm (offline) and give the
    same logits; eager attention is selectable (attentions are returned)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    tok = train_byte_bpe(TEXTS, 320, add_bos=True)
    model = tiny(len(tok))
    checkpoint_writer(model, tok)(tmp_path / "ckpt")
    loaded, tok2 = load_causal_lm(tmp_path / "ckpt", attn_implementation="eager")
    ids = torch.tensor([tok("Bolani plays")["input_ids"]])
    with torch.no_grad():
        assert torch.allclose(loaded(input_ids=ids).logits, model(input_ids=ids).logits, atol=1e-5)
        assert loaded(input_ids=ids, output_attentions=True).attentions[0].shape[-1] == ids.shape[1]
    assert tok2("Bolani plays")["input_ids"] == ids[0].tolist()
    with pytest.raises(FileNotFoundError, match="not a local directory"):
        load_causal_lm(tmp_path / "missing")


def test_fact_world_is_seeded_and_counterfactuals_differ() -> None:
    """Same seed, same facts; every (entity, relation) has a value from the relation's pool; other_value differs;
    a context states the given value."""
    a, b = make_fact_world(20, seed=5), make_fact_world(20, seed=5)
    assert a.facts == b.facts and len(a.facts) == 20 * len(a.relations)
    rng = random.Random(0)
    for (e, r), v in list(a.facts.items())[:30]:
        assert v in a.relations[r].values
        fake = a.other_value(r, v, rng)
        assert fake != v
        assert fake in a.context(e, r, fake, rng, distractors=1)
    assert a.question(a.entities[0], "sport", 0).startswith("Which sport does")


def test_answer_matching_is_normalised_and_word_bounded() -> None:
    """Case, punctuation and articles are ignored; 'cat' is not found inside 'Catalan'."""
    assert normalize_answer("The  Cat!") == "cat"
    assert contains_answer("He owns a Cat.", "cat")
    assert not contains_answer("Catalan", "cat")

"""Eviction through the transformers Cache on a tiny random Llama: the oracle keeps the true top-C, the cache holds
exactly the kept keys, an unevicted cache decodes like plain generation, the lookahead LoRA leaves the prompt's
rows (and so its cache) untouched, and the rows each rule scores (RowAttention) are the model's own attention rows."""

from __future__ import annotations

import pytest
import torch

from paperdag.lm import generate, tiny_causal_lm, tiny_llama_config
from paperdag.methods.lookaheadkv import (
    METHODS,
    LookaheadKV,
    RowAttention,
    Setting,
    attach,
    decode,
    lookahead_forward,
    lookahead_loss,
    prefill,
    prepare,
)

T, B = 24, 2


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    config = tiny_llama_config(40, hidden_size=32, num_layers=2, num_heads=4, num_kv_heads=2, intermediate_size=64,
                               attn_implementation="eager")
    return tiny_causal_lm(config).eval()


@pytest.fixture(scope="module")
def ids() -> torch.Tensor:
    return torch.randint(3, 40, (B, T), generator=torch.Generator().manual_seed(1))


@pytest.fixture(scope="module")
def module(model) -> LookaheadKV:
    torch.manual_seed(2)
    lk = LookaheadKV.for_model(model, n_tokens=4, rank=4, alpha=16.0)
    for b in lk.lora_B:  # a trained-looking LoRA: nonzero deltas
        torch.nn.init.normal_(b, std=0.5)
    return lk


def test_oracle_keeps_the_true_top_c_per_kv_head(model, ids) -> None:
    """Given s_GT, the oracle keeps per layer and KV head exactly the C positions with the highest (group-mean)
    score, and the evicted cache holds the full cache's keys and values at those positions."""
    gt = torch.rand(B, 2, 4, T, generator=torch.Generator().manual_seed(3))  # (B, L, H, T)
    full_cache, _, _ = prefill(model, ids)
    prepared = prepare("oracle", model, ids, 6, Setting(), oracle_scores=gt)
    for layer, keep in enumerate(prepared.keep):
        group = gt[:, layer].reshape(B, 2, 2, T).mean(2)  # (B, H_kv, T)
        expected = group.topk(6, dim=-1).indices.sort(-1).values
        assert torch.equal(keep, expected)
        kept_keys = prepared.cache.layers[layer].keys
        assert kept_keys.shape == (B, 2, 6, 8)
        want = full_cache.layers[layer].keys.gather(2, expected[..., None].expand(-1, -1, -1, 8))
        assert torch.equal(kept_keys, want)


def test_every_method_evicts_to_the_budget_and_decodes(model, ids, module) -> None:
    """Every method (same code path) leaves C entries per head in every layer (full: all T), and decoding runs."""
    attach(model, module)
    setting = Setting(lookahead=module, draft_tokens=3, window=4)
    for method in METHODS:
        prepared = prepare(method, model, ids, 8, setting, oracle_scores=torch.rand(B, 2, 4, T))
        want = T if method == "full" else 8
        assert all(layer.keys.shape[2] == want for layer in prepared.cache.layers), method
        assert len(decode(model, prepared, 4, [2])) == B


def test_unevicted_cache_decodes_like_plain_generation(model, ids) -> None:
    """A budget at or above the prompt length evicts nothing, and decoding on the prepared cache gives the same
    tokens as paperdag.lm.generate with its own full cache (positions continue correctly)."""
    prepared = prepare("snapkv", model, ids, T + 5, Setting())
    assert prepared.keep is None
    ours = decode(model, prepared, 6, [2])
    plain = generate(model, [ids.tolist()], pad_id=0, eos_id=2, max_new_tokens=6).tokens
    assert ours == plain


def test_lookahead_lora_leaves_prompt_rows_untouched(model, ids, module) -> None:
    """With [prompt; P] and the masked LoRA on, the prompt rows' logits, attention and KV cache equal the plain
    model's on the prompt alone; the lookahead rows do change when the LoRA is switched on (the test can fail)."""
    attach(model, module)
    with torch.no_grad():
        plain = model(input_ids=ids, output_attentions=True)
        cache_plain, _, _ = prefill(model, ids)
        from transformers import DynamicCache

        cache = DynamicCache(config=model.config)
        embeds = model.get_input_embeddings()(ids)
        x = torch.cat([embeds, module.embeddings.expand(B, -1, -1)], dim=1)
        with module.active(module.n_tokens):
            lkv = model(inputs_embeds=x, cache=cache, use_cache=True, output_attentions=True)
        off = model(inputs_embeds=x, output_attentions=True)  # same inputs, LoRA off
    assert torch.allclose(lkv.logits[:, :T], plain.logits, atol=1e-6)
    for a_lkv, a_plain in zip(lkv.attentions, plain.attentions, strict=True):
        assert torch.allclose(a_lkv[:, :, :T, :T], a_plain, atol=1e-6)
    for layer, ref in zip(cache.layers, cache_plain.layers, strict=True):
        assert torch.allclose(layer.keys[:, :, :T], ref.keys, atol=1e-6)
        assert torch.allclose(layer.values[:, :, :T], ref.values, atol=1e-6)
    assert not torch.allclose(lkv.attentions[-1][:, :, T:], off.attentions[-1][:, :, T:], atol=1e-4)


def test_lookahead_training_reduces_the_kl(model, ids) -> None:
    """A few optimiser steps on P and the LoRA lower KL(s_GT || s_LKV) towards an attainable target (the last
    prompt row's attention, per layer and head); the model stays frozen."""
    torch.manual_seed(5)
    fresh = LookaheadKV.for_model(model, n_tokens=4, rank=4, alpha=16.0)
    attach(model, fresh)
    with torch.no_grad():
        gt = torch.stack([a[:, :, -1, :] for a in model(input_ids=ids, output_attentions=True).attentions], dim=1)  # (B, L, H, T)
    frozen = [p.clone() for p in model.parameters()]
    optimizer = torch.optim.Adam(fresh.parameters(), lr=0.02)
    first = float(lookahead_loss(model, fresh, ids, gt).detach())
    for _ in range(20):
        optimizer.zero_grad()
        lookahead_loss(model, fresh, ids, gt).backward()
        optimizer.step()
    assert float(lookahead_loss(model, fresh, ids, gt).detach()) < 0.7 * first
    assert all(torch.equal(a, b) for a, b in zip(frozen, model.parameters(), strict=True))
    _, predicted = lookahead_forward(model, fresh, ids)
    assert predicted.shape == (B, 2, 4, T)


def test_lookahead_module_round_trips(tmp_path, model, module) -> None:
    """save / load keep P and the LoRA weights; loading a directory without it names what is missing."""
    module.save(tmp_path / "lkv")
    again = LookaheadKV.load(tmp_path / "lkv")
    assert all(torch.equal(a, b) for a, b in zip(module.state_dict().values(), again.state_dict().values(), strict=True))
    with pytest.raises(FileNotFoundError, match=r"lookahead_config\.json"):
        LookaheadKV.load(tmp_path)


def test_ground_truth_importance_is_the_response_rows_mean_attention(model, ids) -> None:
    """s_GT (B, L, H, T) per row is the mean, over that row's own response tokens only, of the attention each pays to
    the prompt positions: a batch with responses of different lengths (right-padded) gives every row what it gets
    alone, and a one-token response is the attention row of its position."""
    from paperdag.methods.lookaheadkv import ground_truth_importance

    base = model.model
    responses = [[5, 6, 7, 2], [9, 2]]
    both = ground_truth_importance(model, ids, responses, pad_id=0)
    assert both.shape == (B, 2, 4, T)
    for j, response in enumerate(responses):
        alone = ground_truth_importance(model, ids[j : j + 1], [response], pad_id=0)
        assert torch.allclose(both[j], alone[0], atol=1e-6)
    single = ground_truth_importance(model, ids[:1], [[2]], pad_id=0)
    with torch.inference_mode():
        attn = base(input_ids=torch.cat([ids[:1], torch.tensor([[2]])], dim=1), output_attentions=True).attentions
    assert torch.allclose(single[0], torch.stack([a[0, :, -1, :T] for a in attn]), atol=1e-6)


def test_row_attention_equals_the_models_attention_rows_with_and_without_a_cache(model, ids) -> None:
    """RowAttention's sums over the last w rows are the eager model's attention rows summed, on a plain pass and on
    a pass run on a cache (the cache's keys included), and the same under sdpa (no attention weights returned)."""
    with torch.inference_mode():
        eager = model(input_ids=ids, output_attentions=True).attentions
        with RowAttention(model, first_row=T - 5, chunk=2) as rows:
            model(input_ids=ids)
        for mine, theirs in zip(rows.sums, eager, strict=True):
            assert torch.allclose(mine, theirs[:, :, T - 5 :].sum(2), atol=1e-5)
        cache, _, _ = prefill(model, ids[:, :-3])
        with RowAttention(model, first_row=0) as rows:
            model(input_ids=ids[:, -3:], cache=cache, use_cache=True, position_ids=torch.arange(T - 3, T).expand(B, -1))
        for mine, theirs in zip(rows.sums, eager, strict=True):
            assert torch.allclose(mine, theirs[:, :, T - 3 :].sum(2), atol=1e-5)
        model.config._attn_implementation = "sdpa"
        try:
            with RowAttention(model, first_row=T - 5) as rows:
                model(input_ids=ids)
        finally:
            model.config._attn_implementation = "eager"
        for mine, theirs in zip(rows.sums, eager, strict=True):
            assert torch.allclose(mine, theirs[:, :, T - 5 :].sum(2), atol=1e-5)


def test_snapkv_keeps_its_window_in_the_cache(model, ids) -> None:
    """SnapKV at C = 8, w = 4: every layer and KV head keeps the last 4 prompt positions plus 4 of the prefix."""
    prepared = prepare("snapkv", model, ids, 8, Setting(window=4, kernel=3))
    for keep in prepared.keep:
        assert keep.shape == (B, 2, 8)
        assert keep[..., 4:].tolist() == [[list(range(T - 4, T))] * 2] * B
        assert int(keep[..., :4].max()) < T - 4

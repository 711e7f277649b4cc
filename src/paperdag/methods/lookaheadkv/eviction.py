"""KV-cache eviction as a real cache operation, one code path for every method.

    prepared = prepare(method, model, ids, budget, setting)   # prefill + scores + per-head top-C, in the Cache
    tokens = decode(model, prepared, max_new_tokens, stops)   # greedy decoding on the evicted cache

`prepare` runs the prompt (B, T) through the model into a transformers DynamicCache, scores the prompt positions
with the method's rule (scores.py), and keeps per layer and KV head the chosen C positions by slicing the cache's
keys and values in place (`cache.layers[l].keys` (B, H_kv, T, D) -> (B, H_kv, C, D)). The first response token
comes from the prefill's logits, before eviction (as in SnapKV and LookaheadKV); every later token is decoded on
the evicted cache at its true position T + t (the kept keys carry their original rotary positions).
The model must use eager attention (attention weights are read); a batch holds prompts of one length.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import torch
from transformers import DynamicCache, PreTrainedModel

from paperdag.methods.lookaheadkv.data import METHODS
from paperdag.methods.lookaheadkv.lookahead import LookaheadKV, lookahead_forward
from paperdag.methods.lookaheadkv.scores import (
    h2o_scores,
    kv_head_scores,
    rows_after_prompt,
    snapkv_scores,
    streaming_keep,
    top_c,
)

@dataclass(frozen=True)
class Setting:
    """Each method's own knobs (the budget C is per call)."""

    recent: int = 2  # last prompt positions always kept by the score-based methods (not the oracle: the true top-C)
    sinks: int = 4  # StreamingLLM's attention sinks
    window: int = 8  # SnapKV's observation window w (the draft method's SnapKV cache too)
    kernel: int = 7  # SnapKV's max-pool kernel
    draft_tokens: int = 4  # draft length (tokens generated with the SnapKV cache)
    lookahead: LookaheadKV | None = field(default=None, compare=False)  # trained module, attached to the model


@dataclass
class Prepared:
    cache: DynamicCache  # the prompt's cache after eviction
    first: torch.Tensor  # (B,) first response token (greedy, from the full prefill)
    prompt_len: int  # T: the next token's position
    keep: list[torch.Tensor] | None  # per layer (B, H_kv, C) kept prompt positions; None: nothing evicted


def prefill(model: PreTrainedModel, ids: torch.Tensor, attentions: bool):
    """The prompt through the model into a fresh DynamicCache; (cache, last-position logits (B, V), attentions)."""
    cache = DynamicCache(config=model.config)
    out = model(input_ids=ids, cache=cache, use_cache=True, output_attentions=attentions, logits_to_keep=1)
    return cache, out.logits[:, -1].float(), out.attentions


def evict(cache: DynamicCache, keep: list[torch.Tensor]) -> None:
    """Keep, per layer and KV head, only the given positions (B, H_kv, C) of the cache's keys and values."""
    for layer, idx in zip(cache.layers, keep, strict=True):
        gather = idx[..., None].expand(-1, -1, -1, layer.keys.shape[-1])  # (B, H_kv, C, D)
        layer.keys = layer.keys.gather(2, gather)
        layer.values = layer.values.gather(2, gather)


def _select(per_layer_scores, budget: int, recent: int, kv_heads: int) -> list[torch.Tensor]:
    return [top_c(kv_head_scores(s, kv_heads), budget, recent) for s in per_layer_scores]


@torch.inference_mode()
def prepare(method: str, model: PreTrainedModel, ids: torch.Tensor, budget: int, setting: Setting,
            oracle_scores: torch.Tensor | None = None) -> Prepared:
    """The evicted cache of `method` at per-head budget `budget` for prompts ids (B, T).

    oracle_scores (B, L, H, T): s_GT, needed by "oracle" only."""
    if method not in METHODS:
        raise ValueError(f"unknown eviction method {method!r}; choose from {METHODS}")
    t = ids.shape[1]
    kv_heads = model.config.num_key_value_heads
    if method == "lookahead":
        if setting.lookahead is None:
            raise ValueError("method 'lookahead' needs Setting.lookahead (a trained LookaheadKV module attached to the model)")
        cache = DynamicCache(config=model.config)
        out = lookahead_forward(model, setting.lookahead, ids, cache=cache, logits=True)
        cache.crop(-setting.lookahead.n_tokens)  # drop the lookahead KV: only the prompt's stays
        first = out.logits[:, -1].float().argmax(-1)
        keep = _select((rows_after_prompt(a, t) for a in out.attentions), budget, setting.recent, kv_heads)
        evict(cache, keep)
        return Prepared(cache, first, t, keep)
    needs_attention = method in ("h2o", "snapkv", "draft")
    cache, logits, attn = prefill(model, ids, needs_attention)
    first = logits.argmax(-1)
    if method == "full" or budget >= t:
        return Prepared(cache, first, t, None)
    if method == "streaming":
        keep = [streaming_keep((ids.shape[0], kv_heads), t, budget, setting.sinks)] * len(cache.layers)
    elif method == "h2o":
        keep = _select((h2o_scores(a, t) for a in attn), budget, setting.recent, kv_heads)
    elif method == "snapkv":
        keep = _select((snapkv_scores(a, t, setting.window, setting.kernel) for a in attn), budget, setting.recent, kv_heads)
    elif method == "draft":
        keep = _draft_keep(model, cache, first, attn, t, budget, setting)
    else:
        if oracle_scores is None:
            raise ValueError("method 'oracle' needs oracle_scores (s_GT from the targets stage)")
        keep = _select(oracle_scores.unbind(1), budget, 0, kv_heads)
    evict(cache, keep)
    return Prepared(cache, first, t, keep)


def _draft_keep(model, cache, first, attn, t: int, budget: int, setting: Setting) -> list[torch.Tensor]:
    """The draft-based baseline (LAQ / SpecKV-like): a draft response generated on a SnapKV-evicted copy of the
    cache, then run on the full cache; its rows' attention to the prompt scores the positions."""
    kv_heads = model.config.num_key_value_heads
    draft_cache = copy.deepcopy(cache)
    evict(draft_cache, _select((snapkv_scores(a, t, setting.window, setting.kernel) for a in attn), budget, setting.recent, kv_heads))
    draft = _greedy(model, draft_cache, first, t, setting.draft_tokens)  # (B, m)
    positions = torch.arange(t, t + draft.shape[1]).expand(draft.shape[0], -1)
    out = model(input_ids=draft, position_ids=positions, cache=cache, use_cache=True, output_attentions=True, logits_to_keep=1)
    cache.crop(-draft.shape[1])  # the draft's own KV goes: only the prompt's is evicted and kept
    return _select((rows_after_prompt(a, t) for a in out.attentions), budget, setting.recent, kv_heads)


def _greedy(model: PreTrainedModel, cache: DynamicCache, first: torch.Tensor, position: int, steps: int,
            stops: torch.Tensor | None = None) -> torch.Tensor:
    """`steps` greedy tokens (B, steps) starting with `first` at `position`, each fed back through the cache;
    rows that hit a stop id keep emitting it (the caller cuts there)."""
    tokens = [first]
    done = torch.zeros_like(first, dtype=torch.bool) if stops is None else torch.isin(first, stops)
    for step in range(1, steps):
        if stops is not None and bool(done.all()):
            break
        pos = torch.full((first.shape[0], 1), position + step - 1, dtype=torch.long)
        out = model(input_ids=tokens[-1][:, None], position_ids=pos, cache=cache, use_cache=True)
        nxt = out.logits[:, -1].argmax(-1)
        if stops is not None:
            nxt = torch.where(done, tokens[-1], nxt)
            done = done | torch.isin(nxt, stops)
        tokens.append(nxt)
    return torch.stack(tokens, dim=1)


@torch.inference_mode()
def decode(model: PreTrainedModel, prepared: Prepared, max_new_tokens: int, stop_ids: list[int]) -> list[list[int]]:
    """Greedy response per prompt on the prepared (evicted) cache, cut before the first stop id."""
    stops = torch.tensor(stop_ids, dtype=torch.long)
    tokens = _greedy(model, prepared.cache, prepared.first, prepared.prompt_len, max_new_tokens, stops)
    out = []
    for row in tokens.tolist():
        cut = next((i for i, tok in enumerate(row) if tok in stop_ids), len(row))
        out.append(row[:cut])
    return out

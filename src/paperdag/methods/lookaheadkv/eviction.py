"""KV-cache eviction as a real cache operation, one code path for every method.

    prepared = prepare(method, model, ids, budget, setting)   # prefill + scores + per-head selection, in the Cache
    tokens = decode(model, prepared, max_new_tokens, stops)   # greedy decoding on the evicted cache

`prepare` runs the prompt (B, T) through the model into a transformers DynamicCache, scores the prompt positions
with the method's rule (scores.py; only the query rows the rule needs are scored), and keeps per layer and KV head
the chosen C positions by slicing the cache's keys and values (`cache.layers[l].keys` (B, H_kv, T, D) -> (B, H_kv,
C, D)). The first response token comes from the prefill's logits, before eviction (as in SnapKV and LookaheadKV);
every later token is decoded on the evicted cache at its true position T + t (the kept keys carry their original
rotary positions). A batch holds prompts of one length.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import torch
from transformers import DynamicCache, PreTrainedModel

from paperdag.methods.lookaheadkv.data import METHODS
from paperdag.methods.lookaheadkv.lookahead import LookaheadKV, lookahead_forward
from paperdag.methods.lookaheadkv.scores import RowAttention, h2o_keep, kv_head_scores, snapkv_keep, streaming_keep, top_c


@dataclass(frozen=True)
class Setting:
    """Each method's own knobs (the budget C is per call)."""

    recent: int = 2  # last prompt positions LookaheadKV and the draft method always keep
    sinks: int = 4  # StreamingLLM's attention sinks
    h2o_recent: float = 0.5  # H2O's share of C for the recent window (the paper: half heavy hitters, half recent)
    window: int = 8  # SnapKV's observation window w (the draft method's SnapKV cache too)
    kernel: int = 7  # SnapKV's pooling kernel
    pooling: str = "avgpool"  # SnapKV's pooling (its official code's default)
    draft_tokens: int = 6  # draft length (tokens generated with the SnapKV cache)
    lookahead: LookaheadKV | None = field(default=None, compare=False)  # trained module, attached to the model


@dataclass
class Prepared:
    cache: DynamicCache  # the prompt's cache after eviction
    first: torch.Tensor  # (B,) first response token (greedy, from the full prefill)
    prompt_len: int  # T: the next token's position
    keep: list[torch.Tensor] | None  # per layer (B, H_kv, C) kept prompt positions; None: nothing evicted


def prefill(model: PreTrainedModel, ids: torch.Tensor, first_row: int | None = None):
    """The prompt through the model into a fresh DynamicCache; (cache, last-position logits (B, V), per-layer sums
    of the attention rows first_row.. (B, H, T), or None when first_row is None)."""
    cache = DynamicCache(config=model.config)
    if first_row is None:
        out = model(input_ids=ids, cache=cache, use_cache=True, logits_to_keep=1)
        return cache, out.logits[:, -1].float(), None
    with RowAttention(model, first_row=first_row) as rows:
        out = model(input_ids=ids, cache=cache, use_cache=True, logits_to_keep=1)
    return cache, out.logits[:, -1].float(), rows.sums


def evict(cache: DynamicCache, keep: list[torch.Tensor]) -> None:
    """Keep, per layer and KV head, only the given positions (B, H_kv, C) of the cache's keys and values."""
    for layer, idx in zip(cache.layers, keep, strict=True):
        gather = idx[..., None].expand(-1, -1, -1, layer.keys.shape[-1])  # (B, H_kv, C, D)
        layer.keys = layer.keys.gather(2, gather)
        layer.values = layer.values.gather(2, gather)


def _snapkv(sums, t: int, budget: int, setting: Setting, kv_heads: int) -> list[torch.Tensor]:
    return [snapkv_keep(kv_head_scores(s[..., :t], kv_heads), budget, setting.window, setting.kernel, setting.pooling) for s in sums]


@torch.inference_mode()
def prepare(method: str, model: PreTrainedModel, ids: torch.Tensor, budget: int, setting: Setting,
            oracle_scores: torch.Tensor | None = None) -> Prepared:
    """The evicted cache of `method` at per-head budget `budget` for prompts ids (B, T); nothing is evicted (and
    nothing scored) when C >= T. oracle_scores (B, L, H, T): s_GT, needed by "oracle" only."""
    if method not in METHODS:
        raise ValueError(f"unknown eviction method {method!r}; choose from {METHODS}")
    t = ids.shape[1]
    kv_heads = model.config.num_key_value_heads
    evicts = method != "full" and budget < t
    if method == "lookahead" and evicts:
        if setting.lookahead is None:
            raise ValueError("method 'lookahead' needs Setting.lookahead (a trained LookaheadKV module attached to the model)")
        cache = DynamicCache(config=model.config)
        out, s_lkv = lookahead_forward(model, setting.lookahead, ids, cache=cache, logits=True)
        cache.crop(-setting.lookahead.n_tokens)  # drop the lookahead KV: only the prompt's stays
        keep = [top_c(kv_head_scores(s, kv_heads), budget, setting.recent) for s in s_lkv.unbind(1)]
        evict(cache, keep)
        return Prepared(cache, out.logits[:, -1].float().argmax(-1), t, keep)
    first_row = {"h2o": 0, "snapkv": t - setting.window, "draft": t - setting.window}.get(method) if evicts else None
    cache, logits, sums = prefill(model, ids, first_row)
    first = logits.argmax(-1)
    if not evicts or method == "lookahead":
        return Prepared(cache, first, t, None)
    if method == "streaming":
        keep = [streaming_keep((ids.shape[0], kv_heads), t, budget, setting.sinks)] * len(cache.layers)
    elif method == "h2o":
        keep = [h2o_keep(kv_head_scores(s, kv_heads), budget, setting.h2o_recent) for s in sums]
    elif method == "snapkv":
        keep = _snapkv(sums, t, budget, setting, kv_heads)
    elif method == "draft":
        keep = _draft_keep(model, cache, first, sums, t, budget, setting)
    else:
        if oracle_scores is None:
            raise ValueError("method 'oracle' needs oracle_scores (s_GT from the targets stage)")
        keep = [top_c(kv_head_scores(s, kv_heads), budget, 0) for s in oracle_scores.unbind(1)]
    evict(cache, keep)
    return Prepared(cache, first, t, keep)


def _draft_keep(model, cache, first, window_sums, t: int, budget: int, setting: Setting) -> list[torch.Tensor]:
    """The draft-based baseline (LAQ / SpecKV-like): a draft response generated on a SnapKV-evicted copy of the
    cache, then run on the full cache; its rows' attention to the prompt (those rows only) scores the positions."""
    kv_heads = model.config.num_key_value_heads
    draft_cache = copy.deepcopy(cache)
    evict(draft_cache, _snapkv(window_sums, t, budget, setting, kv_heads))
    draft = _greedy(model, draft_cache, first, t, setting.draft_tokens)  # (B, m)
    positions = torch.arange(t, t + draft.shape[1]).expand(draft.shape[0], -1)
    with RowAttention(model, first_row=0) as rows:
        model(input_ids=draft, position_ids=positions, cache=cache, use_cache=True, logits_to_keep=1)
    cache.crop(-draft.shape[1])  # the draft's own KV goes: only the prompt's is evicted and kept
    return [top_c(kv_head_scores(s[..., :t], kv_heads), budget, setting.recent) for s in rows.sums]


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

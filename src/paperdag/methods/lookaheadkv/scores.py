"""Importance of each prompt position per layer and head, one rule per method, and the per-head selections.

Only the attention rows a rule needs are computed (`RowAttention`: the observation window's, the lookahead's, the
draft's or the response's queries against the layer's keys), never the T x T maps of an eager pass; H2O alone needs
every row (its score is a column sum), computed in chunks of rows. The forward pass itself runs under whatever
attention the model uses (sdpa). Each rule gives scores (B, H, T) over the T prompt positions; eviction keeps, per
layer and KV head, C positions (a fixed token budget C, never a ratio).

    full            no eviction
    StreamingLLM    the first `sinks` positions and the most recent C - sinks                       (Xiao et al. 2024)
    H2O             heavy hitters (attention accumulated over every prompt row) + a recent window    (Zhang et al. 2023)
    SnapKV          attention of the last w prompt rows to the prefix before them, pooled over a
                    kernel; top C - w of the prefix plus the whole window (C > w)                     (Li et al. 2024)
    draft           attention from a draft response's rows (generated with a SnapKV cache)           (LAQ / SpecKV-like)
    LookaheadKV     s_LKV[j] = mean over lookahead rows i of A_LKV[i, j]                              (lookaheadkv.md)
    oracle          s_GT[j] = mean over the true response's rows i of A[i, j]
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from transformers.models.llama.modeling_llama import rotate_half


def _rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary position embedding of x (B, H, R, D) at the positions cos / sin (B, R, D) stand for."""
    return x * cos[:, None] + rotate_half(x) * sin[:, None]


class RowAttention:
    """Within the block, every attention layer of `model` also computes the softmax attention of the rows
    `first_row`.. of each forward pass (positions of that pass, not of the cache) over all its keys (the cache's
    earlier ones included), causally, and keeps per layer their weighted sum over rows: `sums[l]` (B, H, K).

    Queries are recomputed from the layer's input with its own q_proj (so a LookaheadKV LoRA on those rows applies)
    and rotary embedding; keys are the cache's after the layer ran, or recomputed from the input without a cache.
    `weights` (B, R) leaves padded rows out; `chunk` bounds the rows scored at once (H2O scores all of them)."""

    def __init__(self, model, first_row: int, weights: torch.Tensor | None = None, chunk: int = 64) -> None:
        self.layers = [layer.self_attn for layer in getattr(model, model.base_model_prefix).layers]
        self.first_row, self.weights, self.chunk = first_row, weights, chunk
        self.sums: list[torch.Tensor] = []
        self._handles: list = []

    def __enter__(self) -> RowAttention:
        self.sums = []
        self._handles = [attn.register_forward_hook(self._hook, with_kwargs=True) for attn in self.layers]
        return self

    def __exit__(self, *exc) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []

    def _hook(self, attn, args, kwargs, output) -> None:
        hidden = kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]  # (B, L, d)
        cos, sin = kwargs["position_embeddings"]  # (B, L, D) each
        cache = kwargs.get("cache", kwargs.get("past_key_values"))
        b, length, _ = hidden.shape
        d = attn.head_dim
        if cache is not None:
            keys = cache.layers[attn.layer_idx].keys  # (B, H_kv, K, D), rotated, this pass's keys included
        else:
            keys = attn.k_proj(hidden).view(b, length, -1, d).transpose(1, 2)
            keys = _rotary(attn.k_norm(keys) if hasattr(attn, "k_norm") else keys, cos, sin)
        groups = attn.config.num_attention_heads // keys.shape[1]
        keys = keys.repeat_interleave(groups, dim=1).float()  # (B, H, K, D)
        k_total = keys.shape[2]
        offset = k_total - length  # cached positions before this pass
        total = torch.zeros(b, keys.shape[1], k_total)
        for lo in range(self.first_row, length, self.chunk):
            hi = min(length, lo + self.chunk)
            q = attn.q_proj(hidden[:, lo:hi]).view(b, hi - lo, -1, d).transpose(1, 2)  # (B, H, r, D)
            q = _rotary(attn.q_norm(q) if hasattr(attn, "q_norm") else q, cos[:, lo:hi], sin[:, lo:hi]).float()
            logits = (q @ keys.transpose(2, 3)) * attn.scaling  # (B, H, r, K)
            row_pos = offset + torch.arange(lo, hi)[:, None]  # each row's own key index
            logits = logits.masked_fill(torch.arange(k_total)[None, :] > row_pos, float("-inf"))
            a = logits.softmax(-1)
            if self.weights is not None:
                a = a * self.weights[:, None, lo - self.first_row : hi - self.first_row, None].float()
            total = total + a.sum(2)
        self.sums.append(total)


def kv_head_scores(scores: torch.Tensor, kv_heads: int) -> torch.Tensor:
    """Query-head scores (B, H, T) -> KV-head scores (B, H_kv, T): grouped-query heads share one cache entry, so a
    KV head's score is the mean over its group (identity for multi-head attention)."""
    b, h, t = scores.shape
    return scores.reshape(b, kv_heads, h // kv_heads, t).mean(2)


def top_c(scores: torch.Tensor, budget: int, recent: int = 0) -> torch.Tensor:
    """Per-head positions to keep: the last `recent` positions, then the highest scores up to `budget` in all;
    (B, H_kv, T) -> sorted indices (B, H_kv, min(budget, T)). Ties go to the earlier position (stable sort)."""
    t = scores.shape[-1]
    if budget >= t:
        return torch.arange(t).expand(*scores.shape[:-1], t)
    s = scores.clone().float()
    if recent > 0:
        s[..., t - min(recent, budget) :] = float("inf")
    keep = torch.sort(s, dim=-1, descending=True, stable=True).indices[..., :budget]
    return keep.sort(dim=-1).values


def pool(scores: torch.Tensor, kernel: int, pooling: str = "avgpool") -> torch.Tensor:
    """SnapKV's clustering: scores (B, H, T) pooled over `kernel` neighbours (stride 1, same length)."""
    if kernel <= 1:
        return scores
    b, h, t = scores.shape
    x = scores.reshape(b * h, 1, t)
    pad = kernel // 2
    if pooling == "maxpool":
        y = F.max_pool1d(x, kernel, stride=1, padding=pad)
    elif pooling == "avgpool":
        y = F.avg_pool1d(x, kernel, stride=1, padding=pad, count_include_pad=False)
    else:
        raise ValueError(f"unknown SnapKV pooling {pooling!r}; choose avgpool or maxpool")
    return y[..., :t].reshape(b, h, t)


def snapkv_keep(window_votes: torch.Tensor, budget: int, window: int, kernel: int, pooling: str = "avgpool") -> torch.Tensor:
    """SnapKV (Li et al. 2024): the last `window` prompt rows vote (their attention summed) for the prefix positions
    before the window; the votes are pooled over `kernel`; the top C - w prefix positions and the whole window are
    kept. window_votes (B, H_kv, T) -> (B, H_kv, C) sorted; needs C > w (the paper's max_capacity_prompt > window)."""
    t = window_votes.shape[-1]
    if budget <= window:
        raise ValueError(f"SnapKV needs a budget C above its window w: C = {budget}, w = {window}")
    if budget >= t:
        return torch.arange(t).expand(*window_votes.shape[:-1], t)
    prefix = pool(window_votes[..., : t - window], kernel, pooling)  # (B, H_kv, T - w)
    chosen = torch.sort(prefix, dim=-1, descending=True, stable=True).indices[..., : budget - window]
    tail = torch.arange(t - window, t).expand(*window_votes.shape[:-1], window)
    return torch.cat([chosen.sort(dim=-1).values, tail], dim=-1)


def h2o_keep(accumulated: torch.Tensor, budget: int, recent_fraction: float = 0.5) -> torch.Tensor:
    """H2O (Zhang et al. 2023): the most recent round(C x recent_fraction) positions plus the heavy hitters, the
    positions before them with the most attention accumulated over every prompt row (the paper splits the budget
    evenly between the two); (B, H_kv, T) -> (B, H_kv, C) sorted."""
    t = accumulated.shape[-1]
    if budget >= t:
        return torch.arange(t).expand(*accumulated.shape[:-1], t)
    recent = min(budget, max(1, round(budget * recent_fraction)))
    heavy = torch.sort(accumulated[..., : t - recent], dim=-1, descending=True, stable=True).indices[..., : budget - recent]
    tail = torch.arange(t - recent, t).expand(*accumulated.shape[:-1], recent)
    return torch.cat([heavy.sort(dim=-1).values, tail], dim=-1)


def streaming_keep(shape: tuple[int, int], prompt_len: int, budget: int, sinks: int) -> torch.Tensor:
    """StreamingLLM: attention sinks (the first `sinks` positions) plus the most recent budget - sinks; (B, H_kv, C)."""
    if budget >= prompt_len:
        idx = torch.arange(prompt_len)
    else:
        s = min(sinks, budget)
        idx = torch.cat([torch.arange(s), torch.arange(prompt_len - (budget - s), prompt_len)])
    return idx.expand(*shape, idx.numel())


def overlap(keep: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """|keep ∩ reference| / |reference| per row and head: (B, H, C) x (B, H, C) -> (B, H)."""
    hit = (keep[..., :, None] == reference[..., None, :]).any(-1)  # (B, H, C)
    return hit.float().sum(-1) / reference.shape[-1]


def ground_truth_importance(model, prompt_ids: torch.Tensor, responses: list[list[int]], pad_id: int) -> torch.Tensor:
    """s_GT (B, L, H, T): per layer and head, the mean attention that the true response's rows pay to each prompt
    position, from one forward pass over [prompt; response] (`responses` end with their eos, so an empty response
    still has one row; right-padded rows left out: causal attention keeps the real rows off the padding)."""
    longest = max(len(r) for r in responses)
    tail = torch.full((len(responses), longest), pad_id, dtype=torch.long)  # (B, R), right-padded
    for j, r in enumerate(responses):
        tail[j, : len(r)] = torch.tensor(r, dtype=torch.long)
    rows = (torch.arange(longest)[None, :] < torch.tensor([len(r) for r in responses])[:, None]).float()  # (B, R)
    t = prompt_ids.shape[1]
    with torch.inference_mode(), RowAttention(model, first_row=t, weights=rows) as cap:
        getattr(model, model.base_model_prefix)(input_ids=torch.cat([prompt_ids, tail], dim=1))
    return torch.stack([s[..., :t] / rows.sum(1)[:, None, None] for s in cap.sums], dim=1)  # (B, L, H, T)

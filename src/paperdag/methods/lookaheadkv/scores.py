"""Importance of each prompt position per layer and head, one rule per method, and the per-head top-C selection.

Every rule maps one layer's attention weights A (B, H, rows, columns), from an eager forward pass, to scores
(B, H, T) over the T prompt positions. Eviction keeps, per layer and KV head, the C highest-scoring positions
(a fixed token budget C, never a ratio), optionally forcing the last `recent` positions in.

    full            no eviction
    StreamingLLM    the first `sinks` positions and the most recent C - sinks                (Xiao et al. 2024)
    H2O             accumulated attention each position received from every prompt row       (Zhang et al. 2023)
    SnapKV          attention from the last w prompt rows (observation window), max-pooled    (Li et al. 2024)
    draft           attention from a draft response's rows (generated with a SnapKV cache)    (LAQ / SpecKV-like)
    LookaheadKV     s_LKV[j] = mean over lookahead rows i of A_LKV[i, j]                       (lookaheadkv.md)
    oracle          s_GT[j] = mean over the true response's rows i of A[i, j]
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def rows_after_prompt(attn: torch.Tensor, prompt_len: int, row_weight: torch.Tensor | None = None) -> torch.Tensor:
    """Mean attention that the rows after the prompt (lookahead, draft or response tokens) pay to each prompt
    position: (B, H, Q, K) -> (B, H, T). The Q query rows are the last Q of the K key positions (Q = K for a whole
    sequence, Q < K for tokens run on a cache), so the rows after the prompt start at prompt_len - (K - Q).
    row_weight (B, R) in {0, 1} leaves padded rows out."""
    first = prompt_len - (attn.shape[3] - attn.shape[2])
    if first < 0:
        raise ValueError(f"rows_after_prompt: {attn.shape[2]} query rows over {attn.shape[3]} keys include prompt rows before {prompt_len}")
    a = attn[:, :, first:, :prompt_len].float()  # (B, H, R, T)
    if row_weight is None:
        return a.mean(2)
    w = row_weight.float()[:, None, :, None]  # (B, 1, R, 1)
    return (a * w).sum(2) / w.sum(2).clamp(min=1.0)


def h2o_scores(attn: torch.Tensor, prompt_len: int) -> torch.Tensor:
    """H2O's heavy-hitter score: attention accumulated over every prompt row (column sums of the causal map)."""
    return attn[:, :, :prompt_len, :prompt_len].float().sum(2)


def snapkv_scores(attn: torch.Tensor, prompt_len: int, window: int, kernel: int) -> torch.Tensor:
    """SnapKV: mean attention from the last `window` prompt rows, max-pooled over `kernel` neighbours so that a
    selected position brings its neighbourhood (kernel 7 in the paper)."""
    w = min(window, prompt_len)
    votes = attn[:, :, prompt_len - w : prompt_len, :prompt_len].float().mean(2)  # (B, H, T)
    if kernel <= 1:
        return votes
    b, h, t = votes.shape
    return F.max_pool1d(votes.reshape(b * h, 1, t), kernel, stride=1, padding=kernel // 2).reshape(b, h, t)


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
    position, from one eager forward pass over [prompt; response] (`model` a base transformer that returns
    attentions; `responses` end with their eos, so an empty response still has one row; padded rows left out)."""
    longest = max(len(r) for r in responses)
    tail = torch.full((len(responses), longest), pad_id, dtype=torch.long)  # (B, R), right-padded
    for j, r in enumerate(responses):
        tail[j, : len(r)] = torch.tensor(r, dtype=torch.long)
    with torch.inference_mode():
        attn = model(input_ids=torch.cat([prompt_ids, tail], dim=1), output_attentions=True).attentions
    rows = torch.arange(longest)[None, :] < torch.tensor([len(r) for r in responses])[:, None]  # (B, R)
    return torch.stack([rows_after_prompt(a, prompt_ids.shape[1], rows) for a in attn], dim=1)  # (B, L, H, T)

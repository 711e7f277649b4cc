"""Each eviction rule on hand-made attention matrices, and the per-head top-C selection."""

from __future__ import annotations

import pytest
import torch

from paperdag.methods.lookaheadkv import (
    h2o_scores,
    kl_per_layer_head,
    kv_head_scores,
    overlap,
    rows_after_prompt,
    snapkv_scores,
    streaming_keep,
    top_c,
)

# one example, one head, 5 prompt positions; row i attends to positions <= i (a causal map)
A = torch.tensor([[
    [1.0, 0.0, 0.0, 0.0, 0.0],
    [0.5, 0.5, 0.0, 0.0, 0.0],
    [0.2, 0.2, 0.6, 0.0, 0.0],
    [0.1, 0.7, 0.1, 0.1, 0.0],
    [0.1, 0.1, 0.1, 0.1, 0.6],
]])[None]  # (1, 1, 5, 5)


def test_h2o_accumulates_the_attention_each_position_received() -> None:
    """H2O's score of position j is the column sum over every prompt row; top-2 are the two heaviest columns."""
    scores = h2o_scores(A, 5)
    assert torch.allclose(scores[0, 0], torch.tensor([1.9, 1.5, 0.8, 0.2, 0.6]))
    assert top_c(scores, 2).tolist() == [[[0, 1]]]


def test_snapkv_uses_the_observation_window_and_pools() -> None:
    """SnapKV averages the last w rows (w = 2: rows 3 and 4), then max-pools over the kernel's neighbours."""
    votes = snapkv_scores(A, 5, window=2, kernel=1)
    assert torch.allclose(votes[0, 0], torch.tensor([0.1, 0.4, 0.1, 0.1, 0.3]))
    pooled = snapkv_scores(A, 5, window=2, kernel=3)
    assert torch.allclose(pooled[0, 0], torch.tensor([0.4, 0.4, 0.4, 0.3, 0.3]))
    assert top_c(votes, 2).tolist() == [[[1, 4]]]


def test_rows_after_prompt_average_only_real_rows() -> None:
    """Lookahead / draft / response rows: mean over the rows after the prompt of their attention to prompt columns;
    a padded row (weight 0) is left out."""
    attn = torch.zeros(1, 1, 5, 5)
    attn[0, 0, 3] = torch.tensor([0.6, 0.2, 0.0, 0.2, 0.0])
    attn[0, 0, 4] = torch.tensor([0.0, 0.8, 0.0, 0.1, 0.1])
    assert torch.allclose(rows_after_prompt(attn, 3)[0, 0], torch.tensor([0.3, 0.5, 0.0]))
    assert torch.allclose(rows_after_prompt(attn, 3, torch.tensor([[1, 0]]))[0, 0], torch.tensor([0.6, 0.2, 0.0]))


def test_rows_run_on_a_cache_are_all_after_the_prompt() -> None:
    """Draft tokens run on the prompt's cache give (B, H, m, T + m) maps: every one of the m rows counts."""
    attn = torch.zeros(1, 1, 2, 5)  # 2 draft rows over 3 prompt + 2 draft keys
    attn[0, 0, 0] = torch.tensor([0.6, 0.2, 0.0, 0.2, 0.0])
    attn[0, 0, 1] = torch.tensor([0.0, 0.8, 0.0, 0.1, 0.1])
    assert torch.allclose(rows_after_prompt(attn, 3)[0, 0], torch.tensor([0.3, 0.5, 0.0]))


def test_top_c_forces_the_recent_window_and_keeps_budget_tokens_per_head() -> None:
    """With recent = 1 the last position is kept whatever its score; heads choose independently; a budget at or
    above the prompt length keeps everything."""
    scores = torch.tensor([[[5.0, 1.0, 4.0, 3.0, 0.0], [0.0, 9.0, 1.0, 8.0, 2.0]]])  # (1, 2, 5)
    assert top_c(scores, 3).tolist() == [[[0, 2, 3], [1, 3, 4]]]
    assert top_c(scores, 3, recent=1).tolist() == [[[0, 2, 4], [1, 3, 4]]]
    assert top_c(scores, 9).tolist() == [[[0, 1, 2, 3, 4], [0, 1, 2, 3, 4]]]


def test_streaming_keeps_sinks_and_the_most_recent() -> None:
    """StreamingLLM: the first `sinks` positions and the last budget - sinks, for every head alike."""
    assert streaming_keep((1, 2), 10, 5, 2).tolist() == [[[0, 1, 7, 8, 9]] * 2]
    assert streaming_keep((1, 1), 4, 8, 2).tolist() == [[[0, 1, 2, 3]]]


def test_grouped_query_heads_share_their_kv_head_score() -> None:
    """Four query heads over two KV heads: each KV head's score is the mean of its two query heads."""
    scores = torch.tensor([[[1.0, 0.0], [3.0, 2.0], [0.0, 4.0], [2.0, 0.0]]])  # (1, 4, 2)
    assert kv_head_scores(scores, 2).tolist() == [[[2.0, 1.0], [1.0, 2.0]]]


def test_overlap_counts_shared_positions() -> None:
    """|keep ∩ oracle| / C per head."""
    assert overlap(torch.tensor([[[0, 2, 4]]]), torch.tensor([[[2, 3, 4]]])).item() == pytest.approx(2 / 3)


def test_kl_is_zero_for_equal_distributions_and_matches_a_hand_value() -> None:
    """KL(normalised gt || normalised pred): 0 when proportional; 0.5 ln 2 for (1/2, 1/2) vs (1, ~0) reversed."""
    gt = torch.tensor([2.0, 2.0])
    assert abs(float(kl_per_layer_head(gt, torch.tensor([1.0, 1.0])))) < 1e-6
    value = float(kl_per_layer_head(torch.tensor([1.0, 1.0]), torch.tensor([0.75, 0.25])))
    expected = 0.5 * torch.log(torch.tensor(0.5 / 0.75)) + 0.5 * torch.log(torch.tensor(0.5 / 0.25))
    assert abs(value - float(expected)) < 1e-5

"""Each eviction rule on hand-made attention matrices, and the per-head top-C selection."""

from __future__ import annotations

import pytest
import torch

from paperdag.methods.lookaheadkv import (
    h2o_keep,
    kl_per_layer_head,
    kv_head_scores,
    overlap,
    pool,
    snapkv_keep,
    streaming_keep,
    top_c,
)


def test_snapkv_scores_only_the_prefix_and_keeps_its_whole_window() -> None:
    """SnapKV: the window's votes for the prefix (positions before the last w) pick the top C - w there; the w
    window positions are always kept, however low their own votes; C = w is refused (the paper needs C > w)."""
    votes = torch.tensor([[[0.1, 5.0, 0.2, 3.0, 0.0, 9.0, 9.0, 0.0, 0.0]]])  # (1, 1, 9): 9s at window-ish positions
    keep = snapkv_keep(votes, budget=5, window=3, kernel=1)  # prefix 0..5, window 6, 7, 8
    assert keep.tolist() == [[[1, 5, 6, 7, 8]]]
    with pytest.raises(ValueError, match="above its window"):
        snapkv_keep(votes, budget=3, window=3, kernel=1)
    assert snapkv_keep(votes, budget=20, window=3, kernel=1).tolist() == [[list(range(9))]]


def test_snapkv_pooling_clusters_the_votes() -> None:
    """Pooling over a kernel spreads a vote to its neighbours: average (the official default) and max."""
    votes = torch.tensor([[[0.0, 3.0, 0.0, 0.0, 0.0]]])
    assert torch.allclose(pool(votes, 3, "avgpool")[0, 0], torch.tensor([1.5, 1.0, 1.0, 0.0, 0.0]))
    assert torch.allclose(pool(votes, 3, "maxpool")[0, 0], torch.tensor([3.0, 3.0, 3.0, 0.0, 0.0]))
    assert torch.equal(pool(votes, 1), votes)


def test_h2o_keeps_heavy_hitters_and_a_recent_window() -> None:
    """H2O: half the budget the most recent positions, half the heaviest accumulated-attention positions before them."""
    acc = torch.tensor([[[9.0, 1.0, 8.0, 2.0, 7.0, 0.0, 0.0, 0.0]]])  # (1, 1, 8)
    assert h2o_keep(acc, 4).tolist() == [[[0, 2, 6, 7]]]
    assert h2o_keep(acc, 4, recent_fraction=0.25).tolist() == [[[0, 2, 4, 7]]]


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

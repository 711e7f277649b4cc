"""The cost figures of lookaheadkv's evaluation: overheads over the plain prefill timed beside each method, the claims'
ratios at the least favourable budget, and an unmeasurable ratio (a baseline overhead lost in timing noise) left out."""

from __future__ import annotations

import polars as pl
import pytest

from paperdag.methods.lookaheadkv.data import METHODS
from paperdag.methods.lookaheadkv.metrics import headline, replicate_numbers


def _predictions(budgets: list[int]) -> pl.DataFrame:
    return pl.DataFrame([{"row": 0, "split": s, "method": m, "budget": b, "prediction": "", "correct": True, "overlap_with_oracle": None}
                         for s in ("question_after", "question_before") for m in METHODS for b in budgets],
                        schema_overrides={"overlap_with_oracle": pl.Float64})


def _runs(ms: dict[int, dict[str, float]]) -> list[dict]:
    return [{"split": "question_after", "row": 0, "method": m, "budget": b, "examples": 1, "prompt_len": 256, "seconds": t / 1000}
            for b, by in ms.items() for m, t in by.items()]


def test_cost_ratios_are_of_overheads_at_the_least_favourable_budget() -> None:
    times = {32: {"full": 10.0, "snapkv": 12.0, "lookahead": 13.0, "draft": 40.0, "streaming": 10.0, "h2o": 11.0},
             64: {"full": 10.0, "snapkv": 11.0, "lookahead": 12.0, "draft": 28.0, "streaming": 10.0, "h2o": 11.0}}
    got = replicate_numbers(_predictions([32, 64]), _runs(times), small_budgets=1)
    assert got["overhead_ms_per_example"]["32"]["lookahead"] == pytest.approx(3.0)
    assert got["ratio_lkv_over_snapkv"] == pytest.approx(2.0)  # worst budget: 64 (2 / 1), not 32 (3 / 2)
    assert got["ratio_draft_over_lkv"] == pytest.approx(9.0)  # least favourable: 64 (18 / 2), not 32 (30 / 3)
    assert got["lkv_overhead_share_of_prefill"] == pytest.approx(0.3)
    assert got["total_ratio_lkv_over_snapkv"] == pytest.approx(12 / 11)  # worst budget: 64
    assert got["total_ratio_draft_over_lkv"] == pytest.approx(28 / 12)


def test_a_baseline_overhead_lost_in_noise_leaves_the_ratio_unmeasured_not_held() -> None:
    """SnapKV timed at or below the plain prefill: LookaheadKV / SnapKV is undefined, so the replicate's ratio and the
    headline's interval are None (the claim reads missing), never an interval over the other replicates."""
    good = {32: {"full": 10.0, "snapkv": 12.0, "lookahead": 13.0, "draft": 40.0, "streaming": 10.0, "h2o": 11.0}}
    noisy = {32: {**good[32], "snapkv": 9.5}}
    per = {str(k): replicate_numbers(_predictions([32]), _runs(t), small_budgets=1) for k, t in enumerate([good, noisy, good])}
    assert per["1"]["ratio_lkv_over_snapkv"] is None and per["0"]["ratio_lkv_over_snapkv"] == pytest.approx(1.5)
    head = headline(per, {k: {"question_after": 100.0} for k in per}, [256], {k: {"32": [2, 1]} for k in per})
    assert head["ratio_lkv_over_snapkv"] is None
    assert head["ratio_draft_over_lkv"]["n"] == 3

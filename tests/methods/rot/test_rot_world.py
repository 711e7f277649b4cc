"""The rot problem world: traces, the four splits' composition, no leakage, counts met or raise; answer parsing; the
headline's arithmetic."""

from __future__ import annotations

import random

import polars as pl
import pytest

from paperdag.methods.rot.metrics import headline, replicate_scores, work_of, written_plan
from paperdag.methods.rot.task import parse_answer, plan_text, prompt, target
from paperdag.methods.rot.world import (CHAINS, Problem, check_splits, make_splits, problems_table, store_windows, windows)

COUNTS = {"store": 2, "train": 3, "val": 1, "test": 2}


@pytest.fixture(scope="module")
def table() -> pl.DataFrame:
    return problems_table(make_splits(COUNTS, 3, 2, random.Random(0)))


def test_a_problem_computes_its_steps_in_order() -> None:
    """start 6: harvest + 3 = 9, fox - 2 = 7, gift * 2 = 14; digits spaced; the answer, the written plan and the
    work parsed back."""
    p = Problem("word", ("harvest", "fox", "gift"), 6, (3, 2, 2))
    assert p.values() == [6, 9, 7, 14] and p.answer == 14
    assert p.computation == "6 + 3 = 9 ; 9 - 2 = 7 ; 7 * 2 = 1 4 ; answer 1 4"
    assert parse_answer(target(p, True)) == 14 and parse_answer(target(p, False)) == 14
    assert parse_answer(" 6 + 3 = 9 ; answer") is None
    assert prompt(p.text, p.template).endswith("\nWork:") and prompt(p.text, None).endswith("\nPlan:")
    assert written_plan(target(p, False)) == plan_text(p.template) and written_plan(target(p, True)) is None
    assert work_of(target(p, False)) == work_of(target(p, True)) == p.computation


def test_splits_have_the_requested_counts_and_kinds(table: pl.DataFrame) -> None:
    """store: COUNTS per stored window (chain suffixes >= 3 steps); train/val/test: per window of 2-6 steps; test rows
    are seen exactly when their window is a stored one."""
    stored = store_windows(3)
    every = windows(range(2, 7))
    assert len(stored) == sum(len(c) - 2 for c in CHAINS.values()) == 12 and len(every) == 45
    sizes = dict(table.group_by("split").len().iter_rows())
    assert sizes == {"store": 2 * 12, "train": 3 * 45, "val": 45, "test": 2 * 45}
    test = table.filter(pl.col("split") == "test")
    for r in test.iter_rows(named=True):
        assert r["kind"] == ("seen" if (r["family"], tuple(r["steps"])) in stored else "new")
    assert test.filter(pl.col("kind") == "new").height == 2 * 33
    assert set(map(tuple, table.filter(pl.col("split") == "store")["steps"])) == {s for _, s in stored}


def test_no_evaluation_problem_is_stored_or_trained_on(table: pl.DataFrame) -> None:
    """Texts are unique across splits, so no test or validation problem is in the store or the training data; a
    leaked row makes check_splits raise."""
    assert table["text"].n_unique() == table.height
    check_splits(table, "test")
    leaked = table.with_columns(pl.when(pl.col("split") == "test").then(pl.lit(table["text"][0])).otherwise(pl.col("text")).alias("text"))
    with pytest.raises(ValueError, match="appear in the store or training data"):
        check_splits(leaked, "test")


def test_a_count_that_cannot_be_met_raises() -> None:
    """gift -> baskets has 25 distinct problems: 40 per window cannot be delivered."""
    with pytest.raises(ValueError, match="cannot draw 40 distinct train problems"):
        make_splits({"store": 1, "train": 40, "val": 1, "test": 1}, 3, 2, random.Random(0))


def rows(arm: str, correct: list[bool], tokens: list[int], seconds: float) -> list[dict]:
    """Rows of one arm; its generations: a plan then "Work: 1 + 1 = 2" (none), the work alone (rot), or other work
    when the answer is wrong."""
    def generated(c: bool) -> str:
        work = "1 + 1 = 2 ; answer 2" if c else "1 + 2 = 3 ; answer 3"
        return f"A: a.\nWork: {work}" if arm == "none" else work

    return [{"problem": i, "kind": "new", "arm": arm, "correct": c, "output_tokens": t, "seconds": seconds,
             "template_exact": None if arm == "none" else c, "start_right": None if arm == "none" else c,
             "plan_right": c, "generated": generated(c), "stop": "threshold" if arm == "rot" else ""}
            for i, (c, t) in enumerate(zip(correct, tokens, strict=True))]


def test_headline_arithmetic_by_hand() -> None:
    """none 2/2 right at 40 tokens, static 1/2 at 20, rot 2/2 at 30 tokens and half none's latency: accuracy 100 / 50
    / 100, token reduction 100 (1 - 30/40) = 25 %, latency ratio 0.5; the same numbers in each of two replicates;
    none's plans right and rot's work none's on both problems."""
    frame = pl.DataFrame(rows("none", [True, True], [40, 40], 0.2) + rows("static", [True, False], [20, 20], 0.1)
                         + rows("rot", [True, True], [30, 30], 0.1))
    s = replicate_scores(frame)
    assert (s["acc_none"], s["acc_static"], s["acc_rot"]) == (100.0, 50.0, 100.0)
    h = headline([s, s])
    assert h["token_reduction_rot_vs_none_pct"]["mean"] == pytest.approx(25.0)
    assert h["latency_ratio_rot_over_none"]["mean"] == pytest.approx(0.5)
    assert h["acc_rot_minus_static"]["mean"] == pytest.approx(50.0) and h["acc_rot_minus_none"]["mean"] == 0.0
    assert s["plan_right_none"] == 100.0 and s["rot_work_as_none"] == 100.0

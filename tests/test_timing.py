"""paperdag.timing: the best of N wall times, and computations timed in turn."""

from __future__ import annotations

import time

from paperdag.timing import best_of, best_of_interleaved


def test_best_of_keeps_the_fastest_run_and_the_last_result() -> None:
    """Of a slow first run and fast later ones, the fastest time is kept; the result is the last run's."""
    calls = []

    def fn() -> int:
        calls.append(None)
        time.sleep(0.05 if len(calls) == 1 else 0.0)
        return len(calls)

    result, seconds = best_of(fn, 3)
    assert result == 3 and len(calls) == 3 and seconds < 0.04


def test_best_of_runs_once_at_least() -> None:
    """repeats 0 still runs (and times) the function once."""
    assert best_of(lambda: "x", 0)[0] == "x"


def test_interleaved_runs_alternate_and_each_keeps_its_own_best() -> None:
    """The functions run a, b, a, b: each keeps its result and its own fastest time."""
    order: list[str] = []
    results, seconds = best_of_interleaved([lambda: order.append("a") or "A", lambda: (order.append("b"), time.sleep(0.02))[0] or "B"], 2)
    assert order == ["a", "b", "a", "b"] and results == ["A", "B"]
    assert seconds[0] < 0.015 <= seconds[1]

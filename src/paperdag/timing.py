"""Wall times that survive a noisy shared machine: the best of N runs, and two computations timed in turn so that a
ratio of their times compares runs under the same load."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def best_of(fn: Callable[[], T], repeats: int) -> tuple[T, float]:
    """fn()'s result (of the last run) and the fastest of `repeats` (at least one) wall times, in seconds."""
    best = math.inf
    for _ in range(max(1, repeats)):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return result, best


def best_of_interleaved(fns: list[Callable[[], object]], repeats: int) -> tuple[list[object], list[float]]:
    """Each fn's result (of its last run) and fastest wall time, the fns run one after the other in every repeat."""
    best: list[float] = [math.inf] * len(fns)
    results: list[object] = [None] * len(fns)
    for _ in range(max(1, repeats)):
        for i, fn in enumerate(fns):
            start = time.perf_counter()
            results[i] = fn()
            best[i] = min(best[i], time.perf_counter() - start)
    return results, best

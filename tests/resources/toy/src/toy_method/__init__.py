"""A stand-in method package: the toy pipeline's code dependency."""

import time


def spin(seconds: float) -> None:
    """Burn CPU for `seconds` (a stand-in for real compute)."""
    end = time.perf_counter() + seconds
    x = 0
    while time.perf_counter() < end:
        x += 1

"""Synthetic drills mixed into a tiny LM's training so that it forms a circuit its task needs but learns slowly from
the task alone.

copy_drill: `length` words drawn at random, then a stretch of them again. Every copied token after the first is
predictable only by an induction head (find the current token earlier, copy its successor), and the stretch starts
at a random place, so no fixed-position shortcut predicts it: the densest signal there is for copying out of a
context (a lookup in a long context, a name read out of a retrieved passage).
"""

from __future__ import annotations

import random
from collections.abc import Sequence


def copy_drill(words: Sequence[str], length: int, stretch: int, rng: random.Random) -> tuple[str, str]:
    """(prompt, response): `length` words drawn uniformly with replacement from `words`, space-joined, and the
    `stretch` of them that starts at a uniformly drawn place, space-joined. Draws rng.choice per word, then
    rng.randrange once (callers' data depend on that order)."""
    if not 0 < stretch < length:
        raise ValueError(f"a copy drill repeats a stretch shorter than its symbols: 0 < stretch < length; got {stretch}, {length}")
    drawn = [rng.choice(words) for _ in range(length)]
    start = rng.randrange(length - stretch + 1)
    return " ".join(drawn), " ".join(drawn[start : start + stretch])

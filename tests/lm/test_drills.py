"""paperdag.lm.drills: a copy drill repeats a stretch of its own words, drawn in the documented order."""

from __future__ import annotations

import random

import pytest

from paperdag.lm.drills import copy_drill


def test_copy_drill_draws_words_then_the_start() -> None:
    """rng.choice per word, then rng.randrange once: the order callers' recorded data depend on."""
    words = ["ka", "lo", "mi", "nu"]
    prompt, response = copy_drill(words, 7, 3, random.Random(5))
    rng = random.Random(5)
    drawn = [rng.choice(words) for _ in range(7)]
    start = rng.randrange(5)
    assert prompt.split() == drawn and response.split() == drawn[start : start + 3]


def test_copy_drill_needs_a_stretch_shorter_than_its_words() -> None:
    """A stretch of 0 or of every word is refused, naming the bound."""
    for stretch in (0, 4):
        with pytest.raises(ValueError, match="0 < stretch < length"):
            copy_drill(["a", "b"], 4, stretch, random.Random(0))

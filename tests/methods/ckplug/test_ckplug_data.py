"""The ckplug data: every requested count is delivered or refused with an error (issue 17: the adaptive set came out
short, silently), and each noise level's composition."""

from __future__ import annotations

import polars as pl
import pytest

from paperdag.methods.ckplug import WorldSizes, build, level_counts


def sizes(**change) -> WorldSizes:
    base = dict(known_entities=10, reading_entities=4, fresh_entities=4, test_facts=20, adaptive_items=10,
                adaptive_noise=(0.2, 0.5, 0.8), distractors=0, conflict_items=10, consistent_items=5)
    return WorldSizes(**(base | change))


def test_level_counts_split_noisy_and_correct_halves() -> None:
    """round(items x noise) noisy; the correct rest half on fresh entities (rounded up), half on known facts."""
    assert level_counts(200, 0.5) == {"noisy_known": 100, "correct_known": 50, "correct_fresh": 50}
    assert level_counts(10, 0.8) == {"noisy_known": 8, "correct_known": 1, "correct_fresh": 1}
    assert level_counts(10, 0.0) == {"noisy_known": 0, "correct_known": 5, "correct_fresh": 5}


def test_adaptive_set_holds_every_requested_item_per_level() -> None:
    """The set issue 17 found short (150 of 200, correct_known empty) now has adaptive_items per level, each group
    as counted, distinct facts within a level, and no known fact of it is shown with a context in training."""
    _, _, train, counterfactual, adaptive = build(sizes(), 3)
    assert counterfactual.height == 20
    for noise in (0.2, 0.5, 0.8):
        level = adaptive.filter(pl.col("noise") == noise)
        assert dict(level.group_by("group").len().iter_rows()) == {k: v for k, v in level_counts(10, noise).items() if v}
        assert level.select("entity", "relation").n_unique() == 10
    contextual = {(e, r) for e, r, c in train.select("entity", "relation", "context").iter_rows() if c}
    known = adaptive.filter(pl.col("group") != "correct_fresh")
    assert not contextual & set(known.select("entity", "relation").iter_rows())
    assert not set(counterfactual.select("entity", "relation").iter_rows()) & set(known.select("entity", "relation").iter_rows())


@pytest.mark.parametrize("change, what", [
    ({"test_facts": 60}, "known facts held out"),  # 10 people x 6 relations = 60 known facts: none left for the adaptive set
    ({"adaptive_items": 40, "fresh_entities": 2}, "fresh-entity items"),  # 12 fresh facts, 16 asked at noise 0.2
    ({"test_facts": 51}, "no known fact is left"),  # 51 + 9 (noise 0.8: 8 noisy, 1 correct known) held: none for conflict rows
])
def test_a_count_that_cannot_be_met_is_an_error(change: dict, what: str) -> None:
    with pytest.raises(ValueError, match=what):
        build(sizes(**change), 3)


def test_reading_copies_state_their_own_values_so_only_the_context_answers() -> None:
    """With reading_copies > 1, every reading fact comes `copies` times, each answer the value its own context states,
    and the values differ between copies: an (entity, relation) -> value map cannot be memorised, copying can."""
    _, groups, train, _, _ = build(sizes(reading_copies=5), 3)
    reading = train.filter(pl.col("kind") == "reading")
    assert reading.height == 4 * 6 * 5  # reading_entities x relations x copies
    for row in reading.iter_rows(named=True):
        assert row["answer"] in row["context"]
    per_fact = reading.group_by("entity", "relation").agg(pl.col("answer").n_unique().alias("values"))
    assert per_fact.height == 4 * 6 and per_fact["values"].mean() > 2  # 5 draws from pools of >= 8 values
    assert set(reading["entity"]) == set(groups["reading"])
    once = build(sizes(), 3)[2].filter(pl.col("kind") == "reading")
    assert once.height == 4 * 6 and once.group_by("entity", "relation").len()["len"].max() == 1
    with pytest.raises(ValueError, match="reading_copies"):
        build(sizes(reading_copies=0), 3)

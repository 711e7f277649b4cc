"""Typed stage params: strict validation naming the key, seeds, and `--set` overrides."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from paperdag.engine.errors import SpecError
from paperdag.engine.params import build, collect, lookup, set_params, stage_seed


@dataclass(frozen=True)
class P:
    n: int
    rate: float
    sizes: tuple[int, ...]
    name: str = "x"
    seed: int = 0


PARAMS = {"base": {"seed": 3}, "m": {"s": {"n": 4, "rate": 1, "sizes": [1, 2]}, "name": "y"}}


def test_sections_and_scalars_flatten_into_fields() -> None:
    """A mapping key contributes its entries, a scalar key itself; ints are accepted for floats, lists for tuples."""
    p = build(P, collect(PARAMS, ("m.s", "m.name")), seed=99, stage="m:s")
    assert p == P(n=4, rate=1.0, sizes=(1, 2), name="y", seed=99)


@pytest.mark.parametrize(
    "override, key, fragment",
    [({"n": "4"}, "m.s.n", "expected int"), ({"n": 4.5}, "m.s.n", "expected int"), ({"extra": 1}, "m.s.extra", "unknown key")],
)
def test_wrong_type_or_unknown_key_names_the_key(override: dict, key: str, fragment: str) -> None:
    """A string for an int, a float for an int, or an unknown key is an error naming the dotted key."""
    params = {"base": {"seed": 3}, "m": {"s": {"n": 4, "rate": 1.0, "sizes": [1], **override}}}
    with pytest.raises(SpecError) as e:
        build(P, collect(params, ("m.s",)), seed=1, stage="m:s")
    assert e.value.key == key and fragment in e.value.problem


def test_missing_field_is_an_error() -> None:
    """A dataclass field without default that params.yaml does not provide is reported by name."""
    with pytest.raises(SpecError, match="needs params field 'rate'"):
        build(P, collect({"m": {"n": 1, "sizes": []}}, ("m",)), seed=1, stage="m:s")


def test_stage_seed_is_stable_and_distinct() -> None:
    """Seeds depend on base.seed and the stage address only."""
    a, b = stage_seed(PARAMS, "p:a"), stage_seed(PARAMS, "p:b")
    assert a == stage_seed(PARAMS, "p:a") and a != b
    assert stage_seed({"base": {"seed": 4}}, "p:a") == a + 1


def test_set_params_keeps_comments_and_checks_types(tmp_path: Path) -> None:
    """--set rewrites one value in place (comments survive), refuses unknown keys and type changes."""
    f = tmp_path / "params.yaml"
    f.write_text("base:\n  seed: 1  # the seed\nm:\n  rate: 0.5  # a rate\n")
    assert set_params(tmp_path, ["m.rate=2"]) == [("m.rate", 0.5, 2)]
    assert "# a rate" in f.read_text() and "rate: 2" in f.read_text()
    with pytest.raises(SpecError, match="m.nope: not in params.yaml"):
        set_params(tmp_path, ["m.nope=1"])
    with pytest.raises(SpecError, match="expected int"):
        set_params(tmp_path, ["base.seed=abc"])
    assert lookup({"a": {"b": 1}}, "a.b") == 1

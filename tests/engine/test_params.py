"""Typed stage params: strict validation naming the key, seeds, and `--set` overrides."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Annotated, Literal

import pytest
from pydantic import Field, PositiveInt

from support import REPO, cli
from paperdag.engine.errors import SpecError
from paperdag.engine.params import build, collect, load_params, lookup, set_params, stage_seed


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


@dataclass(frozen=True)
class Bounded:
    count: PositiveInt
    share: Annotated[float, Field(ge=0, le=1)]
    sizes: list[PositiveInt]


@pytest.mark.parametrize(
    "override, key, fragment",
    [({"count": 0}, "m.count", "greater than 0"), ({"count": -5}, "m.count", "greater than 0"),
     ({"share": 1.5}, "m.share", "less than or equal to 1"), ({"sizes": [2, 0]}, "m.sizes[1]", "got 0 (Input should be greater than 0)")],
)
def test_impossible_value_of_the_right_type_names_the_key_and_what_is_allowed(override: dict, key: str, fragment: str) -> None:
    """A params field's constraint (pydantic Annotated / PositiveInt) is checked: 0 for a count, 1.5 for a fraction."""
    params = {"m": {"count": 3, "share": 0.5, "sizes": [1, 2], **override}}
    assert build(Bounded, collect({"m": {"count": 3, "share": 0.5, "sizes": [1]}}, ("m",)), seed=1, stage="m:s").count == 3
    with pytest.raises(SpecError) as e:
        build(Bounded, collect(params, ("m",)), seed=1, stage="m:s")
    assert e.value.file == "params.yaml" and e.value.key == key and fragment in e.value.problem


@dataclass(frozen=True)
class Paired:
    low: int
    high: int

    def __post_init__(self) -> None:
        if self.low > self.high:
            raise ValueError("high", f"{self.high} must be >= low ({self.low})")


def test_a_check_across_fields_names_the_key_at_fault() -> None:
    """A params dataclass's __post_init__ raising ValueError(field, problem) is a SpecError on that field's
    params.yaml key; values that pass build the dataclass."""
    assert build(Paired, collect({"m": {"low": 1, "high": 2}}, ("m",)), seed=1, stage="m:s") == Paired(1, 2)
    with pytest.raises(SpecError) as e:
        build(Paired, collect({"m": {"low": 3, "high": 2}}, ("m",)), seed=1, stage="m:s")
    assert (e.value.file, e.value.key, e.value.problem) == ("params.yaml", "m.high", "2 must be >= low (3)")


def _stage_module(path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """A stage module loaded from its file, registered while the test runs (type hints resolve in its namespace)."""
    spec = importlib.util.spec_from_file_location(f"stages_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("bad", [0, -5])
def test_mfc_points_per_cluster_must_be_positive(bad: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """mfc.train.points_per_cluster -5 used to be accepted and 0 to raise ZeroDivisionError inside the stage."""
    module = _stage_module(REPO / "stages" / "mfc.py", monkeypatch)
    params = load_params(REPO)
    params["mfc"]["train"]["points_per_cluster"] = bad
    with pytest.raises(SpecError, match=r"^params.yaml: mfc.train.points_per_cluster: .*greater than 0"):
        build(module.TrainParams, collect(params, ("mfc.train",)), seed=1, stage="mfc:train")


def test_set_keeps_flow_lists_quotes_and_comments(tmp_path: Path) -> None:
    """--set of one value rewrites that line only: a flow list stays `[a, b]` with its comment, quotes and long lines
    elsewhere are kept as written."""
    shutil.copyfile(REPO / "params.yaml", tmp_path / "params.yaml")
    before = (tmp_path / "params.yaml").read_text().splitlines()
    set_params(tmp_path, ["mfc.infer.r_sweep=[1, 2]", "mfc.synthesize.points_file=x.npy"])
    after = (tmp_path / "params.yaml").read_text().splitlines()
    changed = [(a, b) for a, b in zip(before, after) if a != b]
    assert len(after) == len(before) and len(changed) == 2, changed
    (old_sweep, new_sweep), (old_file, new_file) = sorted(changed, key=lambda c: "r_sweep" not in c[0])
    assert new_sweep.startswith("    r_sweep: [1, 2] ") and new_sweep.endswith(old_sweep.partition("#")[2])
    assert new_file.startswith('    points_file: "x.npy" ') and new_file.endswith(old_file.partition("#")[2])


@pytest.mark.parametrize(
    "assignment, message",
    [("toy.make.extra_rows=missing.parquet", "params.yaml: toy.make.extra_rows: missing.parquet does not exist"),
     ("toy.make.n=0", "params.yaml: toy.make.n: expected int, got 0")],
)
def test_failed_set_leaves_params_yaml_untouched(toy: Path, assignment: str, message: str) -> None:
    """`run --set` validates the whole project against the new value before writing: a refused value is not written."""
    before = (toy / "params.yaml").read_bytes()
    r = cli(toy, "run", "toy", "--set", assignment, check=False)
    assert r.returncode == 2 and message in r.stderr, r.stderr
    assert (toy / "params.yaml").read_bytes() == before
    assert not (toy / "data").exists()


@dataclass(frozen=True)
class Ordered:
    low: int
    high: int

    def __post_init__(self) -> None:
        if self.low > self.high:
            raise ValueError("low", f"must be at most high = {self.high}; got {self.low}")
        if self.low < 0:
            raise ValueError(f"low and high must not be negative; got {self.low}")


def test_cross_field_check_names_the_field_key_or_the_stage() -> None:
    """A __post_init__ ValueError(field, why) is reported on that field's params.yaml key; any other ValueError on
    the stage's params; values it accepts build."""
    assert build(Ordered, collect({"m": {"low": 1, "high": 2}}, ("m",)), seed=1, stage="m:s") == Ordered(1, 2)
    with pytest.raises(SpecError) as e:
        build(Ordered, collect({"m": {"low": 3, "high": 2}}, ("m",)), seed=1, stage="m:s")
    assert (e.value.file, e.value.key, e.value.problem) == ("params.yaml", "m.low", "must be at most high = 2; got 3")
    with pytest.raises(SpecError) as e:
        build(Ordered, collect({"m": {"low": -3, "high": 2}}, ("m",)), seed=1, stage="m:s")
    assert e.value.key == "the params of stage m:s" and "must not be negative" in e.value.problem


# the LM pipelines' params, refused when they load (what used to raise only when the stage ran): key -> bad value
LM_REFUSED = {
    ("lookaheadkv", "synthesize", "min_train_pairs"): 13,  # above pairs = 12
    ("lookaheadkv", "synthesize", "asked"): 13,  # above pairs = 12
    ("lookaheadkv", "synthesize", "pairs"): 5,  # below asked = 6
    ("lookaheadkv", "train_lm", "curriculum"): [{"steps": 2200, "contexts": 60, "mixture": {"question_after": 1.0, "recall": 1.0}}],
    ("lookaheadkv", "train_lm", "steps"): 100,  # not the curriculum's steps in all
    ("lookaheadkv", "train_lm", "num_kv_heads"): 3,  # does not divide num_heads = 4
    ("lookaheadkv", "infer", "budgets"): [8, 0],
    ("tokmem", "synthesize", "letters"): 27,
    ("tokmem", "synthesize", "input_length"): [2],
    ("tokmem", "train_backbone", "mixture"): {"described": 1.0, "token_calls": 0.5},
    ("tokmem", "baselines", "replay_fraction"): 1.5,
    ("ckplug", "train", "mixture"): {"closed_book": 1.0, "quiz": 0.5},
    ("ckplug", "infer", "conflict_rule"): "papers",
    ("ckplug", "infer", "alphas"): [0.25, 1.0],
}


@pytest.mark.parametrize("pipeline, stage, field", sorted(LM_REFUSED))
def test_lm_pipeline_params_are_refused_at_load_naming_their_key(pipeline: str, stage: str, field: str,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Each bad value fails building the stage's params (what `paperdag render --check` and every command do),
    with an error on its params.yaml key (the key itself, an entry of it, or the field a cross-field check names);
    the shipped params.yaml builds."""
    module = _stage_module(REPO / "stages" / f"{pipeline}.py", monkeypatch)
    cls = next(getattr(module, n) for n in dir(module)
               if n.endswith("Params") and n.lower().startswith(stage.replace("_", "")))
    item = {"replicate": 0} if pipeline == "ckplug" and stage in ("train", "infer") else None
    params = load_params(REPO)
    build(cls, collect(params, (f"{pipeline}.{stage}",)), seed=1, stage=f"{pipeline}:{stage}", item=item)
    params[pipeline][stage][field] = LM_REFUSED[(pipeline, stage, field)]
    with pytest.raises(SpecError) as e:
        build(cls, collect(params, (f"{pipeline}.{stage}",)), seed=1, stage=f"{pipeline}:{stage}", item=item)
    named = {"pairs": "asked", "num_kv_heads": "num_heads"}.get(field, field)  # cross-field: the field checked
    assert e.value.file == "params.yaml" and e.value.key.startswith(f"{pipeline}.{stage}.{named}"), e.value


@dataclass(frozen=True)
class Mixture:
    weights: dict[Literal["a", "b"], Annotated[float, Field(ge=0)]]


def test_a_refused_mapping_key_is_named_as_a_key() -> None:
    """A mapping key outside its Literal choices is reported on the dotted key of that entry, as a key with the
    choices; a refused value of an allowed key as that value."""
    with pytest.raises(SpecError) as e:
        build(Mixture, collect({"m": {"weights": {"a": 1.0, "c": 2.0}}}, ("m",)), seed=1, stage="m:s")
    assert e.value.key == "m.weights.c" and e.value.problem.startswith("key 'c' (Input should be 'a' or 'b')")
    with pytest.raises(SpecError) as e:
        build(Mixture, collect({"m": {"weights": {"a": -1.0}}}, ("m",)), seed=1, stage="m:s")
    assert e.value.key == "m.weights.a" and e.value.problem.startswith("got -1.0")


def test_an_empty_lookaheadkv_curriculum_is_refused_at_load(monkeypatch: pytest.MonkeyPatch) -> None:
    """train_lm.curriculum needs at least one phase (LM_REFUSED above tests a phase with an unknown row kind)."""
    module = _stage_module(REPO / "stages" / "lookaheadkv.py", monkeypatch)
    params = load_params(REPO)
    params["lookaheadkv"]["train_lm"]["curriculum"] = []
    with pytest.raises(SpecError) as e:
        build(module.TrainLMParams, collect(params, ("lookaheadkv.train_lm",)), seed=1, stage="lookaheadkv:train_lm")
    assert e.value.file == "params.yaml" and e.value.key.startswith("lookaheadkv.train_lm.curriculum"), e.value

"""The artifact-type registry (engine/artifacts.py): the declaration picks a type by suffix, the runner reads and
writes through it, verify compares through it, paperdag.lock hashes its stable content; the jsonl type; a type a
project registers itself."""

from __future__ import annotations

import importlib.metadata
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from support import RESOURCES
from paperdag.engine import artifacts, stable
from paperdag.engine.artifacts import ArtifactType, register_type
from paperdag.engine.errors import SpecError, StageError
from paperdag.engine.spec import Artifact, load_project
from paperdag.engine.verify import compare


def art(name: str, atype: str) -> Artifact:
    return Artifact(name=name, path=f"data/{name}", kind="out", type=atype)


def test_the_registry_knows_every_type_by_one_suffix() -> None:
    """Each suffix selects one type; a trailing '/' is a directory; an unknown suffix selects none."""
    assert {s: artifacts.for_path(f"x{s}").name for s in artifacts.known_suffixes()} == {  # type: ignore[union-attr]
        ".parquet": "parquet", ".json": "json", ".jsonl": "jsonl", ".safetensors": "safetensors", ".npy": "npy",
        ".png": "png"}
    assert artifacts.for_path("data/model/").name == "dir"  # type: ignore[union-attr]
    assert artifacts.for_path("data/x.csv") is None
    with pytest.raises(StageError, match="unknown artifact type csv"):
        artifacts.get("csv")


def test_jsonl_round_trip_is_a_list_of_dicts_one_per_line(tmp_path: Path) -> None:
    """A list of dicts is written one compact JSON object per line (numpy values made plain) and read back equal."""
    rows = [{"step": np.int64(0), "action": "search", "args": {"q": "x"}}, {"step": 1, "reward": np.float32(0.5)}]
    path = tmp_path / "trace.jsonl"
    artifacts.write(art("trace", "jsonl"), rows, path)
    assert path.read_text().splitlines() == ['{"step":0,"action":"search","args":{"q":"x"}}', '{"step":1,"reward":0.5}']
    assert artifacts.read("jsonl", path) == [{"step": 0, "action": "search", "args": {"q": "x"}}, {"step": 1, "reward": 0.5}]
    artifacts.write(art("empty", "jsonl"), [], tmp_path / "empty.jsonl")
    assert artifacts.read("jsonl", tmp_path / "empty.jsonl") == []


@pytest.mark.parametrize("value, message", [
    ({"a": 1}, "expected a list of dicts"),
    ([{"a": 1}, 2], "expected a list of dicts"),
    ([{"a": 1}, {"b": float("nan")}], "row 1: non-finite number nan"),
])
def test_jsonl_refuses_what_is_not_rows_naming_the_output(tmp_path: Path, value: Any, message: str) -> None:
    with pytest.raises(StageError, match=rf"^output 'trace' \(data/trace\): {message}"):
        artifacts.write(art("trace", "jsonl"), value, tmp_path / "t.jsonl")


def test_a_jsonl_line_that_is_not_an_object_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"a": 1}\n[1, 2]\n')
    with pytest.raises(StageError, match=r"t.jsonl cannot be read as jsonl: ValueError: line 2 is a JSON list"):
        artifacts.read("jsonl", path)


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_jsonl_compares_row_by_row_within_rtol_and_skips_volatile_keys(tmp_path: Path) -> None:
    """A float within rtol is equal, a volatile key of any row is listed not compared, a changed value names its row
    and key, a different row count says so."""
    a = _jsonl(tmp_path / "a.jsonl", [{"r": 1.0, "s": 0.1}, {"r": 2.0, "s": 0.2}])
    close = _jsonl(tmp_path / "b.jsonl", [{"r": 1.0 + 1e-9, "s": 0.5}, {"r": 2.0, "s": 0.9}])
    assert compare(art("t", "jsonl"), a, close, ("t.s",), 1e-6) == {
        "reproduced": True, "how": "equal within rtol=1e-06 (volatile, not compared: t.s)"}
    far = _jsonl(tmp_path / "c.jsonl", [{"r": 1.0, "s": 0.1}, {"r": 3.0, "s": 0.2}])
    assert compare(art("t", "jsonl"), a, far, (), 1e-6) == {"reproduced": False, "how": "differs: row 1: t.r: 2.0 != 3.0"}
    short = _jsonl(tmp_path / "d.jsonl", [{"r": 1.0, "s": 0.1}])
    assert compare(art("t", "jsonl"), a, short, (), 1e-6)["how"] == "differs: t: 2 rows vs 1"


def test_jsonl_stable_digest_leaves_out_volatile_keys_of_every_row(tmp_path: Path) -> None:
    """paperdag.lock's md5 of a jsonl output is the same for two runs that differ only in a volatile key."""
    a = _jsonl(tmp_path / "a.jsonl", [{"r": 1, "seconds": 0.1}, {"r": 2, "seconds": 0.3}])
    b = _jsonl(tmp_path / "b.jsonl", [{"r": 1, "seconds": 0.7}, {"r": 2, "seconds": 0.9}])
    c = _jsonl(tmp_path / "c.jsonl", [{"r": 1, "seconds": 0.1}, {"r": 5, "seconds": 0.3}])
    t = art("t", "jsonl")
    assert stable.digest(t, a, ("t.seconds",)) == stable.digest(t, b, ("t.seconds",)) != stable.digest(t, c, ("t.seconds",))
    assert stable.digest(t, a, ()) is None  # no pattern names a value inside it: dvc.lock's md5 says everything
    assert stable.digest(art("v", "npy"), a, ("v.x",)) is None  # an array holds no named values


@pytest.mark.parametrize("atype, ours, theirs, how", [
    ("json", {"a": 1.0, "t": 3}, {"a": 1.0 + 1e-9, "t": 4}, "equal within rtol=1e-06 (volatile, not compared: x.t)"),
    ("json", {"a": 1.0}, {"a": 2.0}, "differs: x.a: 1.0 != 2.0"),
    ("parquet", pl.DataFrame({"f": [1.0, 2.0], "t": [1, 2]}), pl.DataFrame({"f": [1.0, 2.0 + 1e-9], "t": [5, 6]}),
     "equal within rtol=1e-06 (volatile, not compared: x.t)"),
    ("parquet", pl.DataFrame({"f": [1.0], "i": [1]}), pl.DataFrame({"f": [1.0], "i": [2]}), "differs: x.i: values differ"),
    ("npy", np.array([1.0, 2.0]), np.array([1.0, 2.0 + 1e-9]), "equal within rtol=1e-06"),
    ("safetensors", {"w": np.zeros(2, np.float32)}, {"w": np.ones(2, np.float32)}, "differs: x[w]: max abs diff 1 beyond rtol=1e-06"),
    ("png", b"\x89PNG a", b"\x89PNG b", "differs: x: bytes differ"),
])
def test_verify_compares_each_type_as_before(tmp_path: Path, atype: str, ours: Any, theirs: Any, how: str) -> None:
    """verify's comparison, through the registry: JSON and Parquet within rtol with volatile keys/columns skipped,
    arrays within rtol, a PNG by its bytes."""
    a, b = tmp_path / f"a.{atype}", tmp_path / f"b.{atype}"
    artifacts.write(art("x", atype), ours, a)
    artifacts.write(art("x", atype), theirs, b)
    assert compare(art("x", atype), a, b, ("x.t",), 1e-6)["how"] == how
    assert compare(art("x", atype), a, a, (), 0.0) == {"reproduced": True, "how": "bit-identical"}
    assert compare(art("x", atype), a, b, ("x",), 0.0) == {"reproduced": True, "how": "volatile output, not compared"}


def test_a_directory_compares_its_safetensors_within_rtol_and_other_files_by_bytes(tmp_path: Path) -> None:
    def model(d: Path, w: float, config: str) -> Path:
        def save(path: Path) -> None:
            artifacts.write(art("w", "safetensors"), {"w": np.full(2, w)}, path / "w.safetensors")
            (path / "config.json").write_text(config)

        artifacts.write(art("m", "dir"), save, d)
        return d

    a = model(tmp_path / "a", 1.0, "{}")
    assert compare(art("m", "dir"), a, model(tmp_path / "b", 1.0 + 1e-12, "{}"), (), 1e-6)["how"] == "equal within rtol=1e-06"
    assert compare(art("m", "dir"), a, model(tmp_path / "c", 1.0, "{ }"), (), 1e-6)["how"] == "differs: m/config.json: bytes differ"


class Csv(ArtifactType):
    name, suffixes = "csv_test", (".csv",)

    def read(self, path: Path) -> Any:
        return pl.read_csv(path)

    def write(self, value: Any, path: Path) -> None:
        if not isinstance(value, pl.DataFrame):
            raise TypeError(f"expected a polars DataFrame, got {type(value).__name__}")
        value.write_csv(path)


@pytest.fixture
def csv_type() -> Any:
    t = register_type(Csv())
    yield t
    del artifacts.TYPES[t.name]


def test_a_registered_type_is_declared_by_suffix_read_written_and_compared(csv_type: ArtifactType, tmp_path: Path) -> None:
    """A project's own type: its suffix becomes a valid output in pipelines/, the runner's read and write use it, and
    verify compares it by bytes (its default)."""
    df = pl.DataFrame({"a": [1, 2]})
    artifacts.write(art("c", "csv_test"), df, tmp_path / "c.csv")
    assert artifacts.read("csv_test", tmp_path / "c.csv").equals(df)
    with pytest.raises(StageError, match=r"output 'c' \(data/c\): expected a polars DataFrame, got dict"):
        artifacts.write(art("c", "csv_test"), {}, tmp_path / "d.csv")
    (tmp_path / "e.csv").write_text("a\n3\n")
    assert compare(art("c", "csv_test"), tmp_path / "c.csv", tmp_path / "e.csv", (), 1e-6)["how"] == "differs: c: bytes differ"
    with pytest.raises(ValueError, match="already registered"):
        register_type(Csv())

    repo = tmp_path / "toy"
    shutil.copytree(RESOURCES / "toy", repo)
    spec = repo / "pipelines" / "toy.yaml"
    spec.write_text(spec.read_text().replace("data/toy/left.npy", "data/toy/left.csv"))
    assert load_project(repo).stage("toy:left").outputs["values"].type == "csv_test"


def test_an_unknown_suffix_in_a_declaration_lists_the_known_ones(tmp_path: Path) -> None:
    repo = tmp_path / "toy"
    shutil.copytree(RESOURCES / "toy", repo)
    spec = repo / "pipelines" / "toy.yaml"
    spec.write_text(spec.read_text().replace("data/toy/left.npy", "data/toy/left.txt"))
    with pytest.raises(SpecError, match=r"^pipelines/toy.yaml: stages.left.outs.values: unknown type '.txt' \(known: "
                                        r".parquet, .json, .jsonl, .safetensors, .npy, .png, or a trailing '/'"):
        load_project(repo)


def test_an_installed_package_registers_its_types_through_an_entry_point(monkeypatch: pytest.MonkeyPatch) -> None:
    """A suffix no built-in type has loads the "paperdag.artifact_types" entry points once (a class is instantiated),
    so a declaration may name a package's type before any stage module is imported."""
    loads: list[str] = []

    class EntryPoint:
        def load(self) -> type[ArtifactType]:
            loads.append("csv")
            return Csv

    monkeypatch.setattr(artifacts, "_plugins_loaded", False)
    monkeypatch.setattr(importlib.metadata, "entry_points",
                        lambda group: [EntryPoint()] if group == artifacts.ENTRY_POINTS else [])
    monkeypatch.delitem(artifacts.TYPES, "csv_test", raising=False)
    try:
        assert artifacts.for_path("data/x.csv").name == "csv_test"  # type: ignore[union-attr]
        assert artifacts.for_path("data/x.txt") is None and loads == ["csv"]
    finally:
        artifacts.TYPES.pop("csv_test", None)

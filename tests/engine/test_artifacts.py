"""Typed artifact I/O, atomic replacement, DVC-compatible md5s and computed code dependencies."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from paperdag.engine import artifacts
from paperdag.engine.codedeps import code_deps
from paperdag.engine.errors import StageError
from paperdag.engine.fsutil import dvc_md5, replace_into_place, tmp_sibling
from paperdag.engine.spec import Artifact

REPO = Path(__file__).resolve().parents[2]


def art(name: str, path: str, atype: str, kind: str = "out") -> Artifact:
    return Artifact(name=name, path=path, kind=kind, type=atype)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "atype, value",
    [
        ("parquet", pl.DataFrame({"a": [1, 2], "b": ["x", "y"]})),
        ("json", {"a": np.float64(1.5), "b": [np.int64(2)], "c": {"d": True}}),
        ("safetensors", {"w": np.arange(6, dtype=np.float32).reshape(2, 3)}),
        ("npy", np.arange(5)),
    ],
)
def test_round_trip_by_type(tmp_path: Path, atype: str, value: object) -> None:
    """What a stage returns is written by type and read back equal (numpy scalars become plain JSON numbers)."""
    path = tmp_path / f"x.{atype}"
    artifacts.write(art("x", str(path), atype), value, path)
    back = artifacts.read(atype, path)  # type: ignore[arg-type]
    if atype == "parquet":
        assert back.equals(value)
    elif atype == "json":
        assert back == {"a": 1.5, "b": [2], "c": {"d": True}}
    elif atype == "safetensors":
        assert np.array_equal(back["w"], value["w"])  # type: ignore[index]
    else:
        assert np.array_equal(back, value)  # type: ignore[arg-type]


def test_directory_output_from_save_pretrained_or_writer(tmp_path: Path) -> None:
    """A directory output is written by the object's save_pretrained(path) or by a writer callable."""

    class Model:
        def save_pretrained(self, path: Path) -> None:
            (Path(path) / "config.json").write_text("{}")

    artifacts.write(art("m", "m", "dir"), Model(), tmp_path / "m")
    artifacts.write(art("w", "w", "dir"), lambda p: (p / "f.txt").write_text("x"), tmp_path / "w")
    assert (tmp_path / "m" / "config.json").exists() and (tmp_path / "w" / "f.txt").read_text() == "x"


@pytest.mark.parametrize("atype, value, fragment", [
    ("parquet", {"a": 1}, "expected a polars DataFrame"),
    ("json", {"a": float("nan")}, "non-finite number"),
    ("png", "not a figure", "expected a matplotlib Figure"),
])
def test_wrong_value_names_the_output(tmp_path: Path, atype: str, value: object, fragment: str) -> None:
    """A stage returning the wrong kind of value gets an error naming the output and its path."""
    with pytest.raises(StageError, match=f"output 'x' \\(data/x.{atype}\\): {fragment}"):
        artifacts.write(art("x", f"data/x.{atype}", atype), value, tmp_path / f"x.{atype}")


def test_corrupt_input_is_named(tmp_path: Path) -> None:
    """An unreadable input is reported with its path and type; a missing one says which stage to run."""
    bad = tmp_path / "t.parquet"
    bad.write_bytes(b"not parquet")
    with pytest.raises(StageError, match="t.parquet cannot be read as parquet"):
        artifacts.read("parquet", bad)
    with pytest.raises(StageError, match="is missing"):
        artifacts.read("json", tmp_path / "nope.json")


def test_directory_swap_is_complete(tmp_path: Path) -> None:
    """Replacing a directory output leaves exactly the new contents and no temporaries."""
    final = tmp_path / "model"
    final.mkdir()
    (final / "old.txt").write_text("old")
    tmp = tmp_sibling(final)
    tmp.mkdir()
    (tmp / "new.txt").write_text("new")
    replace_into_place(tmp, final)
    assert [p.name for p in tmp_path.iterdir()] == ["model"]
    assert [p.name for p in final.iterdir()] == ["new.txt"]


def test_dvc_md5_of_a_directory(tmp_path: Path) -> None:
    """A directory's md5 is DVC's: md5 of the sorted JSON listing of (md5, relpath), suffixed .dir."""
    (tmp_path / "d" / "sub").mkdir(parents=True)
    (tmp_path / "d" / "b.txt").write_text("b")
    (tmp_path / "d" / "sub" / "a.txt").write_text("a")
    listing = [{"md5": hashlib.md5(b"b").hexdigest(), "relpath": "b.txt"},
               {"md5": hashlib.md5(b"a").hexdigest(), "relpath": "sub/a.txt"}]
    expected = hashlib.md5(json.dumps(listing, sort_keys=True).encode()).hexdigest() + ".dir"
    assert dvc_md5(tmp_path / "d") == expected


def test_code_deps_follow_imports_but_not_the_engine() -> None:
    """mfc's stages depend on stages/mfc.py and the mfc method's modules, never on the engine; the toy's `make` does
    not use the toy method package, `square` does."""
    deps = code_deps(REPO, "stages/mfc.py", "train")
    assert deps[0] == "stages/mfc.py" and "src/paperdag/methods/mfc/__init__.py" in deps
    assert not any("engine" in d for d in deps)
    toy = REPO / "tests" / "resources" / "toy"
    assert code_deps(toy, "stages/toy.py", "square") == ["stages/toy.py", "src/toy_method/__init__.py"]
    assert code_deps(toy, "stages/toy.py", "make") == ["stages/toy.py"]

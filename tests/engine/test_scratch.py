"""paperdag.engine.scratch: a scratch copy of one pipeline, at its own scale or its declared smoke scale."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from support import RESOURCES
from paperdag.engine.errors import PaperdagError
from paperdag.engine.scratch import copy_pipeline
from paperdag.engine.spec import load_project


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """The toy project with a smoke section, and a second pipeline whose params section no toy stage reads."""
    root = shutil.copytree(RESOURCES / "toy", tmp_path / "project")
    with (root / "pipelines/toy.yaml").open("a") as f:
        f.write("smoke:\n  toy.make.n: 5  # five rows\n")
    with (root / "params.yaml").open("a") as f:
        f.write("other:\n  x: 1\n")
    (root / "pipelines/other.yaml").write_text("description: A second pipeline.\nstages:\n  solo:\n    params: [other]\n"
                                              "    outs:\n      out: data/other/out.json\n")
    (root / "stages/other.py").write_text("from dataclasses import dataclass\n\n\n@dataclass(frozen=True)\n"
                                          "class SoloParams:\n    x: int\n    seed: int\n\n\n"
                                          "def solo(params: SoloParams) -> dict:\n    return {'out': {'x': params.x}}\n")
    load_project(root)  # a valid project: every params.yaml key is read
    return root


def test_smoke_copy_has_the_pipeline_at_smoke_scale(project: Path, tmp_path: Path) -> None:
    """The copy holds the declaration, the stage module and a params.yaml of `base` and the pipeline's section with
    the smoke values in place and params.yaml's comments kept; it validates and its dvc.yaml is rendered."""
    dest = copy_pipeline(project, "toy", tmp_path / "copy", smoke=True)
    params = yaml.safe_load((dest / "params.yaml").read_text())
    assert set(params) == {"base", "toy"} and params["toy"]["make"]["n"] == 5
    assert params["toy"]["combine"] == yaml.safe_load((project / "params.yaml").read_text())["toy"]["combine"]
    assert "# rows" in (dest / "params.yaml").read_text()
    assert (dest / "pipelines/toy.yaml").read_text() == (project / "pipelines/toy.yaml").read_text()
    assert (dest / "stages/toy.py").exists() and "toy-make" in (dest / "pipelines/toy/dvc.yaml").read_text()
    assert load_project(dest).pipeline("toy").smoke == {"toy.make.n": 5}


def test_plain_copy_keeps_the_default_scale(project: Path, tmp_path: Path) -> None:
    """Without `smoke`, the copy's params are the project's own."""
    dest = copy_pipeline(project, "toy", tmp_path / "copy")
    assert yaml.safe_load((dest / "params.yaml").read_text())["toy"]["make"]["n"] == 50


def test_a_non_empty_destination_is_refused(project: Path, tmp_path: Path) -> None:
    """A scratch copy never writes over files: a destination holding anything is an error naming it."""
    (tmp_path / "copy").mkdir()
    (tmp_path / "copy" / "keep.txt").write_text("mine")
    with pytest.raises(PaperdagError, match="copy is not empty"):
        copy_pipeline(project, "toy", tmp_path / "copy", smoke=True)

"""dvc.yaml from the declarations (engine/render.py): each stage runs `paperdag stage`, depends on its code, inputs
and path params' files, declares the params DVC records, keeps its outs in place; a matrix is one `matrix:` entry;
`--check` reports drift without writing."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from support import RESOURCES
from paperdag.engine.params import load_params
from paperdag.engine.render import HEADER, dvc_deps, locked_params, render, render_text
from paperdag.engine.spec import load_project


@pytest.fixture
def toy(tmp_path: Path) -> Path:
    shutil.copytree(RESOURCES / "toy", tmp_path / "toy")
    return tmp_path / "toy"


def test_a_stage_entry_runs_paperdag_stage_with_code_inputs_params_and_persisted_outs(toy: Path) -> None:
    """combine: its stage module first among its deps, then its two inputs; base.seed and the numerics before its
    own params; outs, metrics and plots each `persist` (the runner replaces them itself)."""
    text = render_text(load_project(toy))
    assert text.startswith(HEADER)
    entry = yaml.safe_load(text)["stages"]["toy-combine"]
    assert entry["cmd"] == "paperdag stage toy:combine"
    assert entry["deps"][0] == "stages/toy.py"
    assert entry["deps"][-2:] == ["data/toy/left.npy", "data/toy/right.safetensors"]
    assert entry["params"] == ["base.seed", "base.numerics", "toy.combine"]
    assert entry["outs"] == [{"data/toy/model": {"persist": True}}]
    assert entry["metrics"] == [{"data/toy/metrics.json": {"persist": True}}]
    assert entry["plots"] == [{"data/toy/curve.png": {"persist": True}}]


def test_a_path_params_file_is_a_dep_and_locked_params_are_dvc_locks(toy: Path) -> None:
    """A file a path param names becomes a dep of the stage; locked_params is what dvc.lock records for it."""
    (toy / "extra.parquet").write_bytes(b"")
    params = toy / "params.yaml"
    params.write_text(params.read_text().replace('extra_rows: ""', "extra_rows: extra.parquet"))
    project = load_project(toy)
    values = load_params(toy)
    make = project.stage("toy:make")
    assert dvc_deps(project, values, make)[-1] == "extra.parquet"
    locked = locked_params(project, values, make)["params.yaml"]
    assert list(locked) == ["base.seed", "base.numerics", "toy.make"] and locked["toy.make"]["n"] == 50


def test_a_matrix_renders_as_one_dvc_matrix_entry(tmp_path: Path) -> None:
    """grid's make: one entry with the declared axes (a ${params} reference kept for DVC to read) and the element's
    address in its command; the gathering stage depends on every element's output."""
    shutil.copytree(RESOURCES / "grid", tmp_path / "grid")
    stages = yaml.safe_load(render_text(load_project(tmp_path / "grid")))["stages"]
    assert list(stages) == ["grid-make", "grid-gather"]
    make = stages["grid-make"]
    assert make["matrix"] == {"arm": ["a", "b"], "replicate": "${grid.replicates}"}
    assert make["cmd"] == "paperdag stage grid:make@${item.arm}-${item.replicate}"
    assert make["outs"] == [{"data/grid/${item.arm}-${item.replicate}.json": {"persist": True}}]
    assert stages["grid-gather"]["deps"][-4:] == [f"data/grid/{k}.json" for k in ("a-0", "a-1", "b-0", "b-1")]


def test_render_check_reports_drift_without_writing(toy: Path) -> None:
    """render writes dvc.yaml once; check is True while it is current, False after an edit, and leaves the edit."""
    project = load_project(toy)
    assert render(project) is False and render(project, check=True) is True
    dvc_yaml = toy / "dvc.yaml"
    dvc_yaml.write_text(dvc_yaml.read_text() + "# edited\n")
    assert render(project, check=True) is False
    assert dvc_yaml.read_text().endswith("# edited\n")
    assert render(project) is False and render(project, check=True) is True

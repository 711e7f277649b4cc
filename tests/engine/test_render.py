"""The dvc.yaml files from the declarations (engine/render.py): each stage runs `paperdag stage`, depends on its code,
inputs and path params' files, declares the params DVC records, keeps its outs in place; a matrix is one `matrix:`
entry; a pipeline's stages are in pipelines/<p>/dvc.yaml but for those no stage reads, in the root's; `--check`
reports drift without writing."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from support import RESOURCES, rendered_stages
from paperdag.engine.params import load_params
from paperdag.engine.render import HEADER, dvc_deps, locked_params, render, render_files
from paperdag.engine.spec import load_project


@pytest.fixture
def toy(tmp_path: Path) -> Path:
    shutil.copytree(RESOURCES / "toy", tmp_path / "toy")
    return tmp_path / "toy"


def test_a_stage_entry_runs_paperdag_stage_with_code_inputs_params_and_persisted_outs(toy: Path) -> None:
    """combine: its stage module first among its deps, then its two inputs; base.seed and the numerics before its
    own params; outs, metrics and plots each `persist` (the runner replaces them itself)."""
    texts = render_files(load_project(toy))
    assert all(text.startswith(HEADER) for text in texts.values())
    entry = yaml.safe_load(texts["dvc.yaml"])["stages"]["toy-combine"]
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
    stages = rendered_stages(load_project(tmp_path / "grid"))
    assert sorted(stages) == ["grid-gather", "grid-make"]
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



def test_each_pipeline_gets_its_own_dvc_yaml_and_the_root_one_holds_the_stages_no_stage_reads(toy: Path) -> None:
    """DVC rewrites the dvc.lock beside a dvc.yaml after each stage it records, so each pipeline's stages have their
    own file, run at the root (`wdir`) with params.yaml's values (`vars`); the root file holds the stages nothing
    reads (toy's combine), so a bare `dvc repro` reaches every stage. A generated file of a pipeline no longer
    declared is removed with the dvc.lock beside it (and is drift for --check); a file render did not write is left
    alone."""
    project = load_project(toy)
    gone, mine = toy / "pipelines/gone/dvc.yaml", toy / "pipelines/mine/dvc.yaml"
    for path, head in ((gone, HEADER), (mine, "# my own\n")):
        path.parent.mkdir(parents=True)
        path.write_text(head + "stages: {}\n")
    gone.with_name("dvc.lock").write_text("schema: '2.0'\nstages: {}\n")
    assert render(project, check=True) is False
    assert render(project) is False
    assert not gone.exists() and not gone.with_name("dvc.lock").exists() and mine.exists()
    assert render(project, check=True) is True
    root = yaml.safe_load((toy / "dvc.yaml").read_text())
    assert list(root) == ["stages"] and list(root["stages"]) == ["toy-combine"]
    own = yaml.safe_load((toy / "pipelines/toy/dvc.yaml").read_text())
    assert own["vars"] == ["../../params.yaml"]
    assert list(own["stages"]) == ["toy-make", "toy-left", "toy-right"]
    assert {e["wdir"] for e in own["stages"].values()} == {"../.."}
    assert own["stages"]["toy-left"]["deps"][-1] == "data/toy/table.parquet"  # paths from the root, as DVC locks them
    assert project.dvc_target(project.stage("toy:left")) == "pipelines/toy/dvc.yaml:toy-left"
    assert project.dvc_target(project.stage("toy:combine")) == "dvc.yaml:toy-combine"


def test_the_locks_read_as_one_and_a_moved_stage_s_old_entry_is_not_read(toy: Path) -> None:
    """dvc.lock(root) joins the root's lock and each pipeline's, as DVC reads them: an entry counts only beside the
    dvc.yaml that declares its stage (one left behind by a stage that moved between files is not read)."""
    from paperdag.engine import dvc

    render(load_project(toy))
    head = "schema: '2.0'\nstages:\n"
    (toy / "dvc.lock").write_text(head + "  toy-combine:\n    cmd: new\n  toy-left:\n    cmd: left, from before it moved\n")
    (toy / "pipelines/toy/dvc.lock").write_text(head + "  toy-left:\n    cmd: left\n  toy-combine:\n    cmd: old\n")
    stages = dvc.lock(toy)["stages"]
    assert {name: e["cmd"] for name, e in stages.items()} == {"toy-combine": "new", "toy-left": "left"}

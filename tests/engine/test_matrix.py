"""Matrix stages: one declaration expanded into `name@v1-v2` stages exactly as DVC expands the rendered `matrix:`,
each element typed and seeded on its own, a stage gathering every element, and clear errors for bad matrices."""

from __future__ import annotations

import copy
import dataclasses
import importlib.util
import json
import shutil
import sys
from pathlib import Path

import pytest
from support import RESOURCES, cli, commit_project, dvc

from paperdag.engine.errors import SpecError
from paperdag.engine.params import Item, build, collect, load_params, stage_seed
from paperdag.engine.spec import load_project

GRID = RESOURCES / "grid"
ELEMENTS = ["a-0", "a-1", "b-0", "b-1"]


def test_matrix_expands_to_one_stage_per_combination_with_item_values_substituted() -> None:
    """arm [a, b] x replicate ${grid.replicates} = [0, 1]: four stages named as DVC names them, each with its own
    output path, its arm's params key, its item values and a distinct seed; gather's input names all four."""
    project = load_project(GRID)
    make = [s for s in project.order("grid") if s.name.startswith("make@")]
    assert [s.name for s in make] == [f"make@{k}" for k in ELEMENTS]
    assert [s.dvc_name for s in make] == [f"grid-make@{k}" for k in ELEMENTS]
    b1 = project.stage("grid:make@b-1")
    assert b1.item == {"arm": "b", "replicate": 1} and b1.function == "make"
    assert (b1.item.arm, b1.item.replicate, str(b1.item)) == ("b", 1, "b-1")
    assert b1.params == ("grid.make", "grid.arms.b") and b1.outputs["values"].path == "data/grid/b-1.json"
    params = load_params(GRID)
    assert len({stage_seed(params, s.address) for s in make}) == 4
    gather = project.stage("grid:gather")
    assert gather.deps == {} and list(gather.gathers) == ["values"]
    assert [(str(item), path) for item, path in gather.gathers["values"].items()] == [(k, f"data/grid/{k}.json") for k in ELEMENTS]
    assert [type(item.replicate) for item in gather.gathers["values"]] == [int] * 4
    assert sorted(project.graph.predecessors("grid:gather")) == [f"grid:make@{k}" for k in ELEMENTS]


def test_matrix_item_reaches_the_stage_as_params_item(monkeypatch: pytest.MonkeyPatch) -> None:
    """The element's values reach the stage as `params.item` (its Item); a params.yaml key named `item`, or a params
    field named like a matrix value, is an error naming it."""
    spec = importlib.util.spec_from_file_location("grid_stages", GRID / "stages" / "grid.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "grid_stages", module)  # dataclasses and type hints look their module up
    spec.loader.exec_module(module)
    MakeParams = module.MakeParams
    params = load_params(GRID)
    item = Item({"arm": "b", "replicate": 1})
    typed = build(MakeParams, collect(params, ("grid.make", "grid.arms.b")), 5, "grid:make@b-1", item)
    assert (typed.item.arm, typed.item.replicate, typed.factor, typed.seed) == ("b", 1, 3.0, 5)
    with pytest.raises(SpecError, match=r"^grid:make@b-1: params.seed: the matrix value 'seed' reaches the stage as params.item.seed"):
        build(MakeParams, collect(params, ("grid.make", "grid.arms.b")), 5, "grid:make@b-1", Item({"seed": 1}))
    params["grid"]["make"]["item"] = "c"
    with pytest.raises(SpecError, match=r"^params.yaml: grid.make.item: 'item' is the matrix element's"):
        build(MakeParams, collect(params, ("grid.make",)), 5, "grid:make@b-1", item)


@dataclasses.dataclass(frozen=True)
class Wrapper:
    item: Item


def test_item_is_an_immutable_hashable_mapping_named_like_dvc() -> None:
    """An Item reads by attribute or key, is hashable (a gathered input's dict key), refuses changes, names a missing
    value with the names it has, copies (a params dataclass's asdict) and is empty (falsy) outside a matrix."""
    item = Item({"arm": "a", "replicate": 0})
    assert item.arm == item["arm"] == "a" and dict(item) == {"arm": "a", "replicate": 0} and str(item) == "a-0"
    assert {item: 1}[Item({"arm": "a", "replicate": 0})] == 1 and item != Item({"arm": "a", "replicate": 1})
    with pytest.raises(AttributeError, match="immutable"):
        item.arm = "b"  # type: ignore[misc]
    with pytest.raises(AttributeError, match=r"no value 'seed' \(its names: arm, replicate\)"):
        _ = item.seed
    assert copy.deepcopy(item) == item and dataclasses.asdict(Wrapper(item)) == {"item": item}
    assert not Item() and str(Item()) == ""


def test_a_matrix_axis_may_name_a_params_mapping_whose_keys_are_its_values(tmp_path: Path) -> None:
    """arm: ${grid.arms} (a mapping a: ..., b: ...) expands over its keys in order, as [a, b] does, and DVC expands
    the rendered dvc.yaml into the same stages: the values are written once, in params.yaml."""
    repo = tmp_path / "grid"
    shutil.copytree(GRID, repo)
    spec = repo / "pipelines" / "grid.yaml"
    spec.write_text(spec.read_text().replace("arm: [a, b]", "arm: ${grid.arms}"))
    make = [s.name for s in load_project(repo).order("grid") if s.name.startswith("make@")]
    assert make == [f"make@{k}" for k in ELEMENTS]
    commit_project(repo, "grid over a mapping")
    listed = [line.split()[0] for line in dvc(repo, "stage", "list", "pipelines/grid/dvc.yaml").stdout.splitlines()]
    assert [s.split(":")[-1] for s in listed] == [f"grid-make@{k}" for k in ELEMENTS]


BAD = {
    "unknown_item": ("data/grid/${item.arm}-${item.replicate}.json", "data/grid/${item.arm}-${item.seed}.json",
                     "pipelines/grid.yaml: stages.make.outs.values: ${item.seed} is not in the stage's matrix"),
    "missing_params_list": ("replicate: ${grid.replicates}", "replicate: ${grid.nope}",
                            "pipelines/grid.yaml: stages.make.matrix.replicate: 'grid.nope' is not in params.yaml"),
    "duplicate_values": ("arm: [a, b]", "arm: [a, a]", "pipelines/grid.yaml: stages.make.matrix.arm: expected a non-empty list"),
    "bad_value": ("arm: [a, b]", "arm: [a, {x: 1}]", "pipelines/grid.yaml: stages.make.matrix.arm: expected a non-empty list"),
    "item_method": ("arm: [a, b]", "keys: [a, b]", "pipelines/grid.yaml: stages.make.matrix.keys: 'keys' is a method"),
    "gather_unknown": ("      values: data/grid/${item.arm}-${item.replicate}.json\n    outs:\n      summary",
                       "      values: data/grid/${item.arm}.json\n    outs:\n      summary",
                       "pipelines/grid.yaml: stages.gather.deps.values: no matrix stage produces data/grid/${item.arm}.json"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_matrix_is_one_line_naming_file_and_key(case: str, tmp_path: Path) -> None:
    old, new, message = BAD[case]
    repo = tmp_path / "grid"
    shutil.copytree(GRID, repo)
    spec = repo / "pipelines" / "grid.yaml"
    assert old in spec.read_text()
    spec.write_text(spec.read_text().replace(old, new, 1))
    with pytest.raises(SpecError) as e:
        load_project(repo)
    assert str(e.value).startswith(message) and "\n" not in str(e.value)


def test_params_list_of_values_comes_from_params_yaml(tmp_path: Path) -> None:
    """A matrix axis given as ${key} follows params.yaml: three replicates, six elements."""
    repo = tmp_path / "grid"
    shutil.copytree(GRID, repo)
    p = repo / "params.yaml"
    p.write_text(p.read_text().replace("replicates: [0, 1]", "replicates: [0, 1, 2]"))
    project = load_project(repo)
    assert len(project.stage("grid:gather").gathers["values"]) == 6


@pytest.mark.xdist_group("prefect")  # on the session's Prefect server (conftest.py), with test_flow.py's runs
def test_dvc_and_prefect_run_the_rendered_matrix_and_agree_on_its_stages(tmp_path: Path, prefect_server: str) -> None:
    """dvc.yaml holds one `matrix:` stage that DVC expands into the engine's stage names; `dvc repro` runs all of it;
    a change to one arm's params makes only that arm's elements changed, and `paperdag run` (Prefect) reruns those and
    the gathering stage, after which DVC sees everything up to date. (One replicate: DVC reads the axis from
    params.yaml too.)"""
    repo = tmp_path / "grid"
    shutil.copytree(GRID, repo)
    p = repo / "params.yaml"
    p.write_text(p.read_text().replace("replicates: [0, 1]", "replicates: [0]"))
    commit_project(repo, "grid")
    listed = [line.split()[0].split(":")[-1] for line in dvc(repo, "stage", "list", "--all").stdout.splitlines()]
    assert sorted(listed) == sorted(s.dvc_name for s in load_project(repo).order())
    assert "Running stage 'grid-gather'" in dvc(repo, "repro").stdout
    summary = json.loads((repo / "data/grid/summary.json").read_text())
    assert summary["elements"] == ["a-0", "b-0"] and summary["total"] == 2 + 6 and len(summary["seeds"]) == 2
    p.write_text(p.read_text().replace("b: {factor: 3.0}", "b: {factor: 4.0}"))
    assert set(json.loads(dvc(repo, "status", "--json").stdout)) == {"pipelines/grid/dvc.yaml:grid-make@b-0"}
    r = cli(repo, "run", "grid")
    assert r.stdout.split() == ["grid:make@b-0:", "done", "grid:gather:", "done"]
    assert json.loads((repo / "data/grid/summary.json").read_text())["total"] == 2 + 8
    assert "up to date" in dvc(repo, "status").stdout

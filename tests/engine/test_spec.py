"""Pipeline declarations: parsing, whole-project validation, and one-line errors naming file and key."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from support import RESOURCES, cli
from paperdag.engine.errors import SpecError
from paperdag.engine.spec import load_project

TOY_STAGES = Path(__file__).parents[1] / "resources" / "toy" / "stages" / "toy.py"


def write_pipeline(repo: Path, text: str, name: str = "bad") -> None:
    (repo / "pipelines" / f"{name}.yaml").write_text(text)
    (repo / "stages" / f"{name}.py").write_text(TOY_STAGES.read_text())


BAD = {
    "cycle": (
        "stages:\n  make:\n    deps: {x: data/b/b.json}\n    outs: {a: data/b/a.json}\n"
        "  square:\n    deps: {x: data/b/a.json}\n    outs: {b: data/b/b.json}\n",
        "stages.make", "dependency cycle: bad:make -> bad:square -> bad:make",
    ),
    "no_producer": (
        "stages:\n  make:\n    deps: {x: data/b/nowhere.parquet}\n    outs: {a: data/b/a.json}\n",
        "stages.make.deps.x", "no stage produces data/b/nowhere.parquet",
    ),
    "two_writers": (
        "stages:\n  make:\n    outs: {a: data/toy/table.parquet}\n",
        None, "data/toy/table.parquet is also written by pipelines/",
    ),
    "unknown_key": (
        "stages:\n  make:\n    outz: {a: data/b/a.json}\n",
        "stages.make.outz", "unknown key",
    ),
    "missing_param": (
        "stages:\n  make:\n    params: [bad.nope]\n    outs: {a: data/b/a.json}\n",
        "stages.make.params[0]", "'bad.nope' is not in params.yaml",
    ),
    "missing_function": (
        "stages:\n  make:\n    function: does_not_exist\n    outs: {a: data/b/a.json}\n",
        "stages.make", "stages/bad.py:does_not_exist does not exist",
    ),
    "unknown_type": (
        "stages:\n  make:\n    outs: {a: data/b/a.pkl}\n",
        "stages.make.outs.a", "unknown type '.pkl'",
    ),
}


@pytest.fixture
def toy_files(tmp_path: Path) -> Path:
    """The toy project's files only (no git, no DVC): enough for in-process validation."""
    shutil.copytree(RESOURCES / "toy", tmp_path / "toy")
    return tmp_path / "toy"


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_declaration_names_file_and_key(toy_files: Path, case: str) -> None:
    """Each invalid declaration raises a SpecError naming the pipeline file, the key and the problem."""
    toy = toy_files
    text, key, problem = BAD[case]
    write_pipeline(toy, text)
    with pytest.raises(SpecError) as e:
        load_project(toy)
    assert key is None or e.value.key == key  # two writers: reported at whichever comes second
    assert problem in e.value.problem
    assert "pipelines/" in e.value.file


@pytest.mark.parametrize("case", ["cycle", "two_writers", "missing_function"])
def test_cli_reports_one_line_and_writes_nothing(toy: Path, case: str) -> None:
    """The CLI prints one line naming file and key, exits non-zero, and leaves dvc.yaml untouched."""
    before = (toy / "dvc.yaml").read_text()
    write_pipeline(toy, BAD[case][0])
    r = cli(toy, "render", check=False)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("paperdag: error: pipelines/")
    assert BAD[case][2] in lines[0]
    assert (toy / "dvc.yaml").read_text() == before
    assert not (toy / "data").exists()


def test_valid_project_orders_stages_topologically(toy_files: Path) -> None:
    """Stages come out producer-before-consumer, and the graph has the toy's diamond edges."""
    project = load_project(toy_files)
    order = [s.name for s in project.order("toy")]
    assert order[0] == "make" and order[-1] == "combine"
    assert set(project.graph.edges) == {
        ("toy:make", "toy:left"), ("toy:make", "toy:right"), ("toy:left", "toy:combine"), ("toy:right", "toy:combine")}
    assert project.stage("toy:combine").outputs["model"].type == "dir"


def test_invalid_yaml_names_line(toy_files: Path) -> None:
    """A YAML syntax error is reported with the file and line."""
    (toy_files / "pipelines" / "bad.yaml").write_text("stages:\n  make: [\n")
    with pytest.raises(SpecError, match=r"pipelines/bad.yaml: line \d+: not valid YAML"):
        load_project(toy_files)


def test_params_yaml_without_seed_is_rejected(toy_files: Path) -> None:
    """params.yaml must define base.seed: every stage's seed derives from it."""
    (toy_files / "params.yaml").write_text("toy: {}\n")
    with pytest.raises(SpecError, match="params.yaml: base.seed"):
        load_project(toy_files)


def test_path_params_become_dvc_deps(toy_files: Path) -> None:
    """A path param's file joins the stage's DVC deps; a missing file is an error naming the params key."""
    import polars as pl
    import yaml

    from paperdag.engine.params import set_params
    from paperdag.engine.render import render_text

    toy = toy_files
    pl.DataFrame({"x": [1.0, 2.0]}).write_parquet(toy / "extra.parquet")
    set_params(toy, ["toy.make.extra_rows=extra.parquet"])
    deps = yaml.safe_load(render_text(load_project(toy)))["stages"]["toy-make"]["deps"]
    assert "extra.parquet" in deps
    set_params(toy, ["toy.make.extra_rows=missing.parquet"])
    with pytest.raises(SpecError, match="params.yaml: toy.make.extra_rows: missing.parquet does not exist"):
        load_project(toy)


SMOKE_BAD = {
    "not_a_mapping": ("smoke: [toy.make.n]\n", "smoke", "expected a mapping of dotted params.yaml key"),
    "other_section": ("smoke: {base.seed: 1}\n", "smoke.base.seed", "the pipeline's own params.yaml section (toy.<key>)"),
    "missing_key": ("smoke: {toy.make.rows: 5}\n", "smoke.toy.make.rows", "'toy.make.rows' is not in params.yaml"),
    "a_section": ("smoke: {toy.make: 5}\n", "smoke.toy.make", "'toy.make' is a section of params.yaml"),
    "wrong_type": ("smoke: {toy.make.n: many}\n", "smoke.toy.make.n", "params.yaml has 50 there: expected a value of that type, got 'many'"),
}


@pytest.mark.parametrize("case", sorted(SMOKE_BAD))
def test_bad_smoke_section_names_file_and_key(toy_files: Path, case: str) -> None:
    """Each smoke value must be an existing key of the pipeline's own params section, of its type: else a SpecError
    naming the pipeline file and the smoke key."""
    text, key, problem = SMOKE_BAD[case]
    with (toy_files / "pipelines/toy.yaml").open("a") as f:
        f.write(text)
    with pytest.raises(SpecError) as e:
        load_project(toy_files)
    assert (e.value.file, e.value.key) == ("pipelines/toy.yaml", key)
    assert problem in e.value.problem


def test_smoke_section_is_parsed(toy_files: Path) -> None:
    """A valid smoke section is the pipeline's `smoke` mapping, as declared (an int where params.yaml has a float)."""
    with (toy_files / "pipelines/toy.yaml").open("a") as f:
        f.write("smoke:\n  toy.make.n: 5\n  toy.combine.scale: 3\n")
    assert load_project(toy_files).pipeline("toy").smoke == {"toy.make.n": 5, "toy.combine.scale": 3}

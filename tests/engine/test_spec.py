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
    """The CLI prints one line naming file and key, exits non-zero, and leaves the dvc.yaml files untouched."""
    from paperdag.engine.render import generated_files

    def rendered() -> dict[str, str]:
        return {f: (toy / f).read_text() for f in generated_files(toy)}

    before = rendered()
    assert len(before) == 2  # the root's and pipelines/toy/dvc.yaml
    write_pipeline(toy, BAD[case][0])
    r = cli(toy, "render", check=False)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("paperdag: error: pipelines/")
    assert BAD[case][2] in lines[0]
    assert rendered() == before
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
    from support import rendered_stages

    toy = toy_files
    pl.DataFrame({"x": [1.0, 2.0]}).write_parquet(toy / "extra.parquet")
    set_params(toy, ["toy.make.extra_rows=extra.parquet"])
    deps = rendered_stages(load_project(toy))["toy-make"]["deps"]
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


def _set_in_params(repo: Path, dotted: str, value: object) -> None:
    """Write one value into params.yaml by hand, as a user editing the file would (new keys included)."""
    import yaml

    path = repo / "params.yaml"
    doc = yaml.safe_load(path.read_text())
    *parents, last = dotted.split(".")
    node = doc
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value
    path.write_text(yaml.safe_dump(doc, sort_keys=False))


@pytest.mark.parametrize("value", ["/etc/passwd", "../outside.parquet", "inside-link.parquet", "data/../../outside.parquet"])
def test_path_params_outside_the_repository_are_refused(toy_files: Path, value: str) -> None:
    """An absolute path, a `..` path or a symlink that resolves outside the repository is refused naming the key,
    so no file outside the repository becomes a dep of the committed dvc.yaml."""
    import polars as pl

    pl.DataFrame({"x": [1.0]}).write_parquet(toy_files.parent / "outside.parquet")
    (toy_files / "inside-link.parquet").symlink_to(toy_files.parent / "outside.parquet")
    _set_in_params(toy_files, "toy.make.extra_rows", value)
    with pytest.raises(SpecError, match=r"^params.yaml: toy.make.extra_rows: .*outside the repository.*base.allow_outside_paths"):
        load_project(toy_files)


def test_path_param_outside_the_repository_is_allowed_when_listed(toy_files: Path) -> None:
    """Listing the key in base.allow_outside_paths lets it name a file outside the repository (a DVC external dep)."""
    import polars as pl
    import yaml

    from support import rendered_stages

    outside = toy_files.parent / "outside.parquet"
    pl.DataFrame({"x": [1.0]}).write_parquet(outside)
    _set_in_params(toy_files, "toy.make.extra_rows", str(outside))
    _set_in_params(toy_files, "base.allow_outside_paths", ["toy.make.extra_rows"])
    deps = rendered_stages(load_project(toy_files))["toy-make"]["deps"]
    assert str(outside) in deps
    _set_in_params(toy_files, "base.allow_outside_paths", ["toy.make.nope"])
    with pytest.raises(SpecError, match=r"^params.yaml: base.allow_outside_paths: 'toy.make.nope' is not a path param"):
        load_project(toy_files)


@pytest.mark.parametrize("key", ["toy.typo_key", "toy.work_seconds", "extra", "base.sed"])
def test_params_key_no_stage_reads_is_an_error(toy_files: Path, key: str) -> None:
    """A key added by hand that no stage declares (nor a mapping above it) is found when the project loads."""
    _set_in_params(toy_files, key, 1)
    with pytest.raises(SpecError) as e:
        load_project(toy_files)
    assert str(e.value).startswith(f"params.yaml: {key}: no stage reads it")


def test_keys_under_declared_mappings_and_matrix_axes_are_read(tmp_path: Path) -> None:
    """grid.arms.<arm> (declared per element) and grid.replicates (a `${...}` matrix axis) are read; an arm that
    no matrix element declares is not."""
    shutil.copytree(RESOURCES / "grid", tmp_path / "grid")
    load_project(tmp_path / "grid")
    _set_in_params(tmp_path / "grid", "grid.arms.c", {"factor": 2.0})
    with pytest.raises(SpecError, match=r"^params.yaml: grid.arms.c: no stage reads it"):
        load_project(tmp_path / "grid")


@pytest.mark.parametrize(
    "key, value, message",
    [("toy.make.typo", 1, "params.yaml: toy.make.typo: unknown key for stage toy:make"),
     ("toy.typo_key", 1, "params.yaml: toy.typo_key: no stage reads it"),
     ("toy.make.n", 0, "params.yaml: toy.make.n: expected int, got 0 (Input should be greater than 0)")],
)
def test_render_check_run_and_stage_refuse_a_bad_params_value_before_any_work(toy: Path, key: str, value: object,
                                                                               message: str) -> None:
    """A typo'd key or an impossible value is reported naming params.yaml and the key by `render --check`, `run`
    and `stage`, before any stage work (no output written)."""
    _set_in_params(toy, key, value)
    for args in (["render", "--check"], ["render"], ["stage", "toy:make"], ["run", "toy"]):
        r = cli(toy, *args, check=False)
        assert r.returncode == 2 and message in r.stderr, (args, r.stderr)
    assert not (toy / "data").exists()

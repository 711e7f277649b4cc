"""`paperdag why`: each kind of cause named in words a person acts on (a param's old -> new value, the code file, the
input and the stage it comes from, the numerics setting, a stage never run), root causes kept apart from stages only
downstream of them, and --check's exit codes."""

from __future__ import annotations

from pathlib import Path

import pytest

from paperdag.engine import why
from paperdag.engine.cli import main
from paperdag.engine.errors import PaperdagError
from support import dvc


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1))


def texts(e: why.Explanation, stage: str) -> list[str]:
    return [r.text for s in e.stages if s.stage == stage for r in s.reasons]


def by_stage(e: why.Explanation) -> dict[str, why.Staleness]:
    return {s.stage: s for s in e.stages}


def test_a_changed_param_is_named_with_its_old_and_new_value(built_toy: Path) -> None:
    """toy.combine.scale 2.0 -> 3.0 in params.yaml: combine is stale for that param, and only combine."""
    edit(built_toy / "params.yaml", "scale: 2.0", "scale: 3.0")
    e = why.explain(built_toy)
    assert list(by_stage(e)) == ["toy:combine"]
    assert texts(e, "toy:combine") == ["param `toy.combine.scale` 2.0 -> 3.0"]
    r = by_stage(e)["toy:combine"].reasons[0]
    assert (r.kind, r.path, r.old, r.new) == ("param", "toy.combine.scale", 2.0, 3.0)


def test_a_changed_source_file_and_what_is_only_downstream_of_it(built_toy: Path) -> None:
    """The toy method package changes: left and right (which call spin) name the file; make does not use it and is up
    to date; combine is stale only downstream of them."""
    edit(built_toy / "src/toy_method/__init__.py", "x += 1", "x += 2")
    e = why.explain(built_toy)
    stages = by_stage(e)
    assert set(stages) == {"toy:left", "toy:right", "toy:combine"}
    for s in ("toy:left", "toy:right"):
        assert stages[s].own_cause
        assert texts(e, s) == ["code `src/toy_method/__init__.py` changed"]
    combine = stages["toy:combine"]
    assert not combine.own_cause and combine.upstream == ["toy:left", "toy:right"]
    assert "downstream of toy:left, toy:right (stale)" in why.format_text(e)


def test_a_changed_input_names_its_upstream_stage(built_toy: Path) -> None:
    """make's param changes: left's input will change (make is stale). Once make's new table is recorded (make
    re-ran), left's input has changed, with make named as the stage that re-ran."""
    edit(built_toy / "params.yaml", "n: 50", "n: 60")
    before = why.explain(built_toy, "toy:left")
    assert [s.stage for s in before.stages] == ["toy:make", "toy:left"]
    left = by_stage(before)["toy:left"]
    assert not left.own_cause
    assert texts(before, "toy:left") == ["input data/toy/table.parquet may change: upstream toy:make is stale"]
    assert texts(before, "toy:make") == ["param `toy.make.n` 50 -> 60"]
    dvc(built_toy, "repro", "--single-item", "pipelines/toy/dvc.yaml:toy-make")
    after = why.explain(built_toy, "data/toy/left.npy")  # an output path names its stage
    assert "toy:make" not in by_stage(after)
    assert by_stage(after)["toy:left"].own_cause
    assert texts(after, "toy:left") == ["input data/toy/table.parquet changed (upstream toy:make re-ran)"]


def test_a_numerics_change_is_named_as_such(built_toy: Path) -> None:
    """base.numerics.mode portable -> native re-stales every stage, each saying so in those words (and, downstream of
    make, that its input will change too)."""
    edit(built_toy / "params.yaml", "mode: portable", "mode: native")
    e = why.explain(built_toy)
    assert len(e.stages) == 4 and all(s.own_cause for s in e.stages)
    for s in e.stages:
        assert texts(e, s.stage)[0] == "numerics portable -> native (params.yaml `base.numerics.mode`)"
    assert texts(e, "toy:make") == ["numerics portable -> native (params.yaml `base.numerics.mode`)"]
    assert any("numerics is native" in n for n in e.notes)


def test_a_stage_never_run(toy: Path) -> None:
    """A fresh project: make has never run; the others are downstream of it (and never ran either)."""
    e = why.explain(toy, "toy")
    assert texts(e, "toy:make") == ["never run: dvc.lock has no record of it"]
    assert by_stage(e)["toy:left"].reasons[0].text == "never run: dvc.lock has no record of it"


def test_check_exits_1_when_stale_and_0_when_not(built_toy: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """--check: 0 on the built project (every stage up to date), 1 once a param changes; without --check, 0."""
    monkeypatch.setenv("PAPERDAG_ROOT", str(built_toy))
    assert main(["why", "--check"]) == 0
    assert "every stage is up to date" in capsys.readouterr().out
    edit(built_toy / "params.yaml", "scale: 2.0", "scale: 3.0")
    assert main(["why", "--check", "toy:combine"]) == 1
    assert "param `toy.combine.scale` 2.0 -> 3.0" in capsys.readouterr().out
    assert main(["why", "--json", "toy:combine"]) == 0


def test_an_unknown_target_is_an_error_naming_it(toy: Path) -> None:
    """Neither pipeline, stage nor output: the error names the target and the known pipelines."""
    with pytest.raises(PaperdagError, match=r"'data/toy/nothing.npy' is no pipeline \(known: toy\)"):
        why.explain(toy, "data/toy/nothing.npy")


def test_a_stage_is_named_as_paperdag_or_as_dvc_names_it(tmp_path: Path) -> None:
    """`toy:left`, its dvc.yaml name `toy-left`, and DVC's `pipelines/toy/dvc.yaml:toy-left` (as `dvc status` lists
    a stage of a pipeline's dvc.yaml) name the same stage."""
    import shutil

    from paperdag.engine.spec import load_project
    from support import RESOURCES

    shutil.copytree(RESOURCES / "toy", tmp_path / "toy")
    project = load_project(tmp_path / "toy")
    for target in ("toy:left", "toy-left", "pipelines/toy/dvc.yaml:toy-left"):
        assert [s.address for s in why.resolve(project, target)] == ["toy:left"], target

"""Which stages are stale (engine/status.py): DVC's changed stages and everything downstream of them, within the
stages a pipeline's run needs; the `paperdag list` table."""

from __future__ import annotations

import importlib
import shutil
from pathlib import Path

import pytest

from support import RESOURCES
from paperdag.engine.spec import Project, load_project

status = importlib.import_module("paperdag.engine.status")
dvc = importlib.import_module("paperdag.engine.dvc")


@pytest.fixture
def project(tmp_path: Path) -> Project:
    shutil.copytree(RESOURCES / "toy", tmp_path / "toy")
    return load_project(tmp_path / "toy")


def test_a_changed_stage_makes_its_descendants_stale_not_its_siblings(project: Project) -> None:
    scope = project.order("toy")
    stale = status.stale_stages_from(project, {"toy-left"}, scope)
    assert [s.address for s in stale] == ["toy:left", "toy:combine"]
    assert [s.address for s in status.stale_stages_from(project, {"toy-make"}, scope)] == [s.address for s in scope]
    assert status.stale_stages_from(project, set(), scope) == []
    assert status.stale_stages_from(project, {"toy-left"}, scope[:1]) == []  # only within the scope


def test_status_says_changed_stale_or_up_to_date_per_stage(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dvc, "changed_stages", lambda root, names, files=None: {"toy-right"} & set(names))
    st = status.status(project.root)
    assert st == {"toy": {"make": "up to date", "left": "up to date", "right": "changed",
                          "combine": "stale (upstream changed)"}}
    assert [s.address for s in status.stale_stages(project, "toy")] == ["toy:right", "toy:combine"]
    lines = status.format_status(st).splitlines()
    assert lines[0] == "toy  (2/4 up to date)" and lines[3].split() == ["right", "changed"]

"""What every MLflow run carries (engine/tracking.py): canonical params JSON, the store's URI, the git commit and a
dirty flag that ignores the engine's own lock files, the environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from support import git
from paperdag.engine import tracking


def test_canonical_json_is_one_string_for_equal_documents() -> None:
    assert tracking.canonical_json({"b": [1, {"d": 2, "c": 3}], "a": Path("x")}) == '{"a":"x","b":[1,{"c":3,"d":2}]}'


def test_the_store_is_the_projects_sqlite_unless_the_environment_names_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert tracking.tracking_uri(tmp_path) == f"sqlite:///{tmp_path.resolve()}/mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://mlflow:5000")
    assert tracking.tracking_uri(tmp_path) == "http://mlflow:5000"


def test_git_info_is_dirty_for_a_changed_file_but_not_for_dvc_lock(tmp_path: Path) -> None:
    """A checkout whose only change is a dvc.lock (the root's, a pipeline's) or paperdag.lock (rewritten by every
    stage) is clean; any other
    tracked change makes it dirty; outside git the commit is 'none'."""
    assert tracking.git_info(tmp_path) == {"git.commit": "none", "git.dirty": "false"}
    git(tmp_path, "init", "-q", "-b", "main")
    git(tmp_path, "config", "user.email", "t@example.com")
    git(tmp_path, "config", "user.name", "test")
    (tmp_path / "pipelines/m").mkdir(parents=True)
    for name in ("dvc.lock", "pipelines/m/dvc.lock", "paperdag.lock", "stage.py"):
        (tmp_path / name).write_text("1\n")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-qm", "x")
    head = git(tmp_path, "rev-parse", "HEAD").strip()
    for name in ("dvc.lock", "pipelines/m/dvc.lock", "paperdag.lock"):
        (tmp_path / name).write_text("2\n")
    assert tracking.git_info(tmp_path) == {"git.commit": head, "git.dirty": "false"}
    (tmp_path / "stage.py").write_text("2\n")
    assert tracking.git_info(tmp_path)["git.dirty"] == "true"


def test_environment_names_python_and_the_installed_packages() -> None:
    env = tracking.environment()
    assert env["env.python"].startswith("3.11") and int(env["env.cpu_count"]) >= 1
    assert {"env.numpy", "env.polars", "env.dvc"} <= set(env)


def test_a_new_store_starts_as_a_copy_of_the_template(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A project without mlflow.db gets a copy of the template (MLflow's schema at its head: nothing to migrate),
    which then works as a store MLflow made: its Default experiment, an experiment and a run logged and found. An
    existing store is never replaced; a store named by MLFLOW_TRACKING_URI, or no template, seeds nothing."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    template = tracking.build_template()
    assert tracking.build_template() == template  # made once
    pristine = template.read_bytes()
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    tracking._seed_store(fresh)
    assert (fresh / "mlflow.db").read_bytes() == template.read_bytes()
    assert [p.name for p in fresh.iterdir()] == ["mlflow.db"]  # no temporary copy left
    client = tracking.client(fresh, drain=False)
    assert client.get_experiment("0").name == "Default"
    exp = tracking.experiment_id(client, fresh, "toy")
    run = client.create_run(exp)
    client.log_param(run.info.run_id, "n", "3")
    assert [r.data.params for r in client.search_runs([exp])] == [{"n": "3"}]
    assert template.read_bytes() == pristine  # the copy was written, not the template

    tracking._seed_store(fresh)  # an existing store stays as it is
    assert [r.info.run_id for r in tracking.client(fresh, drain=False).search_runs([exp])] == [run.info.run_id]

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'shared.db'}")
    tracking._seed_store(elsewhere)
    assert not (elsewhere / "mlflow.db").exists() and not (tmp_path / "shared.db").exists()
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    monkeypatch.setattr(tracking, "template_path", lambda: tmp_path / "no-template.db")
    tracking._seed_store(elsewhere)
    assert not (elsewhere / "mlflow.db").exists()

"""Run records (src/paperdag/engine/records.py): a stage leaves its MLflow run as a file, a drainer logs it; nothing
is lost, nothing logged twice, and a stage killed mid-run ends KILLED instead of RUNNING forever."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from paperdag.engine import records
from paperdag.engine.fsutil import dvc_md5
from paperdag.engine.tracking import client
from support import cli, dvc, git, wait_for

OFF = {records.DRAIN_ENV: "off", "PAPERDAG_WARM": "off"}  # a stage in its own process (killed here: see test_warm)


def runs(repo: Path, stage: str | None = None) -> list:
    c = client(repo)
    exp = c.get_experiment_by_name("toy")
    found = c.search_runs([exp.experiment_id], max_results=1000) if exp else []
    return [r for r in found if stage is None or r.data.tags.get("paperdag.stage") == stage]


def set_param(repo: Path, old: str, new: str) -> None:
    p = repo / "params.yaml"
    assert old in p.read_text()
    p.write_text(p.read_text().replace(old, new))



def test_a_stage_leaves_a_record_that_the_next_reader_logs(built_toy: Path) -> None:
    """With draining off, a stage writes no MLflow run, only its record (with copies of its metric and plot files);
    the next command that reads MLflow logs it, FINISHED, with its params, metrics, out md5s and artifacts, and
    removes the record."""
    before = len(runs(built_toy, "combine"))
    set_param(built_toy, "scale: 2.0", "scale: 3.0")
    cli(built_toy, "stage", "toy:combine", env=OFF)
    pending = records.pending(built_toy)
    assert len(pending) == 1
    doc = json.loads(pending[0].read_text())
    assert doc["status"] == "FINISHED" and doc["params"]["scale"] == "3.0"
    assert {sub for _, sub in doc["artifacts"]} == {"metrics", "plots"}
    run = max(runs(built_toy, "combine"), key=lambda r: r.info.start_time)  # client() drained first
    assert len(runs(built_toy, "combine")) == before + 1 and records.pending(built_toy) == []
    assert run.info.status == "FINISHED" and run.data.params["scale"] == "3.0"
    assert run.data.tags[records.RECORD_TAG] == doc["id"] and "paperdag.out.data/toy/model" in run.data.tags
    assert run.data.metrics["headline.total"] == json.loads((built_toy / "data/toy/metrics.json").read_text())["headline"]["total"]
    arts = {a.path for a in client(built_toy).list_artifacts(run.info.run_id, "plots")}
    assert arts == {"plots/curve.png"}


def test_under_dvc_repro_a_detached_drainer_logs_every_stage(built_toy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each stage of a `dvc repro` starts a detached drainer (one at a time): soon after, with no reader, every run is
    in MLflow and no record is left; every stage's checkout counts as clean although DVC rewrote dvc.lock."""
    monkeypatch.setenv(records.DRAIN_ENV, "detached")  # the default (support.py turns it off for the suite)
    set_param(built_toy, "n: 50", "n: 60")
    git(built_toy, "commit", "-qam", "n: 60")
    dvc(built_toy, "repro")
    wait_for(lambda: not records.pending(built_toy), "the detached drainer")
    latest = {}
    for r in runs(built_toy):
        s = r.data.tags.get("paperdag.stage")
        if s and (s not in latest or r.info.start_time > latest[s].info.start_time):
            latest[s] = r
    assert set(latest) == {"make", "left", "right", "combine"}
    assert all(r.info.status == "FINISHED" for r in latest.values())
    assert {s: r.data.tags["git.dirty"] for s, r in latest.items()} == dict.fromkeys(latest, "false")


def test_a_drainer_killed_halfway_resumes_the_same_run(built_toy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A drainer that dies after creating the run but before terminating it leaves the record; the next drain
    completes that run instead of logging a second one."""
    before = len(runs(built_toy, "combine"))
    set_param(built_toy, "scale: 2.0", "scale: 4.0")
    cli(built_toy, "stage", "toy:combine", env=OFF)
    from mlflow.tracking import MlflowClient

    real = MlflowClient.set_terminated

    def crash(self, *a, **k):
        raise RuntimeError("drainer died")

    monkeypatch.setattr(MlflowClient, "set_terminated", crash)
    with pytest.raises(RuntimeError, match="drainer died"):
        records.drain(built_toy)
    assert len(records.pending(built_toy)) == 1
    monkeypatch.setattr(MlflowClient, "set_terminated", real)
    found = runs(built_toy, "combine")
    assert len(found) == before + 1 and records.pending(built_toy) == []
    assert all(r.info.status == "FINISHED" for r in found)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_a_killed_stage_ends_killed_not_running(built_toy: Path, sig: int) -> None:
    """A stage killed mid-run (SIGKILL: no chance to say so; SIGTERM: it unwinds) ends KILLED in MLflow once the next
    command drains, ending about when it was last seen, with the reason; its earlier outputs are intact."""
    set_param(built_toy, "wait: 0.0", "wait: 60.0")
    before = (built_toy / "data/toy/left.npy").read_bytes()
    p = subprocess.Popen([sys.executable, "-m", "paperdag", "stage", "toy:left"], cwd=built_toy,
                         env={**os.environ, **OFF}, stderr=subprocess.PIPE, text=True)
    wait_for(lambda: records.pending(built_toy), "the stage's record")
    time.sleep(1.5)
    killed_at = time.time()
    p.send_signal(sig)
    p.wait(30)
    run = max(runs(built_toy, "left"), key=lambda r: r.info.start_time)
    assert run.info.status == "KILLED"
    assert abs(run.info.end_time / 1000 - killed_at) < records.HEARTBEAT_S + 2
    reason = run.data.tags["paperdag.error"]
    assert ("last seen" in reason) if sig == signal.SIGKILL else ("Terminated" in reason)
    assert (built_toy / "data/toy/left.npy").read_bytes() == before and records.pending(built_toy) == []


def test_a_running_stage_is_not_marked_killed(built_toy: Path) -> None:
    """A drain while a stage runs leaves its record alone; the run is logged FINISHED when the stage ends."""
    set_param(built_toy, "wait: 0.0", "wait: 3.0")
    p = subprocess.Popen([sys.executable, "-m", "paperdag", "stage", "toy:left"], cwd=built_toy,
                         env={**os.environ, **OFF}, stderr=subprocess.DEVNULL)
    wait_for(lambda: records.pending(built_toy), "the stage's record")
    assert records.drain(built_toy) == 0 and len(records.pending(built_toy)) == 1
    assert p.wait(120) == 0
    assert max(runs(built_toy, "left"), key=lambda r: r.info.start_time).info.status == "FINISHED"


def test_lineage_reads_the_run_index_and_rebuilds_it_when_mlflow_changed(built_toy: Path) -> None:
    """`paperdag lineage` finds the same runs as MLflow, from the run index without importing MLflow; a run deleted
    in MLflow (its store changed after the index) is gone at the next read (the index is rebuilt)."""
    from paperdag.engine.lineage import runs_by_output
    from paperdag.engine.records import INDEX

    def from_mlflow() -> set[str]:
        return {r.info.run_id for r in runs(built_toy, "combine") if r.info.status == "FINISHED"}

    key = ("data/toy/metrics.json", dvc_md5(built_toy / "data/toy/metrics.json"))
    assert {r["run_id"] for r in runs_by_output(built_toy)[key]} == from_mlflow() != set()
    assert (built_toy / INDEX).exists()
    code = ("import sys; from pathlib import Path; from paperdag.engine.lineage import runs_by_output; "
            "found = runs_by_output(Path('.')); print(len(found), 'mlflow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=built_toy, capture_output=True, text=True, check=True).stdout
    assert out.split() == [str(len(runs_by_output(built_toy))), "False"]
    gone = sorted(from_mlflow())[0]
    time.sleep(0.01)
    client(built_toy).delete_run(gone)
    assert gone not in {r["run_id"] for r in runs_by_output(built_toy).get(key, [])}


def test_the_drain_that_logs_a_build_leaves_the_run_index_whole(built_toy: Path) -> None:
    """After `dvc repro` and the drain that logged its runs (the drain that created MLflow's store), the first reader
    imports no MLflow: the drainer, which had MLflow open, wrote the index (dated by the store it read) and appended
    the runs it logged after."""
    from paperdag.engine.records import INDEX

    index, store = built_toy / INDEX, built_toy / "mlflow.db"
    assert index.exists() and index.stat().st_mtime_ns >= store.stat().st_mtime_ns  # (later runs: appended)
    code = ("import sys; from pathlib import Path; from paperdag.engine.records import indexed_runs; "
            "print(len(indexed_runs(Path('.'))), 'mlflow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=built_toy, capture_output=True, text=True, check=True).stdout
    assert out.split() == [str(len(runs(built_toy))), "False"]  # (the toy project's one experiment)


def test_import_runs_copies_a_worktrees_finished_runs_once(tmp_path: Path, monkeypatch) -> None:
    """`paperdag import-runs` (engine/runimport.py): a worktree's finished runs land in the project's store with their
    params, metric history, tags, datasets, artifacts, times and status, the child under its parent's copy; a run
    the project has already (same record id) is not copied again, and the project's own store is refused."""
    from paperdag.engine.errors import PaperdagError
    from paperdag.engine.runimport import import_runs

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    worktree, project = tmp_path / "worktree", tmp_path / "project"
    worktree.mkdir(), project.mkdir()
    parent = records.Record(worktree, "toy", "toy flow", {"paperdag.pipeline": "toy"})
    child = records.Record(worktree, "toy", "toy:combine", {records.PARENT_RECORD_TAG: parent.id, "paperdag.stage": "combine",
                                                           "paperdag.out.data/c.json": "c0ffee"})
    child.log_params({"combine": {"scale": 2}})
    child.log_metrics({"total": 1.5})
    child.log_dataset("data/c.json", "c0ffee" * 5 + "ab", "output", "json", "file", {})
    (tmp_path / "metrics.json").write_text('{"total": 1.5}')
    child.attach(tmp_path / "metrics.json", "metrics")
    child.end("FINISHED")
    parent.end("FINISHED")
    assert records.drain(worktree) == 2

    assert import_runs(project, str(worktree)) == {"imported": 2, "present": 0, "unfinished": 0}
    got = {r.info.run_name: r for r in client(project).search_runs([client(project).get_experiment_by_name("toy").experiment_id])}
    source = {r.info.run_name: r for r in client(worktree).search_runs([client(worktree).get_experiment_by_name("toy").experiment_id])}
    copy, original = got["toy:combine"], source["toy:combine"]
    assert copy.data.params == {"combine.scale": "2"} and copy.data.metrics == {"total": 1.5}
    assert copy.data.tags["paperdag.out.data/c.json"] == "c0ffee" and copy.data.tags["paperdag.imported_run_id"] == original.info.run_id
    assert copy.data.tags["mlflow.parentRunId"] == got["toy flow"].info.run_id
    assert (copy.info.status, copy.info.start_time, copy.info.end_time) == ("FINISHED", original.info.start_time, original.info.end_time)
    assert [(d.dataset.name, d.dataset.digest) for d in copy.inputs.dataset_inputs] == [("data/c.json", "c0ffee" * 5 + "ab")]
    assert [a.path for a in client(project).list_artifacts(copy.info.run_id, "metrics")] == ["metrics/metrics.json"]

    assert import_runs(project, str(worktree / "mlflow.db")) == {"imported": 0, "present": 2, "unfinished": 0}
    with pytest.raises(PaperdagError, match="own MLflow store"):
        import_runs(project, str(project))

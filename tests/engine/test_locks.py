"""Who runs stages: `paperdag run` and `dvc repro` refuse each other at once (no stage runs twice), and a
`paperdag run` killed with SIGKILL leaves no Prefect server or stage behind, and no parent run RUNNING; the same for
a run a warm server's child runs, which reports to its client's Prefect server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from paperdag.engine import locks, records, warm
from paperdag.engine.tracking import client
from support import alive, cli, dvc, lock_texts, wait_for

# one worker runs test_flow.py and test_locks.py, so the session's one Prefect server (conftest.py prefect_server)
# starts once, not once per worker
pytestmark = pytest.mark.xdist_group("prefect")



def slow_left(repo: Path, seconds: float) -> None:
    """The toy's branches (left and right) run for `seconds` each, waiting: a stage that is there to be running
    costs the suite no CPU."""
    p = repo / "params.yaml"
    p.write_text(p.read_text().replace("wait: 0.0", f"wait: {seconds}"))


def _tags(record: Path) -> dict:
    """A pending run record's tags ({} if it vanished: drained meanwhile)."""
    try:
        return json.loads(record.read_text()).get("tags") or {}
    except FileNotFoundError:
        return {}


def stage_started(repo: Path) -> bool:
    return any('"RUNNING"' in p.read_text() for p in records.pending(repo))


def test_dvc_repro_is_refused_while_paperdag_run_runs(built_toy: Path, prefect_server: str) -> None:
    """While `paperdag run` runs, `dvc repro` fails at its first stage, naming the run's pid, before doing work; each
    stage ran once."""
    slow_left(built_toy, 8.0)
    run = subprocess.Popen([sys.executable, "-m", "paperdag", "run", "toy"], cwd=built_toy, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    wait_for(lambda: stage_started(built_toy), "the run's first stage")
    t = time.perf_counter()
    r = dvc(built_toy, "repro", check=False)
    assert r.returncode != 0 and time.perf_counter() - t < 30
    assert f"`paperdag run` (pid {run.pid}) is running" in r.stdout + r.stderr
    _, err = run.communicate(timeout=300)
    assert run.returncode == 0, err
    c = client(built_toy)
    found = c.search_runs([c.get_experiment_by_name("toy").experiment_id], max_results=1000)
    rerun = [r.data.tags.get("paperdag.stage") for r in found if "mlflow.parentRunId" in r.data.tags]
    assert sorted(rerun) == ["combine", "left", "right"], "a stage ran twice or not at all"
    assert "up to date" in dvc(built_toy, "status").stdout


def test_paperdag_run_is_refused_at_once_while_dvc_repro_runs(built_toy: Path) -> None:
    """While `dvc repro` runs a stage, `paperdag run` exits at once (before starting Prefect) naming DVC's pid."""
    slow_left(built_toy, 8.0)
    repro = subprocess.Popen([sys.executable, "-m", "dvc", "repro"], cwd=built_toy, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    wait_for(lambda: stage_started(built_toy), "dvc repro's first stage")
    t = time.perf_counter()
    r = cli(built_toy, "run", "toy", check=False)
    assert r.returncode == 2 and time.perf_counter() - t < 10
    assert f"a DVC command (pid {repro.pid}, `" in r.stderr and " repro`) is running" in r.stderr
    assert repro.wait(300) == 0


def _children(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    return [int(x) for x in out.split()]


def test_a_run_killed_with_sigkill_leaves_nothing_behind(built_toy: Path, tmp_path: Path, prefect_server: str) -> None:
    """`paperdag run` on its own temporary Prefect server (no PREFECT_API_URL), killed with SIGKILL mid-stage: the
    server and the stage die with it, the next drain ends the parent run KILLED, and a rerun (on the session's
    server) finishes the work."""
    slow_left(built_toy, 30.0)
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env["PREFECT_HOME"] = str(tmp_path / "prefect-home")
    env[warm.ENV] = "off"  # the run in its own process (a run a warm server's child runs: below)
    run = subprocess.Popen([sys.executable, "-m", "paperdag", "run", "toy"], cwd=built_toy, env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(lambda: stage_started(built_toy), "the run's first stage", timeout=180)
    children = _children(run.pid)
    assert children, "no server or stage process under the run"
    run.send_signal(signal.SIGKILL)
    run.wait(30)
    wait_for(lambda: not any(alive(p) for p in children), "the run's children to die", timeout=30)
    c = client(built_toy)  # drains
    found = c.search_runs([c.get_experiment_by_name("toy").experiment_id], max_results=1000)
    parent = [r for r in found if "paperdag.stage" not in r.data.tags]
    assert len(parent) == 1 and parent[0].info.status == "KILLED"
    assert all(r.info.status != "RUNNING" for r in found)
    p = built_toy / "params.yaml"
    p.write_text(p.read_text().replace("wait: 30.0", "wait: 0.1"))
    assert cli(built_toy, "run", "toy").returncode == 0
    assert "up to date" in dvc(built_toy, "status").stdout


def test_a_run_stopped_with_sigterm_stops_its_stage_at_once(built_toy: Path, prefect_server: str) -> None:
    """SIGTERM to `paperdag run` mid-stage (what `kill`, a scheduler or a CI timeout sends): the run stops its stage
    instead of waiting for it to finish, exits non-zero within seconds, and both the stage's run and the parent run
    end KILLED; nothing is left RUNNING and dvc.lock is untouched, so a rerun does the work."""
    slow_left(built_toy, 60.0)
    before, since = lock_texts(built_toy), time.time() * 1000
    run = subprocess.Popen([sys.executable, "-m", "paperdag", "run", "toy"], cwd=built_toy, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, env={**os.environ, warm.ENV: "off"})  # its own process

    def stages() -> list[int]:  # the run's `paperdag stage` processes, once the stage's own run record is written
        if not any(_tags(p).get("paperdag.stage") == "left" for p in records.pending(built_toy)):
            return []  # (a stage stopped before it opened its record leaves no run at all: nothing for this test to see)
        return [p for p in _children(run.pid) if b"stage" in Path(f"/proc/{p}/cmdline").read_bytes()]

    wait_for(lambda: stages(), "the run's first stage")
    started = stages()
    t = time.perf_counter()
    run.send_signal(signal.SIGTERM)
    assert run.wait(30) != 0 and time.perf_counter() - t < 30, "the run waited for its 60 s stage"
    wait_for(lambda: not any(alive(p) for p in started), "the stage to stop", timeout=30)
    c = client(built_toy)  # drains
    found = [r for r in c.search_runs([c.get_experiment_by_name("toy").experiment_id], max_results=1000) if r.info.start_time >= since]
    assert found and all(r.info.status == "KILLED" for r in found), [(r.info.run_name, r.info.status) for r in found]
    assert any(r.data.tags.get("paperdag.stage") == "left" for r in found), [(r.info.run_name, r.data.tags) for r in found]
    assert any("paperdag.stage" not in r.data.tags for r in found), [(r.info.run_name, r.data.tags) for r in found]
    assert lock_texts(built_toy) == before


@pytest.fixture
def warm_server(built_toy: Path, tmp_path: Path):
    """A warm server of the test's own in the toy project, preloading what `paperdag run` imports (Prefect, DVC),
    started where Prefect's settings are not the client's: no PREFECT_API_URL, another PREFECT_HOME."""
    path, log = tmp_path / "w.sock", tmp_path / "warm.log"
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env["PREFECT_HOME"] = str(tmp_path / "server-side-prefect-home")
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "paperdag", "warm", "--socket", str(path), "--idle", "600",
                                 "--preload", "prefect,prefect.flows,prefect.client.orchestration,dvc.repo",
                                 "--no-prefect"],  # its own Prefect server: tests/engine/test_warm.py
                                cwd=built_toy, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    wait_for(lambda: path.exists() or proc.poll() is not None, "the warm server's socket")
    assert proc.poll() is None, log.read_text()
    yield path, log, Path(env["PREFECT_HOME"])
    proc.terminate()
    proc.wait(30)


def _served(log: Path, command: str) -> list[int]:
    """The pids of the children the server's log names as serving `paperdag COMMAND ...`."""
    return [int(line.split("pid ", 1)[1].split(":")[0]) for line in log.read_text().splitlines()
            if f": paperdag {command} " in line and "refused" not in line]


def test_a_served_run_reports_to_the_clients_prefect_server(built_toy: Path, prefect_server: str, warm_server) -> None:
    """`paperdag run` served by a warm server's child (Prefect imported there before this run's settings existed):
    the flow run is on the client's Prefect server, the parent MLflow run names it, the server's own PREFECT_HOME
    is never written, and the stage is recorded in dvc.lock."""
    import httpx

    path, log, server_home = warm_server
    slow_left(built_toy, 0.1)
    # heartbeats exported, so that the run itself changes no Prefect setting (turning them off makes Prefect read
    # its environment again, which would hide a child that never did)
    r = cli(built_toy, "run", "toy", env={warm.ENV: str(path), "PREFECT_FLOWS_HEARTBEAT_FREQUENCY": "30"})
    assert sorted(r.stdout.splitlines()) == ["toy:combine: done", "toy:left: done", "toy:right: done"], r.stderr
    assert len(_served(log, "run")) == 1 and len(_served(log, "stage")) == 3, log.read_text()
    flow_runs = httpx.post(f"{prefect_server}/flow_runs/filter", json={}).json()
    ours = [f for f in flow_runs if f["parameters"].get("root") == str(built_toy)]
    assert len(ours) == 1 and ours[0]["state_type"] == "COMPLETED", flow_runs
    c = client(built_toy)
    found = c.search_runs([c.get_experiment_by_name("toy").experiment_id], max_results=1000)
    parents = [x for x in found if "paperdag.stage" not in x.data.tags and "prefect.flow_run_id" in x.data.tags]
    assert [x.data.tags["prefect.flow_run_id"] for x in parents] == [ours[0]["id"]]
    assert not [p for p in server_home.rglob("*") if p.is_file()]  # (importing Prefect makes the directory)
    assert "up to date" in dvc(built_toy, "status").stdout


def test_a_served_run_killed_with_sigkill_leaves_nothing_behind(built_toy: Path, prefect_server: str,
                                                                warm_server) -> None:
    """The client of a served run (the process the user started) holds the run lock by name, and when it is killed
    with SIGKILL the server stops the run's child: the stage stops, the parent run ends KILLED, dvc.lock is
    untouched and a rerun does the work."""
    path, log, _ = warm_server
    slow_left(built_toy, 60.0)
    before = lock_texts(built_toy)
    env = {**os.environ, warm.ENV: str(path)}
    run = subprocess.Popen([sys.executable, "-m", "paperdag", "run", "toy"], cwd=built_toy, env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(lambda: any(_tags(p).get("paperdag.stage") == "left" for p in records.pending(built_toy)), "the stage")
    assert (built_toy / locks.RUN_LOCK).read_text() == str(run.pid)
    (child,) = _served(log, "run")
    # the stages: their clients (the run's child's processes) and the server's children that run them
    stage = _children(child) + _served(log, "stage")
    assert len(stage) >= 2 and all(alive(p) for p in stage), log.read_text()
    second = cli(built_toy, "run", "toy", check=False, env={warm.ENV: "off"})
    assert f"another `paperdag run` (pid {run.pid}) is running" in second.stderr
    run.send_signal(signal.SIGKILL)
    run.wait(30)
    wait_for(lambda: not any(alive(p) for p in [child, *stage]), "the served run and its stage to stop", timeout=30)
    c = client(built_toy)  # drains
    found = c.search_runs([c.get_experiment_by_name("toy").experiment_id], max_results=1000)
    assert any(r.info.status == "KILLED" and "paperdag.stage" not in r.data.tags for r in found)
    assert all(r.info.status != "RUNNING" for r in found)
    assert lock_texts(built_toy) == before
    p = built_toy / "params.yaml"
    p.write_text(p.read_text().replace("wait: 60.0", "wait: 0.1"))
    assert cli(built_toy, "run", "toy", env={warm.ENV: str(path)}).returncode == 0
    assert "up to date" in dvc(built_toy, "status").stdout

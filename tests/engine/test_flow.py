"""`paperdag run` as a Prefect flow: stale stages only, concurrency, dvc.lock kept, nested MLflow runs, Dask,
one run per repository at a time, and cron schedules on a Prefect server."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from paperdag.engine.tracking import client
from support import cli, dvc, lock_texts

# one worker runs test_flow.py and test_locks.py, so the session's one Prefect server (conftest.py prefect_server)
# starts once, not once per worker
pytestmark = pytest.mark.xdist_group("prefect")


def stage_runs(repo: Path) -> list:
    c = client(repo)
    exp = c.get_experiment_by_name("toy")
    return c.search_runs([exp.experiment_id], max_results=1000)


def test_run_executes_stale_stages_concurrently_and_records_dvc_lock(built_toy: Path, prefect_server: str) -> None:
    """The three stages downstream of a changed param run, left and right at the same time, nested under one parent
    MLflow run; afterwards `dvc status` is clean and `dvc repro` does nothing; a second run has nothing to do."""
    toy = built_toy
    p = toy / "params.yaml"
    p.write_text(p.read_text().replace("seconds: 0.0", "seconds: 0.5"))
    r = cli(toy, "run", "toy")
    assert r.stdout.split() == ["toy:left:", "done", "toy:right:", "done", "toy:combine:", "done"]
    assert "up to date" in dvc(toy, "status").stdout
    assert "Running stage" not in dvc(toy, "repro").stdout
    found = stage_runs(toy)
    parents = [x for x in found if "paperdag.stage" not in x.data.tags]
    children = {x.data.tags["paperdag.stage"]: x for x in found if "mlflow.parentRunId" in x.data.tags}
    assert len(parents) == 1 and parents[0].info.status == "FINISHED" and set(children) == {"left", "right", "combine"}
    flow_run = parents[0].data.tags["prefect.flow_run_id"]
    assert flow_run and all(c.data.tags["mlflow.parentRunId"] == parents[0].info.run_id for c in children.values())
    assert all(c.data.tags["prefect.flow_run_id"] == flow_run for c in children.values())
    left, right = children["left"].info, children["right"].info
    assert left.start_time < right.end_time and right.start_time < left.end_time, "independent stages did not overlap"
    assert "every stage is up to date" in cli(toy, "run", "toy").stderr


def test_run_with_set_reruns_only_downstream(built_toy: Path, prefect_server: str) -> None:
    """--set writes the new value to params.yaml and reruns only the stages that read it; a bad value is refused."""
    toy = built_toy
    r = cli(toy, "run", "toy", "--set", "toy.combine.scale=5.0")
    assert r.stdout.split() == ["toy:combine:", "done"]
    assert "scale: 5.0" in (toy / "params.yaml").read_text()
    bad = cli(toy, "run", "toy", "--set", "toy.make.n=many", check=False)
    assert bad.returncode == 2 and "params.yaml: toy.make.n: expected int" in bad.stderr


def test_failed_stage_fails_the_flow_and_keeps_its_lock_entry(built_toy: Path, prefect_server: str) -> None:
    """A stage that raises: the run exits non-zero with one line per failed stage (its error and the path of its
    traceback, no Prefect tracebacks), Prefect persisted no (pickled) result, dvc.lock keeps its last good entry;
    a fixed rerun resumes there."""
    toy = built_toy
    lock_before = lock_texts(toy)
    p = toy / "params.yaml"
    p.write_text(p.read_text().replace("fail: false", "fail: true").replace("scale: 2.0", "scale: 6.0"))
    r = cli(toy, "run", "toy", check=False)
    assert r.returncode == 2
    line = "stage toy:combine failed: RuntimeError: combine was told to fail (traceback: .paperdag/failed/toy-combine.txt)"
    assert line in r.stderr.splitlines()[-1] and "paperdag: error: toy: 1 stage(s) failed" in r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.splitlines()) <= 5, r.stderr
    assert "combine was told to fail" in (toy / ".paperdag/failed/toy-combine.txt").read_text().split("Traceback", 1)[1]
    storage = Path(os.environ["PREFECT_HOME"]) / "storage"
    assert not storage.exists() or not any(f.is_file() for f in storage.rglob("*")), "Prefect persisted a result"
    assert lock_texts(toy) == lock_before
    p.write_text(p.read_text().replace("fail: true", "fail: false"))
    assert cli(toy, "run", "toy").stdout.split() == ["toy:combine:", "done"]


def test_dask_runner_on_an_existing_cluster(built_toy: Path, prefect_server: str) -> None:
    """--runner dask --address runs the stale stages on a Dask cluster the user started."""
    from distributed import LocalCluster

    toy = built_toy
    p = toy / "params.yaml"
    p.write_text(p.read_text().replace("scale: 2.0", "scale: 9.0"))
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        r = cli(toy, "run", "toy", "--runner", "dask", "--address", cluster.scheduler_address)
    assert r.stdout.split() == ["toy:combine:", "done"]
    assert "up to date" in dvc(toy, "status").stdout


def test_a_dask_run_stops_when_the_cluster_has_no_worker_left(built_toy: Path, prefect_server: str) -> None:
    """Every worker leaving mid-run (here: the cluster scaled to none while two 60 s stages run on it) left the
    stages waiting on the scheduler forever, and the run with them. Now the run stops once the scheduler has had no
    worker for --wait-for-workers seconds, long before the stages would have ended, with the reason on stderr, and
    the dvc.lock files as they were."""
    import subprocess
    import sys
    import time

    from distributed import LocalCluster

    from paperdag.engine import records

    def stage_running() -> bool:
        for record in records.pending(toy):
            try:
                if '"RUNNING"' in record.read_text():
                    return True
            except FileNotFoundError:
                pass
        return False

    toy = built_toy
    p = toy / "params.yaml"
    p.write_text(p.read_text().replace("wait: 0.0", "wait: 60"))
    before = lock_texts(toy)
    with LocalCluster(n_workers=1, threads_per_worker=2, processes=True, dashboard_address=None) as cluster:
        run = subprocess.Popen([sys.executable, "-m", "paperdag", "run", "toy", "--runner", "dask", "--address",
                                cluster.scheduler_address, "--wait-for-workers", "2"], cwd=toy,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 120
        while not stage_running():
            assert run.poll() is None and time.time() < deadline, run.communicate()
            time.sleep(0.2)
        cluster.scale(0)
        gone = time.time()
        try:
            _, err = run.communicate(timeout=50)
        except subprocess.TimeoutExpired:
            run.kill()  # the run waits forever: what this test is about
            raise
    assert run.returncode != 0 and time.time() - gone < 50
    assert f"the Dask scheduler at {cluster.scheduler_address} has had no worker for 2 s" in err, err
    assert lock_texts(toy) == before


def test_second_concurrent_run_stops_with_a_clear_message(built_toy: Path, prefect_server: str) -> None:
    """While one `paperdag run` works, a second on the same repo exits at once naming the first; dvc.lock stays valid."""
    toy = built_toy
    p = toy / "params.yaml"
    p.write_text(p.read_text().replace("scale: 2.0", "scale: 8.0"))
    first = subprocess.Popen([sys.executable, "-m", "paperdag", "run", "toy"], cwd=toy, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    lock = toy / ".paperdag" / "run.lock"
    deadline = time.time() + 120
    while not (lock.exists() and lock.read_text().strip()):
        assert time.time() < deadline and first.poll() is None
        time.sleep(0.2)
    second = cli(toy, "run", "toy", check=False)
    assert second.returncode == 2
    assert f"another `paperdag run` (pid {first.pid}) is running" in second.stderr
    _, err = first.communicate(timeout=300)
    assert first.returncode == 0, err
    assert "up to date" in dvc(toy, "status").stdout


def _deployment(api_url: str, deployment_id: str, ready: bool = False) -> dict:
    """The deployment as the Prefect server at `api_url` has it, read with Prefect's client in this process (the
    worker of the "prefect" group has Prefect imported already: a process per read cost ~3 CPU-s); with `ready`,
    once its status is READY (or after 90 s)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.objects import DeploymentStatus
    from prefect.settings import PREFECT_API_URL, temporary_settings

    deadline = time.time() + 90
    with temporary_settings(updates={PREFECT_API_URL: api_url}), get_client(sync_client=True) as c:
        while True:
            d = c.read_deployment(deployment_id)
            if not ready or d.status == DeploymentStatus.READY or time.time() > deadline:
                break
            time.sleep(0.5)
    return {"name": d.name, "crons": [s.schedule.cron for s in d.schedules], "params": d.parameters,
            "status": d.status.value if d.status else None}


def test_schedule_registers_a_cron_deployment(toy: Path, prefect_server: str) -> None:
    """schedule creates a deployment with that cron on the Prefect server; serve starts serving it; a bad cron is refused."""
    from prefect.exceptions import ObjectNotFound

    r = cli(toy, "schedule", "toy", "--cron", "0 3 * * *")
    deployment_id = r.stdout.strip().rsplit(" ", 1)[-1]
    got = _deployment(prefect_server, deployment_id)
    assert got["name"] == "toy" and got["crons"] == ["0 3 * * *"]
    assert got["params"] == {"root": str(toy.resolve()), "pipeline": "toy"}
    assert got["status"] == "NOT_READY", got  # ready only once something serves it (below)
    bad = cli(toy, "schedule", "toy", "--cron", "every day", check=False)
    assert bad.returncode == 2 and "not a valid cron" in bad.stderr
    serve = subprocess.Popen([sys.executable, "-m", "paperdag", "serve"], cwd=toy, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    try:
        got = _deployment(prefect_server, deployment_id, ready=True)
        assert got["status"] == "READY", serve.stdout.read() if serve.poll() is not None else "serve never became ready"
    finally:
        serve.terminate()
        serve.wait(30)
    listed = cli(toy, "schedule", "--list").stdout
    assert "toy" in listed and "0 3 * * *" in listed and deployment_id in listed, listed
    assert "removed the schedule of toy" in cli(toy, "schedule", "--remove", "toy").stdout
    with pytest.raises(ObjectNotFound):
        _deployment(prefect_server, deployment_id)
    assert "nothing scheduled" in cli(toy, "schedule", "--list").stdout
    again = cli(toy, "schedule", "--remove", "toy", check=False)
    assert again.returncode == 2 and "toy is not scheduled" in again.stderr


def test_scheduled_run_that_overlaps_a_run_is_skipped_with_one_line(toy: Path, prefect_server: str) -> None:
    """A tick of a schedule while another process holds the run lock: the flow run ends Cancelled with a log line
    naming the holder, no traceback, no stage run."""
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from paperdag.engine import locks\n"
         "with locks.run_lock(sys.argv[1]):\n    print('held', flush=True); time.sleep(120)", str(toy)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        code = ("import sys\nfrom paperdag.engine.flow import paperdag_pipeline\n"
                "s = paperdag_pipeline(root=sys.argv[1], pipeline='toy', return_state=True)\n"
                "print('STATE', s.type.value, s.message)\n")
        r = subprocess.run([sys.executable, "-c", code, str(toy)], capture_output=True, text=True, timeout=300)
    finally:
        holder.kill()
        holder.wait()
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert f"STATE CANCELLED toy: skipped: another `paperdag run` (pid {holder.pid})" in r.stdout, out
    assert "skipped this run" in r.stderr and "Traceback" not in out
    assert not (toy / "data" / "toy").exists()  # no stage ran


def test_waiting_tasks_do_not_hold_stage_slots() -> None:
    """The thread pool has a thread per task (a task waiting for its upstream sits in its thread), and `workers`
    bounds the stage subprocesses instead: with 2 slots, 2 ready stages run while 5 others wait."""
    from paperdag.engine import flow

    runner = flow.task_runner("thread", None, workers=2, tasks=7)
    assert runner._max_workers == 7
    try:
        assert flow._SLOTS.acquire(blocking=False) and flow._SLOTS.acquire(blocking=False)
        assert not flow._SLOTS.acquire(blocking=False)
    finally:
        flow.task_runner("thread", None, workers=None, tasks=1)  # a fresh semaphore for whatever runs next

"""`paperdag run`: the same DAG as a Prefect flow — stale stages only, independent ones concurrently.

Each Prefect task runs `paperdag stage` in a subprocess (the exact command DVC runs), so threads or Dask
workers give real parallelism. Finished stages are recorded in dvc.lock by the flow process, one at a time,
so afterwards `dvc status` is clean and `dvc repro` is a no-op. A repository lock keeps two runs apart.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from prefect import flow, task

from paperdag.engine import dvc
from paperdag.engine.errors import LockBusy, StageError
from paperdag.engine.spec import Project, load_project
from paperdag.engine.settings import prefect_defaults
from paperdag.engine.status import stale_stages
from paperdag.engine.tracking import FLOW_RUN_ENV, PARENT_RUN_ENV

STATE_DIR = ".paperdag"
SCHEDULES = f"{STATE_DIR}/schedules.json"


@contextmanager
def repo_lock(root: Path) -> Iterator[None]:
    """One `paperdag run` per repository at a time; the second stops at once with the holder's pid."""
    path = Path(root) / STATE_DIR / "run.lock"
    path.parent.mkdir(exist_ok=True)
    with open(path, "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = f.read().strip() or "?"
            raise LockBusy(f"another `paperdag run` (pid {holder}) is running in {root}; wait for it to finish") from None
        f.seek(0)
        f.truncate()
        f.write(str(os.getpid()))
        f.flush()
        try:
            yield
        finally:
            f.seek(0)
            f.truncate()
            fcntl.flock(f, fcntl.LOCK_UN)


def _stage_command(address: str) -> list[str]:
    return [sys.executable, "-m", "paperdag", "stage", address]


# Stages running at once in this process. Prefect's thread runner keeps a submitted task in its worker thread while
# it waits for its upstream tasks, so with as many threads as stage slots a waiting task would hold a slot that a
# ready stage needs (a matrix's infer@0 waiting on train@0 kept train@1 from starting). The pool gets a thread per
# task; this semaphore bounds the stage subprocesses instead.
_SLOTS = threading.BoundedSemaphore(os.cpu_count() or 2)


def execute_stage(root: str, address: str, parent_run_id: str, flow_run_id: str) -> str:
    """Run one stage in a subprocess (on whichever worker Prefect placed this task)."""
    env = {**os.environ, PARENT_RUN_ENV: parent_run_id, FLOW_RUN_ENV: flow_run_id}
    with _SLOTS:
        r = subprocess.run(_stage_command(address), cwd=root, env=env)
    if r.returncode != 0:
        raise StageError(f"stage {address} failed (exit code {r.returncode}); its output and MLflow run say why")
    return address


@task(name="stage", retries=0)
def stage_task(root: str, address: str, parent_run_id: str, flow_run_id: str) -> str:
    return execute_stage(root, address, parent_run_id, flow_run_id)


@flow(name="paperdag", validate_parameters=True)
def paperdag_pipeline(root: str, pipeline: str) -> dict[str, str]:
    """Run the stale stages of one paperdag pipeline and record them in dvc.lock."""
    from prefect.runtime import flow_run

    from paperdag.engine import tracking

    repo = Path(root)
    with repo_lock(repo):
        project = load_project(repo)
        _ensure_rendered(project)
        todo = stale_stages(project, pipeline)
        if not todo:
            print(f"{pipeline}: every stage is up to date", file=sys.stderr)
            return {}
        flow_run_id = str(flow_run.id or "")
        c, parent = tracking.start_parent_run(repo, pipeline, {"prefect.flow_run_id": flow_run_id})
        futures: dict[str, Any] = {}
        for s in todo:
            upstream = [futures[u] for u in project.graph.predecessors(s.address) if u in futures]
            futures[s.address] = stage_task.with_options(name=s.address).submit(
                str(repo), s.address, parent, flow_run_id, wait_for=upstream
            )
        status: dict[str, str] = {}
        for s in todo:
            f = futures[s.address]
            f.wait()
            if f.state.is_completed():
                dvc.commit(repo, s.dvc_name)
                status[s.address] = "done"
            else:
                status[s.address] = "failed" if f.state.is_failed() else "not run (upstream failed)"
        ok = all(v == "done" for v in status.values())
        c.set_tag(parent, "paperdag.stages", json.dumps(status))
        c.set_terminated(parent, status="FINISHED" if ok else "FAILED")
        if not ok:
            bad = ", ".join(f"{k}: {v}" for k, v in status.items() if v != "done")
            raise StageError(f"{pipeline}: {bad}")
        return status


def task_runner(runner: str, address: str | None, workers: int | None, tasks: int = 1) -> Any:
    """A Prefect task runner with a thread per task; `workers` stages run at once (the semaphore in execute_stage)."""
    global _SLOTS
    _SLOTS = threading.BoundedSemaphore(workers or os.cpu_count() or 2)
    if runner == "thread":
        from prefect.task_runners import ThreadPoolTaskRunner

        return ThreadPoolTaskRunner(max_workers=max(tasks, 1))
    if runner == "dask":
        from prefect_dask import DaskTaskRunner

        if address:
            return DaskTaskRunner(address=address)
        # tasks are subprocesses already: threads in one worker process avoid a Prefect server per worker
        return DaskTaskRunner(cluster_kwargs={"n_workers": 1, "threads_per_worker": max(tasks, 1), "processes": False})
    raise StageError(f"unknown runner '{runner}' (thread or dask)")


def _ensure_rendered(project: Project) -> None:
    from paperdag.engine.render import render

    if not render(project):
        print("dvc.yaml was out of date with pipelines/: re-rendered", file=sys.stderr)


def run_pipeline(root: Path, pipeline: str, runner: str = "thread", address: str | None = None, workers: int | None = None) -> dict[str, str]:
    prefect_defaults(root)
    root = Path(root).resolve()
    project = load_project(root)
    _ensure_rendered(project)
    todo = stale_stages(project, pipeline)
    if not todo:  # nothing to do: no need to start Prefect (its server takes seconds)
        print(f"{pipeline}: every stage is up to date", file=sys.stderr)
        return {}
    # import MLflow and open its store (seconds) while Prefect starts its server, not after
    threading.Thread(target=_warm_tracking, args=(root, pipeline), daemon=True).start()
    configured = paperdag_pipeline.with_options(task_runner=task_runner(runner, address, workers, len(todo)))
    return configured(root=str(root), pipeline=pipeline)


def _warm_tracking(root: Path, pipeline: str) -> None:
    from paperdag.engine import tracking

    try:
        tracking.experiment_id(tracking.client(root), root, pipeline)
    except Exception:  # the flow opens it again and reports any real error
        pass


def schedule(root: Path, pipeline: str, cron: str) -> str:
    """Register a Prefect deployment of the pipeline's flow with a cron schedule; remember it for `serve`."""
    from prefect.schedules import Cron

    prefect_defaults(root)
    root = Path(root).resolve()
    load_project(root).pipeline(pipeline)
    try:
        Cron(cron)
    except Exception as e:
        raise StageError(f"--cron '{cron}': not a valid cron expression ({e})") from None
    deployment_id = _deployment(root, pipeline, cron).apply()
    path = root / SCHEDULES
    path.parent.mkdir(exist_ok=True)
    entries = json.loads(path.read_text()) if path.exists() else {}
    entries[pipeline] = {"cron": cron, "deployment_id": str(deployment_id)}
    path.write_text(json.dumps(entries, indent=2) + "\n")
    return str(deployment_id)


def _deployment(root: Path, pipeline: str, cron: str) -> Any:
    return paperdag_pipeline.to_deployment(name=pipeline, cron=cron, parameters={"root": str(root), "pipeline": pipeline})


def serve(root: Path) -> None:
    """Serve every scheduled pipeline (blocks); the Prefect server's scheduler creates the runs."""
    from prefect import serve as prefect_serve

    prefect_defaults(root)
    root = Path(root).resolve()
    path = root / SCHEDULES
    entries = json.loads(path.read_text()) if path.exists() else {}
    if not entries:
        raise StageError("nothing scheduled: run `paperdag schedule PIPELINE --cron EXPR` first")
    prefect_serve(*[_deployment(root, p, e["cron"]) for p, e in entries.items()])

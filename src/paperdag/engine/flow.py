"""`paperdag run`: the same DAG as a Prefect flow — stale stages only, independent ones concurrently.

Each Prefect task runs `paperdag stage` in a subprocess (the exact command DVC runs), so threads or Dask
workers give real parallelism, and then records its stage in dvc.lock (DVC's commit, in this process, one task at
a time) before its downstream tasks start, so afterwards `dvc status` is clean and `dvc repro` is a no-op. The run
lock (locks.py) keeps two runs apart.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

from prefect import flow, task
from prefect.exceptions import TerminationSignal
from prefect.states import Cancelled, Failed

from paperdag.engine import children, dvc, dvcmain, locks, records
from paperdag.engine.errors import LockBusy, StageError
from paperdag.engine.render import ensure_rendered
from paperdag.engine.settings import prefect_defaults
from paperdag.engine.spec import load_project
from paperdag.engine.status import stale_stages
from paperdag.engine.tracking import FLOW_RUN_ENV, PARENT_RUN_ENV

STATE_DIR = ".paperdag"
SCHEDULES = f"{STATE_DIR}/schedules.json"


def _stage_command(address: str) -> list[str]:
    return [sys.executable, "-m", "paperdag", "stage", address]


# Stages running at once in this process. Prefect's thread runner keeps a submitted task in its worker thread while
# it waits for its upstream tasks, so with as many threads as stage slots a waiting task would hold a slot that a
# ready stage needs (a matrix's infer@0 waiting on train@0 kept train@1 from starting). The pool gets a thread per
# task; this semaphore bounds the stage subprocesses instead.
_SLOTS = threading.BoundedSemaphore(os.cpu_count() or 2)


WAIT_POLL_S = 1.0  # how often the flow, waiting for a stage, looks whether it was told to stop
_abandoned: list[str] = []  # why the running flow must stop: set from another thread (orchestrate's Dask watchdog)


def abandon(reason: str) -> None:
    """Tell the running flow to stop waiting for its stages: it stops them and ends FAILED with `reason`."""
    _abandoned.append(reason)


def abandoned(clear: bool = False) -> str | None:
    """Why the flow was told to stop, if it was; `clear`: forget it (a new run in this process)."""
    reason = _abandoned[0] if _abandoned else None
    if clear:
        _abandoned.clear()
    return reason


def _wait(future: Any) -> None:
    """Wait for a stage's future, a second at a time, unless the flow was told to stop (then a StageError)."""
    while not future.wrapped_future.done():
        if _abandoned:
            raise StageError(_abandoned[0])
        future.wait(timeout=WAIT_POLL_S)
    future.wait()


def execute_stage(root: str, address: str, dvc_target: str, parent_run_id: str, flow_run_id: str) -> str:
    """Run one stage in a subprocess (on whichever worker Prefect placed this task; it dies with this process), then
    record it in dvc.lock.

    The commit is part of the task: DVC's commit relinks the outputs from its cache, so a downstream stage that
    started before it could find an input missing. Commits take turns (DVC's repository lock allows one writer):
    an flock on .paperdag/commit.lock, which holds across the processes of a Dask cluster on this filesystem. The
    stage's MLflow run is a record drained off the flow's path (records.py); a failure is one line naming the
    stage, its error and where its traceback is."""
    env = {**os.environ, PARENT_RUN_ENV: parent_run_id, FLOW_RUN_ENV: flow_run_id}
    with _SLOTS:
        try:
            returncode = children.run(_stage_command(address), cwd=root, env=env)
        except children.Stopped:
            raise StageError(f"stage {address} not started: the run was stopped") from None
    if returncode != 0:
        from paperdag.engine.failures import failure_summary

        raise StageError(failure_summary(Path(root), address, returncode))
    with locks.commit_lock(Path(root)):
        dvc.commit(Path(root), dvc_target)
    return address


@task(name="stage", retries=0, persist_result=False)
def stage_task(root: str, address: str, dvc_target: str, parent_run_id: str, flow_run_id: str) -> Any:
    try:
        return execute_stage(root, address, dvc_target, parent_run_id, flow_run_id)
    except StageError as e:  # a Failed state, not an exception: Prefect would log its traceback, which says nothing
        return Failed(message=str(e))


@flow(name="paperdag", validate_parameters=True, persist_result=False)
def paperdag_pipeline(root: str, pipeline: str, stages: list[str] | None = None) -> Any:
    """Run the stale stages of one paperdag pipeline (or the given ones, planned by the caller) and record them in
    dvc.lock."""
    from prefect.runtime import flow_run

    from paperdag.engine import tracking

    repo = Path(root)
    if stages is None:  # a scheduled run (or a direct call): it may overlap a run or a `dvc repro` already going
        busy = _busy_reason(repo)
        if busy:
            from prefect import get_run_logger

            get_run_logger().warning(f"{pipeline}: skipped this run: {busy}")
            return Cancelled(message=f"{pipeline}: skipped: {busy}")
    with locks.run_lock(repo):
        project = load_project(repo)
        if stages is None:
            ensure_rendered(project)
            todo = stale_stages(project, pipeline)
        else:
            todo = [project.stage(a) for a in stages]
        if not todo:
            print(f"{pipeline}: every stage is up to date", file=sys.stderr)
            return {}
        children.reset()
        # DVC's API, which records each finished stage, is imported while the first stages run
        threading.Thread(target=dvcmain.preload, name="import dvc").start()
        flow_run_id = str(flow_run.id or "")
        parent = tracking.parent_record(repo, pipeline, {"prefect.flow_run_id": flow_run_id})
        futures: dict[str, Any] = {}
        for s in todo:
            upstream = [futures[u] for u in project.graph.predecessors(s.address) if u in futures]
            futures[s.address] = stage_task.with_options(name=s.address).submit(
                str(repo), s.address, project.dvc_target(s), parent.id, flow_run_id, wait_for=upstream
            )
        status: dict[str, str] = {}
        reasons: list[str] = []
        try:
            for s in todo:
                f = futures[s.address]
                _wait(f)
                if f.state.is_completed():
                    status[s.address] = "done"
                elif f.state.is_failed() and (f.state.message or "").startswith(f"stage {s.address} "):
                    status[s.address] = "failed"
                    reasons.append(f.state.message)
                else:
                    status[s.address] = "not run (an upstream stage failed)"
        except BaseException as e:  # SIGTERM (Prefect raises it here), Ctrl-C: stop the stages, end the parent run
            children.stop_all()
            parent.set_tags({"paperdag.error": f"{type(e).__name__}: {e}", "paperdag.stages": json.dumps(status)})
            parent.end("KILLED" if isinstance(e, (KeyboardInterrupt, TerminationSignal)) else "FAILED")
            records.start_drainer(repo)
            raise
        ok = all(v == "done" for v in status.values())
        parent.set_tags({"paperdag.stages": json.dumps(status)})
        parent.end("FINISHED" if ok else "FAILED")
        records.start_drainer(repo)
        if not ok:
            not_run = sum(v.startswith("not run") for v in status.values())
            head = f"{pipeline}: {len(reasons)} stage(s) failed" + (f", {not_run} not run as they depend on them" if not_run else "")
            return Failed(message="\n  ".join([head, *reasons]), data=status)
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

        if address:  # checked before the run started (orchestrate.require_dask_worker)
            return DaskTaskRunner(address=address)
        # tasks are subprocesses already: threads in one worker process avoid a Prefect server per worker
        return DaskTaskRunner(cluster_kwargs={"n_workers": 1, "threads_per_worker": max(tasks, 1), "processes": False})
    raise StageError(f"unknown runner '{runner}' (thread or dask)")


def _busy_reason(repo: Path) -> str:
    """Why a run cannot start now (another `paperdag run` or a DVC command holds the repository), or ""."""
    try:
        with locks.run_lock(repo):
            locks.refuse_if_dvc_busy(repo)
    except LockBusy as e:
        return str(e)
    return ""


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
    entries = _schedules(root)
    entries[pipeline] = {"cron": cron, "deployment_id": str(deployment_id)}
    _write_schedules(root, entries)
    return str(deployment_id)


def _deployment(root: Path, pipeline: str, cron: str) -> Any:
    """A deployment runs one flow at a time: a tick that comes while the last run still works is cancelled (and a
    tick that finds a `paperdag run` or `dvc repro` of another process working is skipped by the flow itself)."""
    from prefect.client.schemas.objects import ConcurrencyLimitConfig, ConcurrencyLimitStrategy

    return paperdag_pipeline.to_deployment(
        name=pipeline, cron=cron, parameters={"root": str(root), "pipeline": pipeline},
        concurrency_limit=ConcurrencyLimitConfig(limit=1, collision_strategy=ConcurrencyLimitStrategy.CANCEL_NEW))


def _schedules(root: Path) -> dict[str, dict[str, str]]:
    path = Path(root) / SCHEDULES
    if not path.exists():
        return {}
    try:
        entries = json.loads(path.read_text())
    except ValueError as e:
        raise StageError(f"{path}: not JSON ({e}); fix or delete it") from None
    return entries


def _write_schedules(root: Path, entries: dict[str, dict[str, str]]) -> None:
    from paperdag.engine.fsutil import atomic_write_text

    path = Path(root) / SCHEDULES
    path.parent.mkdir(exist_ok=True)
    atomic_write_text(path, json.dumps(entries, indent=2) + "\n")


def list_schedules(root: Path) -> list[dict[str, str]]:
    """The scheduled pipelines with what the Prefect server says of each: its deployment's status, the last run and
    the next one."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId
    from prefect.client.schemas.sorting import FlowRunSort

    prefect_defaults(root)
    rows = []
    with get_client(sync_client=True) as c:
        for pipeline, e in sorted(_schedules(Path(root).resolve()).items()):
            row = {"pipeline": pipeline, "cron": e["cron"], "deployment_id": e["deployment_id"]}
            try:
                d = c.read_deployment(e["deployment_id"])
            except Exception:  # deleted on the server (or another server): say so, keep listing
                rows.append({**row, "status": "not on this Prefect server", "last_run": "", "next_run": ""})
                continue
            runs = c.read_flow_runs(deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[d.id])),
                                    sort=FlowRunSort.EXPECTED_START_TIME_DESC, limit=50)
            done = [r for r in runs if r.state and not r.state.is_scheduled()]
            upcoming = [r for r in runs if r.state and r.state.is_scheduled()]
            last = done[0] if done else None
            row["status"] = "paused" if d.paused else str(d.status.value if d.status else "")
            row["last_run"] = f"{last.state.name} {last.expected_start_time:%Y-%m-%d %H:%M}" if last else ""
            row["next_run"] = f"{min(r.expected_start_time for r in upcoming):%Y-%m-%d %H:%M}" if upcoming else ""
            rows.append(row)
    return rows


def remove_schedule(root: Path, pipeline: str) -> None:
    """Delete the pipeline's deployment (and with it its schedule and scheduled runs) and forget it."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    prefect_defaults(root)
    root = Path(root).resolve()
    entries = _schedules(root)
    if pipeline not in entries:
        known = ", ".join(sorted(entries)) or "none"
        raise StageError(f"{pipeline} is not scheduled (scheduled: {known})")
    with get_client(sync_client=True) as c:
        try:
            c.delete_deployment(entries[pipeline]["deployment_id"])
        except ObjectNotFound:
            pass  # already gone on the server: forgetting it is all that is left
    del entries[pipeline]
    _write_schedules(root, entries)


def serve(root: Path) -> None:
    """Serve every scheduled pipeline (blocks); the Prefect server's scheduler creates the runs."""
    from prefect import serve as prefect_serve

    prefect_defaults(root)
    root = Path(root).resolve()
    entries = _schedules(root)
    if not entries:
        raise StageError("nothing scheduled: run `paperdag schedule PIPELINE --cron EXPR` first")
    prefect_serve(*[_deployment(root, p, e["cron"]) for p, e in entries.items()])

"""MLflow tracking: one run per stage execution (experiment = pipeline), nested under a parent run per flow.

Lineage lives in tags: git commit and dirty flag, the md5 of every dep and out (as DVC computes them),
the Prefect flow-run id when there is one, and the environment (python, packages, threads, CPU).
"""

from __future__ import annotations

import os
import platform
import subprocess
import time
import threading
import traceback
from importlib import metadata
from pathlib import Path
from typing import Any

PARENT_RUN_ENV = "PAPERDAG_PARENT_RUN_ID"
FLOW_RUN_ENV = "PAPERDAG_FLOW_RUN_ID"
_PACKAGES = ("paperdag", "numpy", "polars", "pyarrow", "torch", "transformers", "dvc", "prefect", "mlflow")
DEP_TAG, OUT_TAG = "paperdag.dep.", "paperdag.out."


def tracking_uri(root: Path) -> str:
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{Path(root).resolve() / 'mlflow.db'}"


def client(root: Path):  # -> MlflowClient (import is slow: keep it lazy)
    import logging

    logging.getLogger("alembic").setLevel(logging.WARNING)
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=tracking_uri(root))


def experiment_id(c: Any, root: Path, name: str) -> str:
    """Get or create the experiment; two processes racing to create it both end with the same id."""
    for attempt in range(5):
        exp = c.get_experiment_by_name(name)
        if exp is not None:
            return exp.experiment_id
        try:
            return c.create_experiment(name, artifact_location=(Path(root).resolve() / "mlruns" / name).as_uri())
        except Exception:
            time.sleep(0.2 * (attempt + 1))
    raise RuntimeError(f"cannot create MLflow experiment {name}")


def git_info(root: Path) -> dict[str, str]:
    def git(*args: str) -> str:
        r = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)
        return r.stdout.strip() if r.returncode == 0 else ""

    commit = git("rev-parse", "HEAD") or "none"
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return {"git.commit": commit, "git.dirty": str(bool(dirty)).lower()}


def environment() -> dict[str, str]:
    tags = {"env.python": platform.python_version(), "env.platform": platform.platform(), "env.cpu_count": str(os.cpu_count())}
    for pkg in _PACKAGES:
        try:
            tags[f"env.{pkg}"] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            pass
    if "torch" in __import__("sys").modules:
        import torch

        tags["env.torch_threads"] = str(torch.get_num_threads())
        tags["env.cuda"] = str(torch.cuda.is_available()).lower()
    return tags


def flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out


class StageRun:
    """A handle on the open MLflow run of one stage execution."""

    def __init__(self, c: Any, run_id: str) -> None:
        self.client, self.run_id = c, run_id

    def log_params(self, params: dict[str, Any]) -> None:
        from mlflow.entities import Param

        items = [Param(k, str(v)[:6000]) for k, v in sorted(flatten(params).items())]
        for i in range(0, len(items), 100):
            self.client.log_batch(self.run_id, params=items[i : i + 100])

    def log_metrics(self, metrics: dict[str, Any], prefix: str = "") -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        items = []
        for k, v in flatten(metrics, prefix).items():
            if isinstance(v, bool):
                v = float(v)
            if isinstance(v, (int, float)):
                items.append(Metric(k.replace(":", "_"), float(v), now, 0))
        for i in range(0, len(items), 500):
            self.client.log_batch(self.run_id, metrics=items[i : i + 500])

    def set_tags(self, tags: dict[str, str]) -> None:
        from mlflow.entities import RunTag

        items = [RunTag(k, str(v)[:5000]) for k, v in tags.items()]
        for i in range(0, len(items), 100):
            self.client.log_batch(self.run_id, tags=items[i : i + 100])

    def log_artifact(self, path: Path, subdir: str | None = None) -> None:
        self.client.log_artifact(self.run_id, str(path), subdir)


class PendingRun:
    """The MLflow run of one stage execution, opened in a background thread.

    Importing MLflow and opening its store takes seconds; the runner loads the stage's inputs meanwhile. The run's start time
    is the stage's, and a killed stage leaves its run RUNNING, as any killed MLflow client does.
    """

    def __init__(self, root: Path, pipeline: str, stage: str, tags: dict[str, str]) -> None:
        self._error: BaseException | None = None
        self._run: StageRun | None = None
        start_ms = int(time.time() * 1000)
        run_tags = {"paperdag.pipeline": pipeline, "paperdag.stage": stage, **git_info(root), **tags}
        if os.environ.get(PARENT_RUN_ENV):
            run_tags["mlflow.parentRunId"] = os.environ[PARENT_RUN_ENV]
        if os.environ.get(FLOW_RUN_ENV):
            run_tags["prefect.flow_run_id"] = os.environ[FLOW_RUN_ENV]

        def open_run() -> None:
            try:
                c = client(root)
                exp = experiment_id(c, root, pipeline)
                run = c.create_run(exp, start_time=start_ms, run_name=f"{pipeline}:{stage}", tags=run_tags)
                self._run = StageRun(c, run.info.run_id)
            except BaseException as e:  # reported by handle()
                self._error = e

        self._thread = threading.Thread(target=open_run, name="mlflow-open-run", daemon=True)
        self._thread.start()

    def handle(self) -> StageRun:
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._run is not None
        return self._run

    def fail(self, error: BaseException) -> None:
        """Mark the run FAILED with the traceback attached."""
        run = self.handle()
        tb = "".join(traceback.format_exception(error))
        try:
            run.client.log_text(run.run_id, tb, "traceback.txt")
            run.set_tags({"paperdag.error": f"{type(error).__name__}: {error}", **environment()})
        finally:
            run.client.set_terminated(run.run_id, status="FAILED")

    def finish(self) -> StageRun:
        run = self.handle()
        run.set_tags(environment())
        run.client.set_terminated(run.run_id, status="FINISHED")
        return run


def start_parent_run(root: Path, pipeline: str, tags: dict[str, str]) -> tuple[Any, str]:
    c = client(root)
    exp = experiment_id(c, root, pipeline)
    run = c.create_run(exp, run_name=f"{pipeline} (paperdag run)", tags={"paperdag.pipeline": pipeline, **git_info(root), **tags})
    return c, run.info.run_id

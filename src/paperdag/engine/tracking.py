"""MLflow tracking: one run per stage execution (experiment = pipeline), nested under a parent run per flow.

Lineage lives in tags: git commit and dirty flag, the md5 of every dep (data and code) and out (as DVC computes them),
the Prefect flow-run id when there is one, and the environment (python, packages, threads, CPU). Data inputs and
outputs are also the run's MLflow datasets (records._log), so MLflow's own UI shows them.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from paperdag.engine.errors import PaperdagError
from paperdag.engine.fsutil import sqlite_template, tmp_sibling

PARENT_RUN_ENV = "PAPERDAG_PARENT_RECORD_ID"
FLOW_RUN_ENV = "PAPERDAG_FLOW_RUN_ID"
_PACKAGES = ("paperdag", "numpy", "polars", "pyarrow", "torch", "transformers", "dvc", "prefect", "mlflow")
DEP_TAG, OUT_TAG = "paperdag.dep.", "paperdag.out."
# the params as dvc.lock records them for the stage ({params file: {key: value}}), as canonical JSON: lineage and
# audit compare it with dvc.lock's `params:` entry (the MLflow params are the stage's dataclass fields instead)
PARAMS_TAG = "paperdag.params"
OWN_FILES = ("dvc.lock", "pipelines/*/dvc.lock", "paperdag.lock")  # git pathspecs
CODE_DIRS = ("stages/", "src/", "pipelines/")  # a dep under these is code (the stage's instrument), not data


def canonical_json(value: Any) -> str:
    """Sorted keys, no spaces: two equal documents give one string."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def tracking_uri(root: Path) -> str:
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{Path(root).resolve() / 'mlflow.db'}"


def client(root: Path, drain: bool = True) -> Any:  # an MlflowClient (its import is slow: kept lazy)
    """An MLflow client on the project's store, after the pending run records are in it (unless `drain` is off)."""
    import logging

    if drain:
        from paperdag.engine import records

        records.drain(root)

    logging.getLogger("alembic").setLevel(logging.WARNING)
    from mlflow.tracking import MlflowClient

    _seed_store(root)
    return MlflowClient(tracking_uri=tracking_uri(root))


def template_path() -> Path:
    """An empty MLflow store at this installation's schema, made once by `mlflow db upgrade` (`make` runs
    `python -m paperdag.engine.tracking`): one per MLflow version, in the virtual environment."""
    return Path(sys.prefix) / "share" / "paperdag" / f"mlflow-{metadata.version('mlflow')}.db"


def build_template() -> Path:
    """The template (a no-op when it exists): MLflow's own command creates every table and runs every migration
    on an empty SQLite file; nothing else is written into it (no experiment: MLflow adds its Default experiment when
    a project's copy is first opened, as it does on a store it creates)."""
    def make(tmp: Path) -> Path:
        db = tmp / "mlflow.db"
        r = subprocess.run([sys.executable, "-m", "mlflow", "db", "upgrade", f"sqlite:///{db}"],
                           capture_output=True, text=True)
        if r.returncode != 0 or not db.exists():
            raise PaperdagError(f"could not make an MLflow store template: {(r.stderr or r.stdout)[-500:]}")
        return db

    return sqlite_template(template_path(), make)


def _seed_store(root: Path) -> None:
    """A project without a store gets a copy of the template, when there is one: opening a new SQLite store makes
    MLflow create its tables and run its 68 migrations (1.1-2.4 s in a process that has MLflow imported; 0.04 s on
    the copy, whose schema MLflow checks as on any store). Another store (MLFLOW_TRACKING_URI), an existing
    mlflow.db, or no template: nothing is done, and MLflow makes its own."""
    db = Path(root).resolve() / "mlflow.db"
    if tracking_uri(root) != f"sqlite:///{db}" or db.exists():
        return
    template = template_path()
    if not template.exists():
        return
    tmp = tmp_sibling(db)
    try:
        shutil.copyfile(template, tmp)
        os.link(tmp, db)  # never over a store another process has just made
    except FileExistsError:
        pass
    finally:
        tmp.unlink(missing_ok=True)


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
    # the engine's own bookkeeping does not make a checkout dirty: DVC rewrites dvc.lock after every stage of a
    # `dvc repro`, paperdag.lock follows it
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", ".", *(f":(exclude){f}" for f in OWN_FILES))
    return {"git.commit": commit, "git.dirty": str(bool(dirty)).lower()}


def environment() -> dict[str, str]:
    from paperdag.engine import machine

    here = machine.describe()
    tags = {"env.python": platform.python_version(), "env.platform": platform.platform(), "env.cpu_count": str(os.cpu_count()),
            "env.cpu": str(here["cpu"]), "env.cpu_isa": " ".join(here["isa"]), "env.libc": str(here["libc"]),
            "env.machine_id": machine.this_id()}
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


def stage_record(root: Path, pipeline: str, stage: str, tags: dict[str, str]) -> Any:
    """Open the run record of one stage execution (see records.py: it reaches MLflow off the stage's path)."""
    from paperdag.engine.records import PARENT_RECORD_TAG, Record

    run_tags = {"paperdag.pipeline": pipeline, "paperdag.stage": stage, **git_info(root), **tags}
    if os.environ.get(PARENT_RUN_ENV):
        run_tags[PARENT_RECORD_TAG] = os.environ[PARENT_RUN_ENV]
    if os.environ.get(FLOW_RUN_ENV):
        run_tags["prefect.flow_run_id"] = os.environ[FLOW_RUN_ENV]
    return Record(root, pipeline, f"{pipeline}:{stage}", run_tags)


def parent_record(root: Path, pipeline: str, tags: dict[str, str]) -> Any:
    """The parent run of a `paperdag run`, as a record its stages' records name (records.py)."""
    from paperdag.engine.records import Record

    return Record(root, pipeline, f"{pipeline} (paperdag run)", {"paperdag.pipeline": pipeline, **git_info(root), **tags})


if __name__ == "__main__":
    print(build_template())

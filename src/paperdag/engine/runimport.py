"""Copy paperdag's runs from another MLflow store into the project's: the runs a git worktree (or a colleague's
checkout) logged to its own mlflow.db, whose outputs now live in this checkout's dvc.lock.

Lineage and audit look an output up by the run that wrote it; a stage run in a worktree leaves that run in the
worktree's store, so once its branch is merged, every output it made reads "no run recorded" here. Importing copies
each finished run through MLflow's public client only (no writes into MLflow's tables): its start and end times,
status, params, every metric's history, tags, datasets (inputs and outputs with their md5s) and artifacts, its parent
(a flow's run) mapped to the parent's copy. A run is known by its paperdag record id: one the project's store has
already is left alone, so importing twice copies nothing twice. Each copy carries `paperdag.imported_from` (the
source store) and `paperdag.imported_run_id` (its id there).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from paperdag.engine.errors import PaperdagError
from paperdag.engine.records import RECORD_TAG, TERMINAL, log_in_batches

PARENT = "mlflow.parentRunId"


def source_uri(source: str) -> str:
    """A tracking URI as given, or the sqlite URI of an mlflow.db file or of a directory holding one."""
    if "://" in source:
        return source
    path = Path(source)
    db = path / "mlflow.db" if path.is_dir() else path
    if not db.is_file():
        raise PaperdagError(f"import-runs: {source} is neither a tracking URI nor an mlflow.db file (or a directory holding one)")
    return f"sqlite:///{db.resolve()}"


def import_runs(root: Path, source: str, pipelines: list[str] | None = None) -> dict[str, int]:
    """Copy the finished paperdag runs of `source` (experiments = pipelines; all, or those named) that the project's
    store lacks. Counts: imported, present (already here), unfinished (still RUNNING there: left)."""
    import logging

    logging.getLogger("alembic").setLevel(logging.WARNING)
    from mlflow.tracking import MlflowClient

    from paperdag.engine import tracking

    uri = source_uri(source)
    if uri == tracking.tracking_uri(root):
        raise PaperdagError(f"import-runs: {source} is this project's own MLflow store")
    src, dst = MlflowClient(tracking_uri=uri), tracking.client(root)
    counts = {"imported": 0, "present": 0, "unfinished": 0}
    for exp in src.search_experiments():
        if pipelines and exp.name not in pipelines:
            continue
        runs = [r for r in src.search_runs([exp.experiment_id], max_results=50_000) if r.data.tags.get(RECORD_TAG)]
        if not runs:
            continue
        into = tracking.experiment_id(dst, root, exp.name)
        here = {r.data.tags.get(RECORD_TAG): r.info.run_id for r in dst.search_runs([into], max_results=50_000)}
        by_id = {r.info.run_id: r for r in runs}
        # parents (flow runs) before their children, each group oldest first
        for run in sorted(runs, key=lambda r: (PARENT in r.data.tags, r.info.start_time or 0)):
            record = run.data.tags[RECORD_TAG]
            if record in here:
                counts["present"] += 1
            elif run.info.status not in TERMINAL:
                counts["unfinished"] += 1
            else:
                parent = by_id.get(run.data.tags.get(PARENT, ""))
                here[record] = _copy(src, dst, into, run, uri, here.get(parent.data.tags[RECORD_TAG]) if parent else None)
                counts["imported"] += 1
    return counts


def _copy(src: Any, dst: Any, experiment: str, run: Any, uri: str, parent: str | None) -> str:
    """One run into `experiment` of dst; its id there."""
    from mlflow.entities import Param, RunTag

    tags = {k: v for k, v in run.data.tags.items() if k != PARENT}
    tags.update({"paperdag.imported_from": uri, "paperdag.imported_run_id": run.info.run_id})
    if parent:
        tags[PARENT] = parent
    new = dst.create_run(experiment, start_time=run.info.start_time, run_name=run.info.run_name, tags=tags).info.run_id
    params = [Param(k, v) for k, v in sorted(run.data.params.items())]
    metrics = [m for key in sorted(run.data.metrics) for m in src.get_metric_history(run.info.run_id, key)]
    run_tags = [RunTag(k, v) for k, v in sorted(tags.items())]
    log_in_batches(dst, new, params, metrics, run_tags)
    if run.inputs and run.inputs.dataset_inputs:
        dst.log_inputs(new, datasets=list(run.inputs.dataset_inputs))
    if src.list_artifacts(run.info.run_id):
        with tempfile.TemporaryDirectory() as tmp:
            dst.log_artifacts(new, src.download_artifacts(run.info.run_id, "", tmp))
    dst.set_terminated(new, status=run.info.status, end_time=run.info.end_time)
    return new

"""Run records: a stage's MLflow run, written by the stage as a small file and logged to MLflow off its path.

Importing MLflow and opening its SQLite store costs a process 3-5 s, more than most stages' own work. So a stage
writes what its run will hold (tags, params, metrics, copies of its metric and plot files, status, start and end
times) as `.paperdag/runs/<id>.json`, atomically, and returns. MLflow gets it from a drainer:

- each finished stage (under `dvc repro` or `paperdag run` alike) starts a detached drainer
  (`python -m paperdag.engine.records ROOT`) unless one is alive; at most one drains at a time (a lock), and it loops
  until nothing is left to drain, so a record written while it works is not left behind. It then lingers
  (PAPERDAG_DRAIN_LINGER seconds, default 30) for the next stage's record, so that one drainer, and one MLflow import
  and store opening (~5 CPU-s), serves a whole `dvc repro` instead of one per stage;
- every command that reads MLflow drains first (`tracking.client`), waiting for a running drainer.

A record is removed only after MLflow has it (its run carries the record's id, so a drainer killed halfway resumes
the same run instead of logging a second one). While its owner runs, the record's `<id>.lock` is held exclusively
and touched every few seconds; a drainer that can take that lock knows the owner died without ending its run
(SIGKILL, a power cut) and logs the run KILLED, ending when the owner was last seen. The parent run of a `paperdag
run` is a record too; its children name it (PARENT_RECORD_TAG), and the first child drained creates it in MLflow
as RUNNING, so MLflow's UI nests them while the flow still runs.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

RUNS_DIR = ".paperdag/runs"
DRAIN_ENV = "PAPERDAG_DRAIN"  # "detached" (default): a finished stage starts a drainer; "off": records wait
LINGER_ENV = "PAPERDAG_DRAIN_LINGER"  # seconds a detached drainer waits for another record before it exits
ALIVE = "drainer.alive"  # held (flock) by the detached drainer for as long as it lives
RECORD_TAG = "paperdag.record_id"
PARENT_RECORD_TAG = "paperdag.parent_record_id"
HEARTBEAT_S = 5.0
TERMINAL = ("FINISHED", "FAILED", "KILLED")


def runs_dir(root: Path) -> Path:
    return Path(root) / RUNS_DIR


def _now_ms() -> int:
    return int(time.time() * 1000)


def _write_json(path: Path, doc: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc, default=str))
    os.replace(tmp, path)


class _Liveness:
    """An exclusive lock held (and touched) while its owner lives: the lock file's mtime is when it was last seen."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file = open(path, "w")  # noqa: SIM115 (held, locked, while the record is open)
        fcntl.flock(self._file, fcntl.LOCK_EX)
        self._file.write(str(os.getpid()))
        self._file.flush()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="paperdag-heartbeat", daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            try:
                os.utime(self.path)
            except OSError:
                return

    def release(self) -> None:
        self._stop.set()
        self.path.unlink(missing_ok=True)
        self._file.close()


def _owner_gone(lock_path: Path) -> float | None:
    """None while the lock's owner lives; else when it was last seen (epoch seconds)."""
    try:
        f = open(lock_path, "r+")  # noqa: SIM115 (closed below, after the lock probe)
    except FileNotFoundError:
        return time.time()
    with f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return None
        return os.fstat(f.fileno()).st_mtime


class Record:
    """The run record of one execution (a stage's, or a flow's parent run), on its owner's side."""

    def __init__(self, root: Path, experiment: str, run_name: str, tags: dict[str, str]) -> None:
        self.id = uuid.uuid4().hex
        self.dir = runs_dir(root)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path = self.dir / f"{self.id}.json"
        self.doc: dict[str, Any] = {
            "id": self.id, "experiment": experiment, "run_name": run_name, "pid": os.getpid(),
            "start_ms": _now_ms(), "end_ms": None, "status": "RUNNING",
            "tags": {RECORD_TAG: self.id, **tags}, "params": {}, "metrics": {}, "artifacts": [],
            "datasets": [],
        }
        self._alive = _Liveness(self.dir / f"{self.id}.lock")
        _write_json(self.path, self.doc)

    def set_tags(self, tags: dict[str, Any]) -> None:
        self.doc["tags"].update({k: str(v) for k, v in tags.items()})

    def log_params(self, params: dict[str, Any]) -> None:
        self.doc["params"].update({k: str(v) for k, v in flatten(params).items()})

    def log_metrics(self, metrics: dict[str, Any]) -> None:
        for k, v in flatten(metrics).items():
            if isinstance(v, (bool, int, float)):
                self.doc["metrics"][k.replace(":", "_")] = float(v)

    def log_dataset(self, path: str, md5: str, context: str, atype: str, kind: str, info: dict[str, str]) -> None:
        """An input ("input": another stage's output; "source": a file no stage writes) or an output ("output") that
        the drainer logs as an MLflow dataset: `info` may hold its "schema" and "profile" (artifacts.describe)."""
        self.doc["datasets"].append({"path": path, "md5": md5, "context": context, "type": atype, "kind": kind, **info})

    def attach(self, path: Path, subdir: str) -> None:
        """Keep a copy of a small file (a metric or plot) for the run: the original may be rewritten before draining."""
        dest = self.dir / self.id / subdir / Path(path).name
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, dest)
        self.doc["artifacts"].append([f"{self.id}/{subdir}/{dest.name}", subdir])

    def attach_text(self, text: str, name: str) -> None:
        dest = self.dir / self.id / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(text)
        self.doc["artifacts"].append([f"{self.id}/{name}", None])

    def end(self, status: str) -> None:
        """Write the record's final state and let go of its liveness lock."""
        self.doc.update(status=status, end_ms=_now_ms())
        _write_json(self.path, self.doc)
        self._alive.release()


def pending(root: Path) -> list[Path]:
    d = runs_dir(root)
    return sorted(d.glob("*.json")) if d.is_dir() else []


def flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mappings (a matrix item too) as dotted keys."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, Mapping):
            out.update(flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


_clients: dict[tuple[Path, str], Any] = {}  # (root, tracking URI) -> MLflow client: a process that drains again (the drainer) opens it once


def drain(root: Path, wait: bool = True) -> int | None:
    """Log every finished (or dead) record to MLflow and remove it; return how many were logged.

    With `wait`, wait for a drainer that is draining (so that MLflow's store is settled afterwards, tables included);
    without, return None at once if one is."""
    root = Path(root)
    d = runs_dir(root)
    if not d.is_dir():
        return 0
    logged = 0
    with open(d / "drain.lock", "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            return None
        client = None
        for path in pending(root):
            try:
                doc = json.loads(path.read_text())
            except FileNotFoundError:
                continue
            except ValueError as e:  # records are written by rename, so this is not a torn write: keep it, say so
                bad = path.with_suffix(".unreadable")
                os.replace(path, bad)
                print(f"[paperdag] run record {path} is not JSON ({e}); kept as {bad}", file=sys.stderr)
                continue
            if doc.get("status") not in TERMINAL:
                last_seen = _owner_gone(d / f"{doc['id']}.lock")
                if last_seen is None:
                    continue  # its stage is still running
                if not path.exists():
                    continue  # it ended normally between our two reads
                if json.loads(path.read_text()).get("status") in TERMINAL:
                    doc = json.loads(path.read_text())
                else:
                    doc.update(status="KILLED", end_ms=int(last_seen * 1000))
                    doc.setdefault("tags", {})["paperdag.error"] = (
                        f"killed: process {doc.get('pid')} stopped without ending its run; last seen "
                        f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(last_seen))}")
            if client is None:
                from paperdag.engine import tracking

                where = (root, tracking.tracking_uri(root))
                client = _clients.get(where) or _clients.setdefault(where, tracking.client(root, drain=False))
            _log(client, root, doc)
            path.unlink(missing_ok=True)
            shutil.rmtree(d / doc["id"], ignore_errors=True)
            (d / f"{doc['id']}.lock").unlink(missing_ok=True)
            logged += 1
        if client is not None and _store_mtime(root) is not None and not _index_current(root):
            # MLflow is open here already: the index is made whole now (the first drain of a repository creates
            # the store), not by the next reader, which would import MLflow for it (3-5 s)
            _rebuild_index(root, client)
    return logged


def _log(client: Any, root: Path, doc: dict[str, Any]) -> str:
    """Log one record to MLflow (its run resumed where a killed drainer left it); return the MLflow run id."""
    from mlflow.entities import Metric, Param, RunTag

    from paperdag.engine import tracking

    exp = tracking.experiment_id(client, root, doc["experiment"])
    indexed = _index_current(root)  # else the next reader rebuilds it from MLflow: appending would not make it whole
    found = client.search_runs([exp], filter_string=f"tags.`{RECORD_TAG}` = '{doc['id']}'", max_results=1)
    if found and found[0].info.status in TERMINAL:
        return found[0].info.run_id  # logged before a crash that left the record behind
    tags = {k: str(v)[:5000] for k, v in doc["tags"].items()}
    parent = tags.get(PARENT_RECORD_TAG)
    if parent:
        tags["mlflow.parentRunId"] = _parent_run(client, root, parent, exp)
    run_id = found[0].info.run_id if found else client.create_run(
        exp, start_time=doc["start_ms"], run_name=doc["run_name"], tags=tags).info.run_id
    if doc["status"] not in TERMINAL:
        return run_id  # a parent created early for its children: its own record completes it later
    params = [Param(k, v[:6000]) for k, v in sorted(doc["params"].items())]
    when = doc["end_ms"] or doc["start_ms"]
    metrics = [Metric(k, v, when, 0) for k, v in sorted(doc["metrics"].items())]
    run_tags = [RunTag(k, v) for k, v in tags.items()]
    log_in_batches(client, run_id, params, metrics, run_tags)
    _log_datasets(client, run_id, doc.get("datasets", []), resumed=bool(found))
    d = runs_dir(root)
    for rel, subdir in doc["artifacts"]:
        if (d / rel).exists():
            client.log_artifact(run_id, str(d / rel), subdir)
    client.set_terminated(run_id, status=doc["status"], end_time=doc["end_ms"])
    if indexed:
        _index_append(root, [index_entry(run_id, exp, doc["status"], tags, doc["start_ms"], doc["end_ms"])])
    return run_id


def log_in_batches(client: Any, run_id: str, params: list, metrics: list, tags: list, size: int = 100) -> None:
    """MLflow's log_batch over lists of any length (its REST API caps each call's params, metrics and tags)."""
    for i in range(0, max(len(params), len(metrics), len(tags)), size):
        client.log_batch(run_id, params=params[i:i + size], metrics=metrics[i:i + size], tags=tags[i:i + size])


def _log_datasets(client: Any, run_id: str, datasets: list[dict[str, str]], resumed: bool) -> None:
    """The record's inputs and outputs as the run's MLflow datasets (name: repo-relative path; digest: DVC's md5;
    context tag: input, source or output), those the run already has left out (a drainer killed after logging them).

    Outputs are datasets too, tagged "output": MLflow 3's log_outputs takes only LoggedModels, and a stage's outputs
    are files DVC keeps (tables, arrays, a saved model directory), not models logged to MLflow. (MLflow's SQL store
    skips a (dataset, run) pair it has by itself; the check keeps that so on whatever store the URI names.)"""
    from mlflow.entities import Dataset, DatasetInput, InputTag

    have = {(i.dataset.name, i.dataset.digest) for i in client.get_run(run_id).inputs.dataset_inputs} if resumed else set()
    todo = [DatasetInput(
        Dataset(d["path"], d["md5"], "local", json.dumps({"uri": d["path"]}), d.get("schema"), d.get("profile")),
        [InputTag("mlflow.data.context", d["context"]), InputTag("paperdag.type", d["type"]),
         InputTag("paperdag.kind", d["kind"])],
    ) for d in datasets if (d["path"], d["md5"]) not in have]
    if todo:
        client.log_inputs(run_id, datasets=todo)


def _parent_run(client: Any, root: Path, record_id: str, experiment_id: str) -> str:
    """The MLflow run of a parent record (same experiment): found by its record id, or created (RUNNING) from its
    pending record."""
    try:
        doc = json.loads((runs_dir(root) / f"{record_id}.json").read_text())
    except FileNotFoundError:
        found = client.search_runs([experiment_id], filter_string=f"tags.`{RECORD_TAG}` = '{record_id}'", max_results=1)
        return found[0].info.run_id if found else ""
    return _log(client, root, {**doc, "status": "RUNNING"})


# The run index: what the drainer logged, one line per run, written after MLflow has it. `paperdag lineage` and
# `paperdag audit` read it instead of importing MLflow and opening its store (3-5 s); when MLflow's store changed
# after it (a run deleted in MLflow's UI, runs logged by another tool, an index lost), it is rebuilt from MLflow. The
# file's name carries the entry format: an index an older paperdag wrote (fewer tags) is not read but rebuilt.
INDEX = ".paperdag/run-index.v3.jsonl"
_INDEXED_TAGS = ("git.commit", "git.dirty", "mlflow.parentRunId", "prefect.flow_run_id", "paperdag.pipeline",
                 "paperdag.stage", "paperdag.params")
# lineage (outs), audit (deps, numerics, environment) and the verify runs' results (verify.py)
_INDEXED_PREFIXES = ("paperdag.out.", "paperdag.dep.", "paperdag.verify", "numerics.", "env.")


def index_entry(run_id: str, experiment_id: str, status: str, tags: dict[str, str], start_ms: int | None,
                end_ms: int | None) -> dict[str, Any]:
    keep = {k: v for k, v in tags.items() if k.startswith(_INDEXED_PREFIXES) or k in _INDEXED_TAGS}
    return {"run_id": run_id, "experiment": experiment_id, "status": status, "start_ms": start_ms or 0,
            "end_ms": end_ms, "tags": keep}


def _index_append(root: Path, entries: list[dict[str, Any]]) -> None:
    with open(Path(root) / INDEX, "a") as f:
        f.write("".join(json.dumps(e) + "\n" for e in entries))


def _store_mtime(root: Path) -> int | None:
    """When the default SQLite store last changed (None: another store, which cannot be checked by a stat)."""
    from paperdag.engine.tracking import tracking_uri

    if tracking_uri(root) != f"sqlite:///{Path(root).resolve() / 'mlflow.db'}":
        return None
    files = [Path(root) / n for n in ("mlflow.db", "mlflow.db-wal")]
    return max((f.stat().st_mtime_ns for f in files if f.exists()), default=0)


def _index_current(root: Path) -> bool:
    """Whether the index holds every run of the store: written after the store's last change."""
    changed = _store_mtime(root)
    index = Path(root) / INDEX
    return changed is not None and index.exists() and index.stat().st_mtime_ns >= changed


def indexed_runs(root: Path) -> list[dict[str, Any]]:
    """Every run MLflow holds, as index entries: from the index when it is current, else rebuilt from MLflow."""
    root = Path(root)
    drain(root)
    if _store_mtime(root) == 0:  # the default store does not exist (a fresh clone): no run, and none is created
        return []
    if _index_current(root):
        return [json.loads(line) for line in (root / INDEX).read_text().splitlines() if line.strip()]
    from paperdag.engine.tracking import client

    return _rebuild_index(root, client(root, drain=False))


def _rebuild_index(root: Path, client: Any) -> list[dict[str, Any]]:
    """Every run of MLflow's store as index entries, written as the index (atomically) where the store can be
    checked by a stat; returned either way."""
    changed = _store_mtime(root)  # before reading: the index is dated by it, so a run logged meanwhile (by
    # another tool) leaves the index older than the store, to be rebuilt, never current and short of that run
    exps = [e.experiment_id for e in client.search_experiments()]
    found = client.search_runs(exps, max_results=50_000) if exps else []
    entries = [index_entry(r.info.run_id, r.info.experiment_id, r.info.status, r.data.tags, r.info.start_time,
                           r.info.end_time) for r in found]
    if changed is not None:
        index = Path(root) / INDEX
        index.parent.mkdir(parents=True, exist_ok=True)
        tmp = index.with_name(f".{index.name}.{os.getpid()}.tmp")
        tmp.write_text("".join(json.dumps(e) + "\n" for e in entries))
        os.utime(tmp, ns=(changed, changed))
        os.replace(tmp, index)
    return entries


def drainer_alive(root: Path) -> bool:
    """Whether a detached drainer lives (it holds ALIVE while it drains or lingers)."""
    try:
        with open(runs_dir(root) / ALIVE, "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return False
    except BlockingIOError:
        return True


def start_drainer(root: Path) -> None:
    """Start a detached drainer (unless DRAIN_ENV is "off", or one is alive: it will log this process's record); it
    outlives this process."""
    if os.environ.get(DRAIN_ENV, "detached") != "detached" or drainer_alive(root):
        return
    log = open(runs_dir(root) / "drain.log", "a")  # noqa: SIM115 (the detached drainer writes it)
    subprocess.Popen([sys.executable, "-m", "paperdag.engine.records", str(Path(root).resolve())], cwd=root,
                     stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True, close_fds=True)
    log.close()


def _ready(root: Path) -> bool:
    """Whether a record could be drained now (finished, or its owner gone)."""
    for path in pending(root):
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            return True
        if doc.get("status") in TERMINAL or _owner_gone(path.with_suffix(".lock")) is not None:
            return True
    return False


def _main() -> None:
    """The detached drainer: drain until nothing is ready, then linger for the next record. If another drainer is
    alive, leave it to that one. After letting go of its liveness lock it checks once more: a stage that saw it alive
    (and so started none) wrote its record before, and that record is not left behind."""
    root = Path(sys.argv[1])
    linger = float(os.environ.get(LINGER_ENV, "30"))
    with open(runs_dir(root) / ALIVE, "a") as alive:
        try:
            fcntl.flock(alive, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return
        last = time.monotonic()
        while True:
            if _ready(root):
                if drain(root, wait=False) is not None:  # None: a reader drains now; look again shortly
                    last = time.monotonic()
            elif time.monotonic() - last > linger:
                break
            time.sleep(0.2)
    while _ready(root):
        if drain(root, wait=False) is None:
            return


if __name__ == "__main__":
    _main()

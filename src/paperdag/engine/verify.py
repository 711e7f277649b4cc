"""`paperdag verify`: rerun stages in a scratch copy of the workspace and compare every output with the current one,
or (`--against-lock`) with the md5 dvc.lock records, which is what a fresh clone on another machine can check.

Outputs are reproduced bit for bit, or within a stated relative tolerance for floats (tensors, JSON numbers,
float table columns). A stage's `volatile` patterns ("<output>" or "<output>.<key path or column>", fnmatch)
name values that legitimately differ between runs (wall times); they are listed, not compared.

Each invocation is one MLflow run (through a run record) in the experiment VERIFY_EXPERIMENT: per output checked, a
tag VERIFY_TAG<path> with its status (STATUSES) and VERIFY_MD5_TAG<path> with the md5 it checked (the workspace's,
or dvc.lock's with --against-lock); `paperdag audit` reads them. One experiment for every pipeline's checks, not the
pipeline's own: there every run is one execution of a stage (what lineage and the report count), and a verify of
one stage may check upstream stages of other pipelines.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

from paperdag.engine import artifacts, dvc, machine, stable
from paperdag.engine.errors import PaperdagError
from paperdag.engine.fsutil import dvc_md5
from paperdag.engine.params import load_params
from paperdag.engine.records import DRAIN_ENV
from paperdag.engine.spec import Artifact, Project, Stage, load_project, param_paths
from paperdag.engine.tracking import FLOW_RUN_ENV, PARENT_RUN_ENV


def _stages(root: Path, target: str) -> list[Stage]:
    project = load_project(root)
    if ":" in target:
        return [project.stage(target)]
    return project.order(project.pipeline(target).name)


def _workspace_copy(root: Path, scratch: Path, stages: list[Stage]) -> None:
    r = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=root, capture_output=True, text=True)
    if r.returncode != 0:
        raise PaperdagError(f"verify needs a git repository at {root}: {r.stderr.strip()}")
    for rel in filter(None, r.stdout.split("\0")):
        src = root / rel
        if src.is_file():
            (scratch / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, scratch / rel)
    produced = {a.path for s in stages for a in s.outputs.values()}
    params = load_params(root)
    for s in stages:
        files = [path for key in s.path_params for path in param_paths(params, key)]
        for path in [*s.dep_paths, *files]:
            src, dst = root / path, scratch / path
            if path not in produced and not dst.exists():  # an input from outside the verified set: the workspace's
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copytree(src, dst) if src.is_dir() else shutil.copy2(src, dst)


VERIFY_EXPERIMENT = "paperdag.verify"
VERIFY_TAG, VERIFY_MD5_TAG = "paperdag.verify.", "paperdag.verify_md5."
STATUSES = ("bit-identical", "within tolerance", "volatile, not compared", "differs")


def status(row: dict[str, Any]) -> str:
    """One of STATUSES for a result row (its `how` says more)."""
    if not row["reproduced"]:
        return "differs"
    if row["how"].startswith("bit-identical"):
        return "bit-identical"
    return "volatile, not compared" if row["how"].startswith("volatile output") else "within tolerance"


def verify_recorded(root: Path, target: str, against_lock: bool = False, rtol: float = 1e-6,
                    workers: int | None = None) -> list[dict[str, Any]]:
    """`verify` (or `verify_against_lock`) as one MLflow run through a run record (see the module docstring); a
    verify that fails to rerun a stage ends its run FAILED."""
    from paperdag.engine import records, tracking

    root = Path(root).resolve()
    mode = "against-lock" if against_lock else "workspace"
    record = records.Record(root, VERIFY_EXPERIMENT, f"verify{' --against-lock' if against_lock else ''} {target}", {
        "paperdag.pipeline": target.partition(":")[0], "paperdag.verify_target": target, "paperdag.verify_mode": mode,
        **tracking.git_info(root)})
    try:
        try:
            results = verify_against_lock(root, target, workers) if against_lock else verify(root, target, rtol, workers)
        except BaseException as e:
            record.set_tags({"paperdag.error": f"{type(e).__name__}: {e}"})
            record.end("KILLED" if isinstance(e, KeyboardInterrupt) else "FAILED")
            raise
        for r in results:
            record.set_tags({f"{VERIFY_TAG}{r['path']}": r["status"], f"{VERIFY_MD5_TAG}{r['path']}": r["checked_md5"]})
        record.set_tags(tracking.environment())
        record.log_metrics({"paperdag.verify_outputs": len(results),
                            "paperdag.verify_reproduced": sum(r["reproduced"] for r in results)})
        record.attach_text(json.dumps(results, indent=2), "verify.json")
        record.end("FINISHED")
    finally:
        records.start_drainer(root)
    return results


def verify(root: Path, target: str, rtol: float = 1e-6, workers: int | None = None) -> list[dict[str, Any]]:
    """Rows {stage, output, path, checked_md5 (the workspace's), reproduced, how, status}."""
    root = Path(root).resolve()
    stages = _stages(root, target)
    for s in stages:
        for a in s.outputs.values():
            if not (root / a.path).exists():
                raise PaperdagError(f"{a.path} ({s.address}) does not exist: run the pipeline before verifying it")
    results: list[dict[str, Any]] = []

    def check(s: Stage, scratch: Path) -> None:
        for a in s.outputs.values():
            ours = root / a.path
            row = {"stage": s.address, "output": a.name, "path": a.path, "checked_md5": dvc_md5(ours),
                   **compare(a, ours, scratch / a.path, s.volatile, rtol)}
            results.append({**row, "status": status(row)})

    _rerun(root, stages, check, workers)
    order = {s.address: i for i, s in enumerate(stages)}
    return sorted(results, key=lambda r: order[r["stage"]])


def _rerun(root: Path, stages: list[Stage], check: Any, workers: int | None = None) -> None:
    """Run `stages` in a scratch copy of the workspace, independent ones at once (`workers`, default: CPU count), each
    after the stages whose outputs it reads; call check(stage, scratch) as each finishes."""
    workers = max(1, workers or os.cpu_count() or 1)
    writer = {a.path: t.address for t in stages for a in t.outputs.values()}
    needs = {s.address: {writer[p] for p in s.dep_paths if p in writer} for s in stages}
    with tempfile.TemporaryDirectory(prefix="paperdag-verify-") as tmp:
        scratch = Path(tmp)
        _workspace_copy(root, scratch, stages)
        # the reruns' MLflow runs would be thrown away with the scratch workspace: their records are never drained
        env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{scratch / 'mlflow.db'}", "PAPERDAG_ROOT": str(scratch),
               DRAIN_ENV: "off"}
        for k in (PARENT_RUN_ENV, FLOW_RUN_ENV):
            env.pop(k, None)

        def run_one(s: Stage) -> None:
            r = subprocess.run([sys.executable, "-m", "paperdag", "stage", s.address], cwd=scratch, env=env)
            if r.returncode != 0:
                raise PaperdagError(f"verify: stage {s.address} failed in the scratch workspace (exit {r.returncode})")

        pending, running, done = list(stages), dict[Future[None], Stage](), set[str]()
        with ThreadPoolExecutor(workers) as pool:
            while pending or running:
                for s in [s for s in pending if needs[s.address] <= done][: workers - len(running)]:
                    pending.remove(s)
                    running[pool.submit(run_one, s)] = s
                finished, _ = wait(running, return_when=FIRST_COMPLETED)
                for f in finished:
                    s = running.pop(f)
                    f.result()
                    check(s, scratch)
                    done.add(s.address)


def _lock_entries(root: Path) -> dict[str, dict[str, Any]]:
    return dvc.lock(root).get("stages") or {}


def _lock_drift(project: Project, stages: list[Stage], lock: dict[str, Any], produced: set[str]) -> dict[str, str]:
    """Stages that dvc.lock does not describe as declared now (command, params or code changed), with why. Data
    inputs and outputs absent from this checkout (a fresh clone) are not drift: the rerun makes them."""
    drift = {s.dvc_name: "not in dvc.lock" for s in stages if s.dvc_name not in lock}
    locked = [s for s in stages if s.dvc_name in lock]
    status = dvc.status(project.root, [project.dvc_file(s) for s in locked]) if locked else {}
    for name in {s.dvc_name for s in locked} & set(status):
        for change in status[name]:
            if change == "changed command":
                drift[name] = "its command changed"
            elif isinstance(change, dict):
                for path, state in (change.get("changed deps") or {}).items():
                    if isinstance(state, dict):
                        drift[name] = f"params changed: {', '.join(sorted(state))}"
                    elif path not in produced:
                        drift[name] = f"{path} {state}"
    return drift


def _locked_copy(root: Path, path: str, md5: str) -> Path | None:
    """The locked version of an output, where this checkout has it: the workspace file or DVC's local cache."""
    if (root / path).exists() and dvc_md5(root / path) == md5:
        return root / path
    cached = root / ".dvc" / "cache" / "files" / "md5" / md5[:2] / md5[2:]
    return cached if cached.is_file() and not md5.endswith(".dir") else None


def verify_against_lock(root: Path, target: str, workers: int | None = None) -> list[dict[str, Any]]:
    """Rerun in a scratch workspace what a fresh clone would (every stage of the target whose inputs this checkout
    does not hold at their locked md5) and compare each output with the md5 dvc.lock records for it. Rows {stage,
    output, path, locked_md5, md5 (the rerun's), checked_md5 (dvc.lock's), reproduced, how, status}."""
    root = Path(root).resolve()
    project = load_project(root)
    lock = _lock_entries(root)
    locked_md5 = dvc.locked_outputs(root)
    wanted = {s.address for s in _stages(root, target)}
    todo = list(wanted)
    while todo:  # an input that is not here at its locked md5 is rebuilt from upstream, as a fresh clone would
        s = project.stage(todo.pop())
        for path in s.dep_paths:
            have = (root / path).exists() and dvc_md5(root / path) == locked_md5.get(path)
            producer = project.producers[path].address
            if not have and producer not in wanted:
                wanted.add(producer)
                todo.append(producer)
    stages = [s for s in project.order() if s.address in wanted]
    produced = {a.path for s in project.stages.values() for a in s.outputs.values()}
    upstream = {u.address for a in wanted for u in project.upstream(a)}  # reused inputs must be locked as declared too
    drift = _lock_drift(project, [s for s in project.order() if s.address in upstream], lock, produced)
    if drift:
        why = "; ".join(f"{n}: {w}" for n, w in sorted(drift.items()))
        raise PaperdagError(f"verify --against-lock: dvc.lock does not describe the current declaration ({why}); "
                            "run those stages (dvc repro / paperdag run) and commit dvc.lock first")
    stable_lock = stable.load(root)
    results: list[dict[str, Any]] = []

    here = machine.this_id()

    def check(s: Stage, scratch: Path) -> None:
        made = stable.made_on(root, s.address, {a.path: locked_md5.get(a.path, "") for a in s.outputs.values()})
        for a in s.outputs.values():
            want = locked_md5.get(a.path)
            got = dvc_md5(scratch / a.path)
            row: dict[str, Any] = {"stage": s.address, "output": a.name, "path": a.path, "locked_md5": want, "md5": got}
            if got == want:
                row.update(reproduced=True, how="bit-identical to dvc.lock")
            elif _volatile(s.volatile, a.name):
                row.update(reproduced=True, how="volatile output, not compared")
            elif (recorded := stable_lock.get(a.path, {}).get(want or "")) is not None:
                mine = stable.digest(a, scratch / a.path, s.volatile)
                same = mine == recorded
                row.update(reproduced=same, how="identical to dvc.lock's version except its volatile values" if same
                           else "differs from dvc.lock beyond its volatile values")
            else:
                row.update(reproduced=False, how="differs from dvc.lock")
            if not row["reproduced"] and (copy := _locked_copy(root, a.path, want or "")) is not None:
                row["how"] += ": " + compare(a, copy, scratch / a.path, s.volatile, 0.0)["how"]
            results.append({**row, "checked_md5": want or "", "status": status(row), "recorded_on": machine.summary(made),
                            "same_machine": None if made is None else made["id"] == here})

    _rerun(root, stages, check, workers)
    order = {s.address: i for i, s in enumerate(stages)}
    return sorted(results, key=lambda r: order[r["stage"]])


_volatile = stable.volatile


def compare(a: Artifact, ours: Path, theirs: Path, volatile: tuple[str, ...], rtol: float) -> dict[str, Any]:
    """Two versions of an output: bit-identical, a volatile output, or compared by its artifact type."""
    t = artifacts.get(a.type)
    if t.md5(ours) == t.md5(theirs):
        return {"reproduced": True, "how": "bit-identical"}
    if _volatile(volatile, a.name):
        return {"reproduced": True, "how": "volatile output, not compared"}
    found = t.compare(ours, theirs, a.name, volatile, rtol)
    if found.diffs:
        return {"reproduced": False, "how": "differs: " + "; ".join(found.diffs[:5])}
    how = f"equal within rtol={rtol}"
    if found.skipped:
        how += f" (volatile, not compared: {', '.join(found.skipped[:5])})"
    return {"reproduced": True, "how": how}


def format_results(results: list[dict[str, Any]]) -> str:
    width = max((len(f"{r['stage']} {r['path']}") for r in results), default=10)
    lines = [f"{'OK ' if r['reproduced'] else 'BAD'} {(r['stage'] + ' ' + r['path']).ljust(width)}  {r['how']}" for r in results]
    n_ok = sum(r["reproduced"] for r in results)
    lines.append(f"{n_ok}/{len(results)} outputs reproduced")
    where = {"recorded on this machine": [r for r in results if r.get("same_machine") is True],
             "recorded on another machine": [r for r in results if r.get("same_machine") is False],
             "recorded where paperdag.lock does not say": [r for r in results if "recorded_on" in r and r["same_machine"] is None]}
    for label, rows in where.items():
        if rows:
            machines = "; ".join(sorted({r["recorded_on"] for r in rows}))
            lines.append(f"{label}: {sum(r['reproduced'] for r in rows)}/{len(rows)} reproduced"
                         + (f" ({machines}; here: {machine.summary(machine.describe())})" if rows[0]["same_machine"] is False else ""))
    return "\n".join(lines)

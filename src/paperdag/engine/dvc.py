"""DVC through its CLI with cwd=repo (its Python API depends on the process-wide working directory), in dvcmain.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path, PurePosixPath

from paperdag.engine.errors import PaperdagError
from paperdag.engine.fsutil import load_yaml


def dvc(root: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DVC_NO_ANALYTICS": "1"}
    r = subprocess.run([sys.executable, "-m", "paperdag.engine.dvcmain", *args], cwd=root, capture_output=True,
                       text=True, env=env)
    if check and r.returncode != 0:
        msg = (r.stderr or r.stdout).strip().splitlines()
        raise PaperdagError(f"`dvc {' '.join(args)}` failed: {msg[-1] if msg else r.returncode}")
    return r


def changed_stages(root: Path, dvc_names: list[str], files: list[str] | None = None) -> set[str]:
    """Stages whose own deps, params, command or outs differ from dvc.lock (descendants are not included). `files`:
    the dvc.yaml files that declare them, when they are not all (DVC then reads only those)."""
    if not dvc_names:
        return set()
    return set(status(root, files)) & set(dvc_names)


def status(root: Path, files: list[str] | None = None) -> dict[str, list]:
    """`dvc status --json` of every stage (of every dvc.yaml, or of the dvc.yaml `files`), by stage name: what DVC
    finds changed in each stage itself (its descendants are not listed until it reruns), e.g. [{"changed deps":
    {"stages/m.py": "modified", "params.yaml": {"m.train": "modified"}}}, {"changed outs": {"data/m/x.npy":
    "deleted"}}, "changed command"]."""
    # whole files as targets, never stage names: DVC rebuilds its index per stage-name target, so `dvc status T1 ..
    # T64` cost 8x the CPU of a plain `dvc status` here (61 s vs 7.5 s); a file it reads alone (one pipeline's
    # dvc.yaml and the root's: 1.9 s vs 8-9 s for all 13 files on this repository)
    targets = sorted(set(files or []))
    if "dvc.repo" in sys.modules:  # DVC's API is imported here already (a served `paperdag run`): no process
        from dvc.exceptions import DvcException

        from paperdag.engine import dvcmain

        try:
            doc = dvcmain.status(str(root), targets)
        except DvcException as e:
            raise PaperdagError(f"`dvc status --json` failed: {e}") from e
    else:
        doc = json.loads(dvc(root, "status", "--json", *targets).stdout or "{}")
    # a stage of a pipeline's dvc.yaml is listed as `pipelines/<p>/dvc.yaml:<name>`
    return {name.split(":")[-1]: changes for name, changes in doc.items()}


def commit(root: Path, target: str) -> None:
    """Record a finished stage (`<its dvc.yaml>:<its name>`, Project.dvc_target) in its dvc.lock and the cache (one
    writer at a time: DVC's repo lock), in this process (dvcmain.commit: DVC is imported once per process, not once
    per stage)."""
    from dvc.exceptions import DvcException

    from paperdag.engine import dvcmain

    try:
        dvcmain.commit(str(root), target)
    except DvcException as e:
        raise PaperdagError(f"`dvc commit --force {target}` failed: {e}") from e


def _whole(doc: object) -> bool:
    """A dvc.lock document as DVC writes it: stages -> mappings whose deps and outs are lists of mappings with a path
    (a read that caught the file half-written has None or a bare string where an entry was being written)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("stages") or {}, dict):
        return False
    return all(isinstance(e, dict) and all(isinstance(o, dict) and "path" in o for key in ("deps", "outs") for o in e.get(key) or [])
               for e in (doc.get("stages") or {}).values())


def lock_files(root: Path) -> list[Path]:
    """The project's dvc.lock files: the root's, then each pipeline's (pipelines/<p>/dvc.lock, beside its dvc.yaml)."""
    root = Path(root)
    return [p for p in [root / "dvc.lock", *sorted(root.glob("pipelines/*/dvc.lock"))] if p.exists()]


def lock_of(dvc_yaml: str) -> str:
    """The dvc.lock DVC keeps beside a dvc.yaml (paths from the repository root)."""
    return str(PurePosixPath(dvc_yaml).with_name("dvc.lock"))


def lock(root: Path, attempts: int = 8, files: list[Path] | None = None) -> dict:
    """Every dvc.lock of the project (or `files`), parsed, as one: {"stages": {name: entry}}, as DVC reads them: an
    entry counts only where the dvc.yaml beside its lock declares the stage (a stage that moved to another dvc.yaml
    may leave its old entry behind; a lock with no dvc.yaml beside it counts whole). DVC rewrites a lock in place,
    not atomically, whenever a stage is recorded, so a reader beside a running `paperdag run` or `dvc repro` can
    catch it half-written: such a read (a YAML error or a malformed entry) is retried, and only a file that stays
    unreadable is an error."""
    stages: dict = {}
    for path in lock_files(root) if files is None else files:
        entries = read_lock_file(path, attempts).get("stages") or {}
        declared = _declared(path.with_name("dvc.yaml"))
        stages |= {name: e for name, e in entries.items()
                   if declared is None or name in declared or name.partition("@")[0] in declared}
    return {"stages": stages} if stages else {}


def _declared(dvc_yaml: Path) -> set[str] | None:
    """The stage names a dvc.yaml declares (a matrix by its base name); None where there is none."""
    import yaml

    try:
        return set((load_yaml(dvc_yaml.read_text()) or {}).get("stages") or {})
    except FileNotFoundError:
        return None
    except yaml.YAMLError as e:
        raise PaperdagError(f"{dvc_yaml}: not valid YAML ({e}): run `paperdag render`") from e


def read_lock_file(path: Path, attempts: int = 8) -> dict:
    """One dvc.lock as it is on disk (every entry, declared or not), read again while caught half-written."""
    import yaml

    for attempt in range(attempts):
        if not path.exists():
            return {}
        try:
            doc = load_yaml(path.read_text()) or {}
        except yaml.YAMLError:
            doc = None
        if isinstance(doc, dict) and _whole(doc):
            return doc
        time.sleep(0.02 * 2**attempt)  # 20 ms .. 2.5 s: DVC writes the file in milliseconds
    raise PaperdagError(f"{path}: not a readable dvc.lock after {attempts} reads (half-written, or edited by hand?): "
                        "restore it from git or rerun the stage")


def locked_outputs(root: Path, files: list[Path] | None = None) -> dict[str, str]:
    """Output path -> the md5 dvc.lock records for it (in `files`, default every dvc.lock)."""
    return {o["path"]: o.get("md5") for e in (lock(root, files=files).get("stages") or {}).values()
            for o in e.get("outs") or []}

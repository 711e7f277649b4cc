"""paperdag.lock: what dvc.lock cannot say about outputs that hold volatile values.

A metrics file that records a wall time never has the same md5 twice, so dvc.lock's md5 alone cannot tell a fresh
clone whether its rerun reproduced everything else. For every output with declared `volatile` values (JSON keys,
Parquet columns, keys of every JSONL row), `paperdag stage` also records the md5 of its content with those values left out, keyed by the
output's full md5, in paperdag.lock (committed beside dvc.lock). `paperdag verify --against-lock` compares a
rerun's stable md5 with the one recorded for the md5 dvc.lock holds.

It also records, for every stage execution (keyed by its outputs' md5s), the machine it ran on (machine.py), so that
a fresh clone's verify says whether an output was made on the CPU it reruns on or on another one.
"""

from __future__ import annotations

import fcntl
import hashlib
from pathlib import Path

import yaml

from paperdag.engine import artifacts, dvc, machine
from paperdag.engine.fsutil import atomic_write_text, load_yaml
from paperdag.engine.spec import Artifact

LOCK_FILE = "paperdag.lock"
_KEEP = 4  # versions remembered per output (a stage run by hand and not yet in dvc.lock does not evict the locked one)
_HEADER = ("# Written by `paperdag stage`; commit it with dvc.lock. outputs: for each output with declared volatile values,\n"
           "# the md5 of its full content (as in dvc.lock) -> the md5 of its content without the volatile values.\n"
           "# made_on: for each stage, the digest of its outputs' md5s -> the machine that made them (machines:).\n")


volatile = artifacts.volatile


def applies(a: Artifact, patterns: tuple[str, ...]) -> bool:
    """Whether some pattern names a value inside the output (not the whole output) of a type that holds values."""
    inside = any(p.startswith(a.name + ".") for p in patterns)
    return artifacts.get(a.type).has_values and inside and not volatile(patterns, a.name)


def digest(a: Artifact, path: Path, patterns: tuple[str, ...]) -> str | None:
    """md5 of the output without its volatile values; None when no pattern names a value inside it."""
    if not applies(a, patterns):
        return None
    return hashlib.md5(artifacts.get(a.type).stable_blob(Path(path), a.name, patterns)).hexdigest()


def _doc(root: Path) -> dict:
    path = Path(root) / LOCK_FILE
    return (load_yaml(path.read_text()) or {}) if path.exists() else {}


def load(root: Path) -> dict[str, dict[str, str]]:
    """output path -> {md5: stable md5}."""
    return {str(k): dict(v) for k, v in (_doc(root).get("outputs") or {}).items()}


def outputs_key(out_md5: dict[str, str]) -> str:
    """One stage execution, named by what it wrote: the md5 of its outputs' (path, md5) pairs."""
    return hashlib.md5("\n".join(f"{p} {m}" for p, m in sorted(out_md5.items())).encode()).hexdigest()


def made_on(root: Path, address: str, out_md5: dict[str, str]) -> dict | None:
    """The machine recorded for the execution of `address` that wrote these outputs; None when none was recorded
    (an execution older than machine records, or one this checkout never saw)."""
    doc = _doc(root)
    ident = ((doc.get("made_on") or {}).get(address) or {}).get(outputs_key(out_md5))
    return {"id": ident, **((doc.get("machines") or {}).get(ident) or {})} if ident else None


def _keep(versions: dict[str, str], locked: str | None) -> dict[str, str]:
    keep = set(list(versions)[-_KEEP:]) | {locked}  # dvc.lock's version is never dropped
    return {k: v for k, v in versions.items() if k in keep}


def record(root: Path, entries: dict[str, tuple[str, str]], address: str | None = None,
           out_md5: dict[str, str] | None = None, lock_file: str | None = None) -> None:
    """Add (output path -> (md5, stable md5)) to paperdag.lock, and the machine that ran `address` and wrote
    `out_md5`; concurrent stages take turns. `lock_file`: the dvc.lock that records the stage (default: read them
    all), whose versions are kept."""
    if not entries and not (address and out_md5):
        return
    root = Path(root)
    guard = root / ".paperdag" / "paperdag.lock.guard"
    guard.parent.mkdir(parents=True, exist_ok=True)
    with open(guard, "w") as g:
        fcntl.flock(g, fcntl.LOCK_EX)
        doc = _doc(root)
        outputs = {str(k): dict(v) for k, v in (doc.get("outputs") or {}).items()}
        made = {str(k): dict(v) for k, v in (doc.get("made_on") or {}).items()}
        machines = dict(doc.get("machines") or {})
        locked = dvc.locked_outputs(root, [root / lock_file] if lock_file else None)
        for path, (md5, stable_md5) in entries.items():
            versions = {k: v for k, v in outputs.get(path, {}).items() if k != md5}
            versions[md5] = stable_md5
            outputs[path] = _keep(versions, locked.get(path))
        if address and out_md5:
            key, ident = outputs_key(out_md5), machine.this_id()
            versions = {k: v for k, v in made.get(address, {}).items() if k != key}
            versions[key] = ident
            in_lock = {p: locked[p] for p in out_md5 if p in locked}
            made[address] = _keep(versions, outputs_key(in_lock) if len(in_lock) == len(out_md5) else None)
            machines[ident] = machine.describe()
        used = {i for v in made.values() for i in v.values()}
        body = yaml.safe_dump({"outputs": dict(sorted(outputs.items())), "made_on": dict(sorted(made.items())),
                               "machines": {k: v for k, v in sorted(machines.items()) if k in used}},
                              sort_keys=False, width=120)
        atomic_write_text(root / LOCK_FILE, _HEADER + body)

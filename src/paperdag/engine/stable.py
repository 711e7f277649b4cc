"""paperdag.lock: what dvc.lock cannot say about outputs that hold volatile values.

A metrics file that records a wall time never has the same md5 twice, so dvc.lock's md5 alone cannot tell a fresh
clone whether its rerun reproduced everything else. For every output with declared `volatile` values (JSON keys,
Parquet columns, keys of every JSONL row), `paperdag stage` also records the md5 of its content with those values left out, keyed by the
output's full md5, in paperdag.lock (committed beside dvc.lock). `paperdag verify --against-lock` compares a
rerun's stable md5 with the one recorded for the md5 dvc.lock holds.
"""

from __future__ import annotations

import fcntl
import hashlib
from pathlib import Path

import yaml

from paperdag.engine import artifacts, dvc
from paperdag.engine.fsutil import atomic_write_text, load_yaml
from paperdag.engine.spec import Artifact

LOCK_FILE = "paperdag.lock"
_KEEP = 4  # versions remembered per output (a stage run by hand and not yet in dvc.lock does not evict the locked one)
_HEADER = ("# Written by `paperdag stage`; commit it with dvc.lock. For each output with declared volatile values:\n"
           "# the md5 of its full content (as in dvc.lock) -> the md5 of its content without the volatile values.\n")


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


def load(root: Path) -> dict[str, dict[str, str]]:
    path = Path(root) / LOCK_FILE
    if not path.exists():
        return {}
    doc = load_yaml(path.read_text()) or {}
    return {str(k): dict(v) for k, v in (doc.get("outputs") or {}).items()}


def record(root: Path, entries: dict[str, tuple[str, str]]) -> None:
    """Add (output path -> (md5, stable md5)) to paperdag.lock; concurrent stages take turns."""
    if not entries:
        return
    root = Path(root)
    guard = root / ".paperdag" / "paperdag.lock.guard"
    guard.parent.mkdir(parents=True, exist_ok=True)
    with open(guard, "w") as g:
        fcntl.flock(g, fcntl.LOCK_EX)
        outputs = load(root)
        locked = dvc.locked_outputs(root)
        for path, (md5, stable_md5) in entries.items():
            versions = {k: v for k, v in outputs.get(path, {}).items() if k != md5}
            versions[md5] = stable_md5
            keep = set(list(versions)[-_KEEP:]) | {locked.get(path)}  # dvc.lock's version is never dropped
            outputs[path] = {k: v for k, v in versions.items() if k in keep}
        body = yaml.safe_dump({"outputs": dict(sorted(outputs.items()))}, sort_keys=False, width=120)
        atomic_write_text(root / LOCK_FILE, _HEADER + body)

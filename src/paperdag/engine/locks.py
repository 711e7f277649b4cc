"""Who may run stages in a repository: one `paperdag run` at a time, and never beside a `dvc repro`.

`paperdag run` holds `.paperdag/run.lock` for its whole length; DVC holds `.dvc/tmp/lock` while a `dvc repro`
runs. Each side checks the other's lock before it starts anything, so the second is refused at once with the
first one's pid, and no stage runs twice. (A stage a `paperdag run` starts carries the flow's run id in its
environment; any other `paperdag stage`, e.g. one `dvc repro` runs, is refused while the run lock is held.)
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from paperdag.engine.errors import LockBusy
from paperdag.engine.warm import client_pid

RUN_LOCK = ".paperdag/run.lock"
DVC_LOCK = ".dvc/tmp/lock"
RWLOCK = ".dvc/tmp/rwlock"
_held: dict[str, int] = {}  # run locks this process holds (path -> depth): a flow in this process may re-enter


PROBE_S = 1.0  # how long an exclusive lock waits out `holder`'s momentary shared probe before it calls the lock held


def _holder(f: IO[str]) -> str:
    f.seek(0)
    return f.read().strip() or "?"


def try_exclusive(fd: int) -> bool:
    """Take an exclusive flock on `fd` without waiting for a holder: False when another process holds it. A
    `holder` probe's shared lock lasts a moment; it is waited out (up to PROBE_S), not taken for a holder."""
    deadline = time.monotonic() + PROBE_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)


@contextmanager
def lease(path: Path, exclusive: bool) -> Iterator[bool]:
    """An flock on `path` for the block: shared (a user of something; waits while an exclusive holder has it) or
    exclusive (retiring it; never waits for a user). Yields whether it is held."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB if exclusive else fcntl.LOCK_SH)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


@contextmanager
def run_lock(root: Path) -> Iterator[None]:
    """Hold the repository's run lock; a second holder (another process) is refused at once with the pid."""
    path = Path(root).resolve() / RUN_LOCK
    key = str(path)
    if _held.get(key):
        _held[key] += 1
        try:
            yield
        finally:
            _held[key] -= 1
        return
    path.parent.mkdir(exist_ok=True)
    with open(path, "a+") as f:
        if not try_exclusive(f.fileno()):
            raise LockBusy(f"another `paperdag run` (pid {_holder(f)}) is running in {root}; wait for it to finish")
        f.seek(0)
        f.truncate()
        f.write(str(client_pid()))  # the process the user started (a warm server's child names its client)
        f.flush()
        _held[key] = 1
        try:
            yield
        finally:
            _held.pop(key, None)
            f.seek(0)
            f.truncate()
            fcntl.flock(f, fcntl.LOCK_UN)


@contextmanager
def commit_lock(root: Path) -> Iterator[None]:
    """One `dvc commit` at a time among the tasks of a run (DVC's own repository lock fails fast instead of waiting)."""
    path = Path(root) / ".paperdag" / "commit.lock"
    path.parent.mkdir(exist_ok=True)
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def holder(path: Path) -> str | None:
    """The pid written in a lock file someone holds ("?" before the holder has written it), or None when it is free
    (or absent). It probes with a shared lock, which `try_exclusive` waits out."""
    if not path.exists():
        return None
    with open(path) as f:
        try:
            fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _holder(f)
        fcntl.flock(f, fcntl.LOCK_UN)
    return None


def refuse_if_running(root: Path) -> None:
    """Refuse while a `paperdag run` (of another process) holds the run lock."""
    path = Path(root).resolve() / RUN_LOCK
    if _held.get(str(path)):
        return
    pid = holder(path)
    if pid is not None:
        raise LockBusy(f"`paperdag run` (pid {pid}) is running in {root}: it runs the stale stages itself; wait for it "
                       "to finish instead of running stages beside it")


def _dvc_writers(root: Path) -> list[tuple[int, str]]:
    """(pid, command) of the live DVC processes holding paths in DVC's rwlock (`dvc repro` holds its stages' outs and
    deps there while their commands run; its repo lock it holds only while it plans and commits)."""
    import json

    try:
        info = json.loads((Path(root) / RWLOCK).read_text())
    except (OSError, ValueError):
        return []
    entries = [*info.get("write", {}).values(), *(e for v in info.get("read", {}).values() for e in v)]
    found = {(e["pid"], e.get("cmd", "dvc")) for e in entries if isinstance(e, dict) and isinstance(e.get("pid"), int)}
    return sorted((pid, cmd) for pid, cmd in found if _alive(pid))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def refuse_if_dvc_busy(root: Path) -> None:
    """Refuse while a DVC command (a `dvc repro`, most likely) works in the repository."""
    root = Path(root).resolve()
    pid = holder(root / DVC_LOCK)
    writers = _dvc_writers(root)
    if pid is None and writers:
        pid = str(writers[0][0])
    if pid is not None:
        cmd = next((c for p, c in writers if str(p) == pid), "")
        raise LockBusy(f"a DVC command (pid {pid}, {f'`{cmd}`' if cmd else 'e.g. `dvc repro`'}) is running in {root}; "
                       "wait for it to finish")

"""The stage subprocesses of this process (`paperdag run`'s task threads): each started so that it dies with its
thread, and all of them stopped together when the run is stopped.

A SIGTERM (or Ctrl-C) to `paperdag run` reaches the flow's waiting loop as an exception; the task threads would go on
waiting for their stages (Prefect's task runner joins them), so the loop stops the stages first: each unwinds and
ends its run KILLED (runner.py), and no stage starts after that. (Under the Dask runner the stages are the workers'
children: a worker's own shutdown stops them.)
"""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

from paperdag.engine.prefect_server import die_with_parent

_LIVE: set[subprocess.Popen] = set()
_LOCK = threading.Lock()
_STOPPING = threading.Event()


class Stopped(Exception):
    """The run was stopped before this stage could start."""


def run(command: list[str], cwd: str | Path, env: dict[str, str]) -> int:
    """Run `command` to its end unless stop_all() stops it; its exit status."""
    with _LOCK:
        if _STOPPING.is_set():
            raise Stopped
        proc = subprocess.Popen(command, cwd=cwd, env=env, preexec_fn=die_with_parent)
        _LIVE.add(proc)
    try:
        return proc.wait()
    finally:
        with _LOCK:
            _LIVE.discard(proc)


def stop_all() -> None:
    """SIGTERM every live child, and start no other until reset()."""
    with _LOCK:
        _STOPPING.set()
        for proc in _LIVE:
            if proc.poll() is None:
                proc.terminate()


def reset() -> None:
    """A new run: children may start again."""
    _STOPPING.clear()

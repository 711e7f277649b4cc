"""A failed stage's error, kept where `paperdag run` can point at it: one line to print, the traceback beside it."""

from __future__ import annotations

import traceback
from pathlib import Path

from paperdag.engine.fsutil import atomic_write_text

FAILURES_DIR = ".paperdag/failed"


def failure_text(error: BaseException) -> str:
    return "".join(traceback.format_exception(error))


def failure_path(root: Path, address: str) -> Path:
    return Path(root) / FAILURES_DIR / f"{address.replace(':', '-')}.txt"


def record_failure(root: Path, address: str, error: BaseException) -> None:
    """Write the stage's error (first line) and its full traceback."""
    path = failure_path(root, address)
    path.parent.mkdir(parents=True, exist_ok=True)
    first = (str(error).splitlines() or [""])[0]
    atomic_write_text(path, f"{type(error).__name__}{': ' + first if first else ''}\n\n{failure_text(error)}")


def failure_summary(root: Path, address: str, returncode: int) -> str:
    """One line: the stage, its error, and the path of its full traceback."""
    path = failure_path(root, address)
    if path.exists():
        first = path.read_text().split("\n", 1)[0]
        return f"stage {address} failed: {first} (traceback: {path.relative_to(root)})"
    return f"stage {address} failed (exit code {returncode}); its output says why"

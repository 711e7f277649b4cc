"""Atomic file replacement and DVC-compatible md5 hashing."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

TMP_MARK = ".paperdag-tmp-"


def tmp_sibling(path: Path) -> Path:
    """A temporary path beside `path` (same filesystem, so the final rename is atomic)."""
    return path.with_name(f"{TMP_MARK}{os.getpid()}-{path.name}")


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def replace_into_place(tmp: Path, final: Path) -> None:
    """Move a finished file or directory over `final`; a reader sees the old or the new one, never a mix."""
    final.parent.mkdir(parents=True, exist_ok=True)
    if tmp.is_dir():
        old = final.with_name(f"{TMP_MARK}old-{os.getpid()}-{final.name}")
        if final.exists():
            os.replace(final, old)
        os.replace(tmp, final)
        shutil.rmtree(old, ignore_errors=True)
    else:
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, final)
    _fsync_dir(final.parent)


def atomic_write_text(path: Path, text: str) -> None:
    path = Path(path)
    tmp = tmp_sibling(path)
    tmp.write_text(text)
    replace_into_place(tmp, path)


def remove_stale_tmp(directory: Path) -> None:
    """Delete temporaries a killed process left behind (names carry TMP_MARK)."""
    if not directory.is_dir():
        return
    for p in directory.iterdir():
        if p.name.startswith(TMP_MARK):
            shutil.rmtree(p) if p.is_dir() else p.unlink(missing_ok=True)


def file_hash(path: Path, algorithm: str = "md5") -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, algorithm).hexdigest()


def file_md5(path: Path) -> str:
    return file_hash(path, "md5")


def is_bytecode(relpath: Path) -> bool:
    return relpath.suffix == ".pyc" or "__pycache__" in relpath.parts


def dvc_md5(path: Path, skip_bytecode: bool = False) -> str:
    """The md5 DVC 3 records for a file or directory (a directory hashes its sorted JSON listing, suffixed .dir).

    `skip_bytecode` leaves out __pycache__/ and *.pyc, as the project's .dvcignore does for code directories (Python
    writes bytecode beside the sources a stage imports; DVC does not see it)."""
    path = Path(path)
    if not path.is_dir():
        return file_md5(path)
    entries = sorted(
        ({"md5": file_md5(p), "relpath": p.relative_to(path).as_posix()} for p in path.rglob("*")
         if p.is_file() and not (skip_bytecode and is_bytecode(p.relative_to(path)))),
        key=lambda e: e["relpath"],
    )
    return hashlib.md5(json.dumps(entries, sort_keys=True).encode()).hexdigest() + ".dir"


def load_yaml(text: str) -> Any:
    """yaml.safe_load with libyaml's C parser when PyYAML has it (5-10x the pure-Python one)."""
    import yaml

    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))

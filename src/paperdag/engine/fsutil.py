"""Atomic file replacement and DVC-compatible md5 hashing."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

TMP_MARK = ".paperdag-tmp-"


def sqlite_template(target: Path, make: Callable[[Path], Path]) -> Path:
    """A database template made once (a no-op when `target` exists): `make(scratch)` builds it in a scratch
    directory beside `target` and returns its path there; its write-ahead log is checkpointed into the file, which
    alone is copied later, and the file moved into place whole."""
    import sqlite3
    import tempfile
    from contextlib import closing

    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        db = make(Path(tmp))
        with closing(sqlite3.connect(db)) as c:
            c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        os.replace(db, target)
    return target


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


def remove_stale_tmp(final: Path) -> None:
    """Delete the temporaries of `final` that a killed process left behind (tmp_sibling's and replace_into_place's
    names for it). Only `final`'s: a stage running beside this one may be writing its own outputs into the same
    directory."""
    final = Path(final)
    if not final.parent.is_dir():
        return
    mine = re.compile(rf"{re.escape(TMP_MARK)}(?:old-)?\d+-{re.escape(final.name)}")
    for p in final.parent.iterdir():
        if mine.fullmatch(p.name):
            shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink(missing_ok=True)


def file_hash(path: Path, algorithm: str = "md5") -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, algorithm).hexdigest()


def file_md5(path: Path) -> str:
    return file_hash(path, "md5")


def dvc_cache_file(root: Path, md5: str) -> Path:
    """Where DVC 3's local cache (the default .dvc/cache) keeps the content of that md5 (a .dir: its manifest)."""
    return Path(root) / ".dvc" / "cache" / "files" / "md5" / md5[:2] / md5[2:]


def dvc_files(path: Path) -> list[Path]:
    """The files of a directory as DVC sees them: what the repository's .dvcignore ignores left out (bytecode in a
    code package)."""
    ignored = _dvcignore(Path(path).resolve())
    return sorted(p for p in Path(path).rglob("*") if p.is_file() and not ignored(p.resolve()))


def dvc_md5(path: Path) -> str:
    """The md5 DVC 3 records for a file or directory (a directory hashes its sorted JSON listing, suffixed .dir).

    A directory leaves out what the repository's .dvcignore ignores, as DVC does (bytecode in a code package: without
    this, a stage that imported the package would tag it with an md5 dvc.lock never records)."""
    path = Path(path)
    if not path.is_dir():
        return file_md5(path)
    entries = sorted(({"md5": file_md5(p), "relpath": p.relative_to(path).as_posix()} for p in dvc_files(path)),
                     key=lambda e: e["relpath"])
    return hashlib.md5(json.dumps(entries, sort_keys=True).encode()).hexdigest() + ".dir"


def _dvcignore(path: Path) -> Callable[[Path], bool]:
    """Whether a file is ignored by the .dvcignore at the root of the DVC repository holding `path` (the nearest
    directory upwards with a .dvc/); nested .dvcignore files are not read."""
    for d in (path, *path.parents):
        if (d / ".dvc").is_dir():
            return _ignore_spec(d)
    return lambda p: False


@functools.lru_cache(maxsize=8)
def _ignore_spec(root: Path) -> Callable[[Path], bool]:
    f = root / ".dvcignore"
    lines = f.read_text().splitlines() if f.is_file() else []
    if not any(line.strip() and not line.startswith("#") for line in lines):
        return lambda p: False
    import pathspec

    spec = pathspec.GitIgnoreSpec.from_lines(lines)
    return lambda p: spec.match_file(p.relative_to(root).as_posix())


@functools.lru_cache(maxsize=1)
def _yaml_loader() -> Any:
    """PyYAML's safe loader (libyaml's C parser when PyYAML has it: 5-10x the pure-Python one) that reads floats as
    YAML 1.2 does, as DVC (ruamel.yaml) does: `1e-05`, which DVC writes into dvc.lock for 0.00001, is a float, not
    the string YAML 1.1 makes of it. Without this a value read from dvc.lock would differ from params.yaml's."""
    import re

    import yaml

    class Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
        pass

    Loader.add_implicit_resolver(
        "tag:yaml.org,2002:float",
        re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
        list("-+0123456789"))
    return Loader


def load_yaml(text: str) -> Any:
    """yaml.safe_load, with YAML 1.2's floats (see _yaml_loader)."""
    import yaml

    return yaml.load(text, Loader=_yaml_loader())

"""`python -m paperdag.engine.dvcmain ARGS`: DVC's own command line, with params files parsed once per process.

DVC reads params.yaml once per stage that lists params and once per dvc.yaml that reads it for `${...}` (its YAML
parser, pure Python): with 169 stages and a 64 kB params.yaml a plain `dvc status` takes ~35 s here, 8 s through
this module (one-off, 2026-12-07). (ruamel's C parser, `ruamel.yaml.clib`, is not an option: libyaml's YAML 1.1
scanner rejects params.yaml's `[sum3:upper, ...]`.) The engine's own DVC calls (status,
commit) go through here, where DVC's param-file loader is memoised on (path, mtime, size); the parser, and so every
value DVC compares with dvc.lock, is DVC's own. Users' `dvc` commands are untouched. `commit` runs DVC's commit in
the calling process (a `paperdag run` records every stage it ran without importing DVC again per stage), and
`status` its status where DVC is imported already.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


def _memoise_param_files() -> None:
    try:
        import dvc.dependency.param as param
        import dvc.utils.serialize as serialize
    except ImportError:
        return
    load: Callable[..., Any] | None = getattr(param, "load_path", None)
    if load is None or id(load) != id(getattr(serialize, "load_path", None)):  # another DVC release: as it is
        return
    real: Callable[..., Any] = load
    cache: dict[tuple[str, int, int], Any] = {}

    def load_path(fs_path: str, fs: Any, **kwargs: Any) -> Any:
        try:
            st = os.stat(fs_path) if getattr(fs, "protocol", None) in ("local", "file", ("file", "local")) else None
        except OSError:
            st = None
        if st is None or kwargs:
            return real(fs_path, fs, **kwargs)
        # one key per file: a pipeline's dvc.yaml reaches params.yaml as pipelines/<p>/../../params.yaml
        key = (os.path.realpath(fs_path), st.st_mtime_ns, st.st_size)
        if key not in cache:
            cache[key] = real(fs_path, fs, **kwargs)
        return copy.deepcopy(cache[key])

    param.load_path = load_path  # the params of every stage
    serialize.load_path = load_path  # the `vars:` of every dvc.yaml (DVC's parser imports it per call)


_memoised = False
_IN_PROCESS = threading.Lock()  # DVC's Python API resolves targets against the working directory: one call at a time


def preload() -> None:
    """Import DVC's repository API (about a second) and memoise its param loader, e.g. in a thread while a stage runs."""
    global _memoised
    with _IN_PROCESS:
        if not _memoised:
            _memoise_param_files()
            logging.getLogger("dvc").setLevel(logging.WARNING)  # its "Updating lock file" per stage says nothing
            _memoised = True
    import dvc.repo  # noqa: F401


@contextmanager
def _repo(root: str, locked: bool) -> Iterator[Any]:
    """DVC's Repo at `root`, in this process, with the working directory there (DVC's API resolves targets against
    it) and, if `locked`, DVC's repository lock held as its commands hold it; one call at a time."""
    preload()
    from dvc.repo import Repo, lock_repo

    with _IN_PROCESS:
        cwd = os.getcwd()
        os.chdir(root)
        try:
            with Repo(root) as repo:
                if not locked:
                    yield repo
                    return
                with lock_repo(repo):
                    yield repo
        finally:
            os.chdir(cwd)


def commit(root: str, target: str) -> None:
    """`dvc commit --force TARGET` in this process: a process that records many stages (a `paperdag run`) imports
    DVC once instead of once per stage. Raises DVC's own error."""
    with _repo(root, locked=False) as repo:
        repo.commit(target, force=True)


def status(root: str, targets: list[str] | None = None) -> dict[str, Any]:
    """`dvc status --json` in this process, as DVC's command runs it (the repository lock held): for a process that
    has DVC's API imported anyway (a warm server's child runs `paperdag run` with it preloaded), where starting
    `dvc status` would cost half a second. Raises DVC's own error."""
    with _repo(root, locked=True) as repo:
        return json.loads(json.dumps(repo.status(targets=targets or None, check_updates=True), default=str))


def move_lock_entries(root: str, moves: dict[str, tuple[str, str]]) -> None:
    """Move each stage's dvc.lock entry, {name: (from lock, to lock)} (paths from `root`), as it is, under DVC's
    repository lock, with DVC's own YAML round trip (the format `dvc repro` writes). The entry is written into its
    new lock before it leaves the old one, so an interrupted move leaves it twice, never nowhere (the reader takes
    the one beside the dvc.yaml that declares the stage; the next render finishes the move); an entry of that name
    already in the new lock is replaced (the moved one is the one DVC read until now). Raises DVC's own error (e.g.
    the repository lock is held by a running `dvc repro`)."""
    with _repo(root, locked=True):
        from dvc.utils.serialize import load_yaml, modify_yaml

        sources = {src: load_yaml(os.path.join(root, src)).get("stages") or {} for src, _ in moves.values()}
        for target in sorted({to for _, to in moves.values()}):
            with modify_yaml(os.path.join(root, target)) as doc:
                doc.setdefault("schema", "2.0")
                stages = doc.setdefault("stages", {})
                for name, (src, to) in moves.items():
                    if to == target and name in sources[src]:
                        stages[name] = sources[src][name]
        for src in sorted(sources):
            with modify_yaml(os.path.join(root, src)) as doc:
                for name, (source, _) in moves.items():
                    if source == src:
                        (doc.get("stages") or {}).pop(name, None)


def main(argv: list[str]) -> int:
    _memoise_param_files()
    from dvc.cli import main as dvc_main

    return dvc_main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""`python -m paperdag.engine.dvcmain ARGS`: DVC's own command line, with params files parsed once per process.

DVC reads params.yaml once per stage that lists params (its round-trip YAML parser, pure Python): with 62 stages
and a 29 KB params.yaml that is 7 s of a `dvc status`, nearly all of it. The engine's own DVC calls (status,
commit) go through here, where DVC's param-file loader is memoised on (path, mtime, size); the parser, and so every
value DVC compares with dvc.lock, is DVC's own. Users' `dvc` commands are untouched.
"""

from __future__ import annotations

import copy
import os
import sys
from typing import Any


def _memoise_param_files() -> None:
    try:
        import dvc.dependency.param as param
    except ImportError:
        return
    load = getattr(param, "load_path", None)
    if load is None:  # another DVC release: run it as it is
        return
    cache: dict[tuple[str, int, int], Any] = {}

    def load_path(fs_path: str, fs: Any, **kwargs: Any) -> Any:
        try:
            st = os.stat(fs_path) if getattr(fs, "protocol", None) in ("local", "file", ("file", "local")) else None
        except OSError:
            st = None
        if st is None or kwargs:
            return load(fs_path, fs, **kwargs)
        key = (fs_path, st.st_mtime_ns, st.st_size)
        if key not in cache:
            cache[key] = load(fs_path, fs, **kwargs)
        return copy.deepcopy(cache[key])

    param.load_path = load_path


def main(argv: list[str]) -> int:
    _memoise_param_files()
    from dvc.cli import main as dvc_main

    return dvc_main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

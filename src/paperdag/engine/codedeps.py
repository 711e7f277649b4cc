"""The code a stage depends on: its stage module plus every paperdag package it imports, transitively.

DVC does not follow imports, so these paths go into each stage's deps. Granularity is the package
directory (src/paperdag/methods/<name>/, src/paperdag/<block>/): editing a method reruns its stages only.
The engine itself is not a dependency: it moves data, it does not compute results.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = "paperdag"
_NOT_DEPS = {"engine"}


def _imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return {n for n in names if n == PACKAGE or n.startswith(PACKAGE + ".")}


def _package_dir(src: Path, module: str) -> Path | None:
    """The dependency unit for a module: paperdag/<block>/ or paperdag/methods/<name>/."""
    parts = module.split(".")[1:]
    if not parts or parts[0] in _NOT_DEPS:
        return None
    depth = 2 if parts[0] == "methods" and len(parts) > 1 else 1
    candidate = src.joinpath(PACKAGE, *parts[:depth])
    if candidate.is_dir():
        return candidate
    if candidate.with_suffix(".py").is_file():
        return candidate.with_suffix(".py")
    return None


def code_deps(root: Path, stage_module_file: str) -> list[str]:
    """Sorted repo-relative paths: the stage module and the paperdag packages it reaches."""
    src = root / "src"
    seen: set[Path] = set()
    todo = [root / stage_module_file]
    files_done: set[Path] = set()
    while todo:
        f = todo.pop()
        if f in files_done:
            continue
        files_done.add(f)
        for module in _imported_modules(f):
            unit = _package_dir(src, module)
            if unit is None or unit in seen:
                continue
            seen.add(unit)
            todo.extend([unit] if unit.is_file() else sorted(unit.rglob("*.py")))
    return [stage_module_file] + sorted(p.relative_to(root).as_posix() for p in seen)

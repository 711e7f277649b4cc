"""`paperdag verify`: rerun stages in a scratch copy of the workspace and compare every output with the current one.

Outputs are reproduced bit for bit, or within a stated relative tolerance for floats (tensors, JSON numbers,
float table columns). A stage's `volatile` patterns ("<output>" or "<output>.<key path or column>", fnmatch)
name values that legitimately differ between runs (wall times); they are listed, not compared.
"""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from paperdag.engine.errors import PaperdagError
from paperdag.engine.fsutil import dvc_md5
from paperdag.engine.params import load_params
from paperdag.engine.spec import Artifact, Stage, load_project, param_paths


def _stages(root: Path, target: str) -> list[Stage]:
    project = load_project(root)
    if ":" in target:
        return [project.stage(target)]
    return project.order(project.pipeline(target).name)


def _workspace_copy(root: Path, scratch: Path, stages: list[Stage]) -> None:
    r = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=root, capture_output=True, text=True)
    if r.returncode != 0:
        raise PaperdagError(f"verify needs a git repository at {root}: {r.stderr.strip()}")
    for rel in filter(None, r.stdout.split("\0")):
        src = root / rel
        if src.is_file():
            (scratch / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, scratch / rel)
    produced = {a.path for s in stages for a in s.outputs.values()}
    params = load_params(root)
    for s in stages:
        files = [path for key in s.path_params for path in param_paths(params, key)]
        for path in [*s.dep_paths, *files]:
            src, dst = root / path, scratch / path
            if path not in produced and not dst.exists():  # an input from outside the verified set: the workspace's
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copytree(src, dst) if src.is_dir() else shutil.copy2(src, dst)


def verify(root: Path, target: str, rtol: float = 1e-6) -> list[dict[str, Any]]:
    root = Path(root).resolve()
    stages = _stages(root, target)
    for s in stages:
        for a in s.outputs.values():
            if not (root / a.path).exists():
                raise PaperdagError(f"{a.path} ({s.address}) does not exist: run the pipeline before verifying it")
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="paperdag-verify-") as tmp:
        scratch = Path(tmp)
        _workspace_copy(root, scratch, stages)
        env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{scratch / 'mlflow.db'}", "PAPERDAG_ROOT": str(scratch)}
        env.pop("PAPERDAG_PARENT_RUN_ID", None)
        for s in stages:
            r = subprocess.run([sys.executable, "-m", "paperdag", "stage", s.address], cwd=scratch, env=env)
            if r.returncode != 0:
                raise PaperdagError(f"verify: stage {s.address} failed in the scratch workspace (exit {r.returncode})")
            for a in s.outputs.values():
                results.append({"stage": s.address, "output": a.name, "path": a.path,
                                **compare(a, root / a.path, scratch / a.path, s.volatile, rtol)})
    return results


def _volatile(patterns: tuple[str, ...], key: str) -> bool:
    return any(fnmatch.fnmatchcase(key, p) for p in patterns)


def compare(a: Artifact, ours: Path, theirs: Path, volatile: tuple[str, ...], rtol: float) -> dict[str, Any]:
    if dvc_md5(ours) == dvc_md5(theirs):
        return {"reproduced": True, "how": "bit-identical"}
    if _volatile(volatile, a.name):
        return {"reproduced": True, "how": "volatile output, not compared"}
    diffs: list[str] = []
    skipped: list[str] = []
    close = True
    if a.type == "json":
        _cmp_json(json.loads(ours.read_text()), json.loads(theirs.read_text()), a.name, volatile, rtol, diffs, skipped)
    elif a.type == "parquet":
        _cmp_parquet(ours, theirs, a.name, volatile, rtol, diffs, skipped)
    elif a.type in ("npy", "safetensors"):
        close = _cmp_arrays(_load_arrays(a.type, ours), _load_arrays(a.type, theirs), a.name, rtol, diffs)
    elif a.type == "dir":
        _cmp_dir(ours, theirs, a.name, rtol, diffs)
    else:
        diffs.append(f"{a.name}: bytes differ")
    if diffs:
        return {"reproduced": False, "how": "differs: " + "; ".join(diffs[:5])}
    how = f"equal within rtol={rtol}" if close else "equal"
    if skipped:
        how += f" (volatile, not compared: {', '.join(skipped[:5])})"
    return {"reproduced": True, "how": how}


def _cmp_json(x: Any, y: Any, key: str, volatile: tuple[str, ...], rtol: float, diffs: list[str], skipped: list[str]) -> None:
    if _volatile(volatile, key):
        if x != y:
            skipped.append(key)
        return
    if isinstance(x, dict) and isinstance(y, dict):
        for k in sorted(set(x) | set(y)):
            if k not in x or k not in y:
                diffs.append(f"{key}.{k}: present on one side only")
            else:
                _cmp_json(x[k], y[k], f"{key}.{k}", volatile, rtol, diffs, skipped)
    elif isinstance(x, list) and isinstance(y, list) and len(x) == len(y):
        for i, (u, v) in enumerate(zip(x, y, strict=False)):
            _cmp_json(u, v, f"{key}.{i}", volatile, rtol, diffs, skipped)
    elif isinstance(x, (int, float)) and isinstance(y, (int, float)) and not isinstance(x, bool):
        if not np.isclose(x, y, rtol=rtol, atol=0.0):
            diffs.append(f"{key}: {x} != {y}")
    elif x != y:
        diffs.append(f"{key}: {x!r} != {y!r}")


def _cmp_parquet(ours: Path, theirs: Path, name: str, volatile: tuple[str, ...], rtol: float, diffs: list[str], skipped: list[str]) -> None:
    import polars as pl

    x, y = pl.read_parquet(ours), pl.read_parquet(theirs)
    if x.schema != y.schema or x.height != y.height:
        diffs.append(f"{name}: schema or row count differs ({x.shape} vs {y.shape})")
        return
    for col in x.columns:
        key = f"{name}.{col}"
        if _volatile(volatile, key):
            skipped.append(key)
            continue
        a, b = x[col], y[col]
        if a.dtype.is_float():
            if not np.allclose(a.to_numpy(), b.to_numpy(), rtol=rtol, atol=0.0, equal_nan=True):
                diffs.append(f"{key}: floats differ beyond rtol={rtol}")
        elif not a.equals(b):
            diffs.append(f"{key}: values differ")


def _load_arrays(atype: str, path: Path) -> dict[str, np.ndarray]:
    if atype == "npy":
        return {"": np.load(path, allow_pickle=False)}
    from safetensors.numpy import load_file

    return load_file(path)


def _cmp_arrays(x: dict[str, np.ndarray], y: dict[str, np.ndarray], name: str, rtol: float, diffs: list[str]) -> bool:
    if set(x) != set(y):
        diffs.append(f"{name}: tensor names differ")
        return False
    for k in x:
        a, b = x[k], y[k]
        if a.shape != b.shape or a.dtype != b.dtype:
            diffs.append(f"{name}[{k}]: shape/dtype {a.shape}/{a.dtype} vs {b.shape}/{b.dtype}")
        elif np.issubdtype(a.dtype, np.floating):
            if not np.allclose(a, b, rtol=rtol, atol=0.0, equal_nan=True):
                diffs.append(f"{name}[{k}]: max abs diff {np.max(np.abs(a - b)):.3g} beyond rtol={rtol}")
        elif not np.array_equal(a, b):
            diffs.append(f"{name}[{k}]: values differ")
    return True


def _cmp_dir(ours: Path, theirs: Path, name: str, rtol: float, diffs: list[str]) -> None:
    files = lambda d: {p.relative_to(d).as_posix() for p in d.rglob("*") if p.is_file()}  # noqa: E731
    fx, fy = files(ours), files(theirs)
    if fx != fy:
        diffs.append(f"{name}: files differ: {sorted(fx ^ fy)[:5]}")
        return
    for rel in sorted(fx):
        if dvc_md5(ours / rel) == dvc_md5(theirs / rel):
            continue
        if rel.endswith(".safetensors"):
            _cmp_arrays(_load_arrays("safetensors", ours / rel), _load_arrays("safetensors", theirs / rel), f"{name}/{rel}", rtol, diffs)
        else:
            diffs.append(f"{name}/{rel}: bytes differ")


def format_results(results: list[dict[str, Any]]) -> str:
    width = max((len(f"{r['stage']} {r['path']}") for r in results), default=10)
    lines = [f"{'OK ' if r['reproduced'] else 'BAD'} {(r['stage'] + ' ' + r['path']).ljust(width)}  {r['how']}" for r in results]
    n_ok = sum(r["reproduced"] for r in results)
    lines.append(f"{n_ok}/{len(results)} outputs reproduced")
    return "\n".join(lines)

"""Helpers shared by the tests: throw-away git+DVC repositories (fixture projects and this repository's real
pipelines), and running `paperdag`, `dvc` and `git` as a user would. Importable as `support` (pytest pythonpath)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

RESOURCES = Path(__file__).parent / "resources"
REPO = Path(__file__).resolve().parents[1]

os.environ.setdefault("DVC_NO_ANALYTICS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ.pop("MLFLOW_TRACKING_URI", None)
# dvc.yaml's commands call `paperdag`: as in an activated virtual environment, its bin/ comes first on PATH
os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
os.environ.pop("PAPERDAG_ROOT", None)


def git(repo: Path, *args: str) -> str:
    r = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True)
    return r.stdout


def cli(repo: Path, *args: str, check: bool = True, env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run `paperdag ARGS` in `repo` as a user would (a fresh process)."""
    r = subprocess.run([sys.executable, "-m", "paperdag", *args], cwd=repo, capture_output=True, text=True,
                       env={**os.environ, **(env or {})}, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"paperdag {' '.join(args)} exited {r.returncode}\n{r.stdout}\n{r.stderr}")
    return r


def dvc(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    r = subprocess.run([sys.executable, "-m", "dvc", *args], cwd=repo, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise AssertionError(f"dvc {' '.join(args)} exited {r.returncode}\n{r.stdout}\n{r.stderr}")
    return r


def commit_project(dest: Path, message: str) -> Path:
    """Turn a directory holding a paperdag project into a committed git + DVC repository with dvc.yaml rendered."""
    git(dest, "init", "-q", "-b", "main")
    git(dest, "config", "user.email", "t@example.com")
    git(dest, "config", "user.name", "test")
    (dest / ".gitignore").write_text("/data/\n/mlflow.db\n/mlruns/\n/.paperdag/\n/.prefect/\n/report/\n__pycache__/\n")
    dvc(dest, "init", "-q")
    cli(dest, "render")
    git(dest, "add", "-A")
    git(dest, "commit", "-qm", message)
    return dest


def make_repo(dest: Path, resource: str = "toy") -> Path:
    """A committed git+DVC repository holding the fixture project, with dvc.yaml rendered."""
    shutil.copytree(RESOURCES / resource, dest)
    return commit_project(dest, "fixture")


def pipeline_repo(dest: Path, pipeline: str, overrides: list[str] = ()) -> Path:
    """A committed git+DVC repository holding one of this repository's real pipelines (its declaration, stage
    module, the code it imports, params.yaml), with `overrides` (KEY=VALUE, e.g. a smoke scale) applied."""
    from paperdag.engine.codedeps import code_deps
    from paperdag.engine.params import set_params

    files = ["params.yaml", f"pipelines/{pipeline}.yaml", "stages/__init__.py", *code_deps(REPO, f"stages/{pipeline}.py")]
    for rel in files:
        src, target = REPO / rel, dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, target, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copyfile(src, target)
    params = yaml.safe_load((dest / "params.yaml").read_text())
    (dest / "params.yaml").write_text(yaml.safe_dump({"base": params["base"], pipeline: params[pipeline]}, sort_keys=False))
    if overrides:
        set_params(dest, list(overrides))
    return commit_project(dest, f"{pipeline} pipeline")


def stages_run(dvc_output: str) -> list[str]:
    """The stages a `dvc repro` output says it ran."""
    return [line.split("'")[1] for line in dvc_output.splitlines() if line.startswith("Running stage '")]




def missing_outputs(repo: Path, pipeline: str) -> list[str]:
    """The declared outputs of `pipeline` (matrix elements expanded) that are absent or empty in `repo`."""
    from paperdag.engine.spec import load_project

    missing = []
    for stage in load_project(repo).order(pipeline):
        for a in stage.outputs.values():
            p = repo / a.path
            if not (p.is_dir() and any(p.iterdir()) or p.is_file() and p.stat().st_size > 0):
                missing.append(a.path)
    return missing

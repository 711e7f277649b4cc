"""Shared fixtures: throw-away git+DVC repositories built from tests/resources, a CLI runner, a Prefect server."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
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


@pytest.fixture
def toy(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "toy")


@pytest.fixture(scope="session")
def built_toy_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The toy project after one `dvc repro` (built once per session; copy it before changing it)."""
    repo = make_repo(tmp_path_factory.mktemp("built") / "toy")
    dvc(repo, "repro")
    return repo


@pytest.fixture
def built_toy(built_toy_template: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "toy"
    shutil.copytree(built_toy_template, dest, symlinks=True)
    return dest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def prefect_server(tmp_path_factory: pytest.TempPathFactory):
    """One real `prefect server start` for the session; PREFECT_API_URL points every later process at it."""
    home = tmp_path_factory.mktemp("prefect-home")
    port = _free_port()
    env = {**os.environ, "PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "PREFECT_API_URL": "", "PREFECT_LOGGING_LEVEL": "WARNING"}
    log = open(home / "server.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                            env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/api"
    deadline = time.time() + 120
    while True:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as r:
                if r.status == 200:
                    break
        except OSError:
            pass
        if proc.poll() is not None or time.time() > deadline:
            proc.kill()
            raise RuntimeError(f"prefect server did not start: {(home / 'server.log').read_text()[-2000:]}")
        time.sleep(0.5)
    old = {k: os.environ.get(k) for k in ("PREFECT_API_URL", "PREFECT_HOME")}
    os.environ["PREFECT_API_URL"] = url
    os.environ["PREFECT_HOME"] = str(home)
    yield url
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    proc.terminate()
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()

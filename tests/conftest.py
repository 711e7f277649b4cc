"""Shared fixtures: throw-away git+DVC repositories built from tests/resources, a Prefect server."""

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

from support import dvc, make_repo

@pytest.fixture
def toy(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "toy")


@pytest.fixture(scope="session")
def built_toy_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The toy project after one `dvc repro` (built once per session; copy it before changing it)."""
    from paperdag.engine import records

    repo = make_repo(tmp_path_factory.mktemp("built") / "toy")
    dvc(repo, "repro")
    records.drain(repo)  # MLflow's store settled (a detached drainer may still be writing it) before it is copied
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

"""Helpers shared by the tests: throw-away git+DVC repositories (fixture projects and this repository's real
pipelines), and running `paperdag`, `dvc` and `git` as a user would. Importable as `support` (pytest pythonpath)."""

from __future__ import annotations

import functools
import importlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

RESOURCES = Path(__file__).parent / "resources"
REPO = Path(__file__).resolve().parents[1]

os.environ.setdefault("DVC_NO_ANALYTICS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")  # paperdag.retrieval.encode sets it when it loads a model; set from the start, so the suite's environment stays one (its warm server serves only that)
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ.pop("MLFLOW_TRACKING_URI", None)
# dvc.yaml's commands call `paperdag`: as in an activated virtual environment, its bin/ comes first on PATH
os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
os.environ.pop("PAPERDAG_ROOT", None)
# Run records are logged by the drains of the tests' own processes (every reader drains first; the build fixtures
# drain after each build), not by a detached drainer per repository: ~100 repositories a run, each drainer importing
# MLflow (~2 CPU-s) where the test worker has it imported once. tests/engine/test_records.py tests the detached
# drainer itself (PAPERDAG_DRAIN=detached, the default outside the suite).
os.environ.setdefault("PAPERDAG_DRAIN", "off")


def wait_for(predicate: Any, what: str, timeout: float = 120, step: float = 0.05) -> None:
    """Poll `predicate` until it holds; fail naming `what` after `timeout` seconds."""
    deadline = time.time() + timeout
    while not predicate():
        assert time.time() < deadline, f"timed out waiting for {what}"
        time.sleep(step)


def alive(pid: int) -> bool:
    """Whether process `pid` runs: a zombie (dead, not yet reaped by its parent) does not (Linux's /proc)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return False


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


@functools.cache
def _dvc_init_files() -> dict[str, bytes]:
    """What `dvc init` writes into a git repository, by `dvc init` itself, once per process."""
    with tempfile.TemporaryDirectory(prefix="dvc-init-") as tmp:
        git(Path(tmp), "init", "-q")
        dvc(Path(tmp), "init", "-q")
        return {name: (Path(tmp) / name).read_bytes() for name in (".dvc/config", ".dvc/.gitignore", ".dvcignore")}


def rendered_stages(project: Any) -> dict[str, Any]:
    """Every stage entry `paperdag render` would write, whichever dvc.yaml it lands in, by name."""
    import yaml

    from paperdag.engine.render import render_files

    return {name: entry for text in render_files(project).values() for name, entry in yaml.safe_load(text)["stages"].items()}


def lock_texts(repo: Path) -> dict[str, str]:
    """Every dvc.lock of the project (the root's, each pipeline's), its text by path."""
    from paperdag.engine.dvc import lock_files

    return {str(p.relative_to(repo)): p.read_text() for p in lock_files(repo)}


def lock_file_of(repo: Path, stage: str) -> Path:
    """The dvc.lock that records the stage (by its DVC name)."""
    import yaml

    from paperdag.engine.dvc import lock_files

    return next(p for p in lock_files(repo) if stage in (yaml.safe_load(p.read_text()).get("stages") or {}))


def commit_project(dest: Path, message: str, render: bool = True) -> Path:
    """Turn a directory holding a paperdag project into a committed git + DVC repository with dvc.yaml rendered
    (`render=False`: it already is)."""
    git(dest, "init", "-q", "-b", "main")
    git(dest, "config", "user.email", "t@example.com")
    git(dest, "config", "user.name", "test")
    (dest / ".gitignore").write_text("/data/\n/mlflow.db\n/mlruns/\n/.paperdag/\n/.prefect/\n/report/\n__pycache__/\n")
    for name, content in _dvc_init_files().items():  # as `dvc init -q` (a process of ~1 CPU-s) would
        (dest / name).parent.mkdir(exist_ok=True)
        (dest / name).write_bytes(content)
    if render:  # as `paperdag render` does, without its validation's import of the project's stage modules here
        from paperdag.engine.render import render as render_dvc_yaml
        from paperdag.engine.spec import load_project

        render_dvc_yaml(load_project(dest))
    git(dest, "add", "-A")
    git(dest, "commit", "-qm", message)
    return dest


def make_repo(dest: Path, resource: str = "toy") -> Path:
    """A committed git+DVC repository holding the fixture project, with dvc.yaml rendered."""
    shutil.copytree(RESOURCES / resource, dest)
    return commit_project(dest, "fixture")


def pipeline_repo(dest: Path, pipeline: str, overrides: list[str] = (), smoke: bool = False) -> Path:
    """A committed git+DVC repository holding one of this repository's real pipelines (paperdag.engine.scratch:
    its declaration, stage module, the code it imports, its params), at the smoke scale its declaration gives when
    `smoke`, with `overrides` (KEY=VALUE) applied on top."""
    from paperdag.engine.params import set_params
    from paperdag.engine.render import render
    from paperdag.engine.scratch import copy_pipeline
    from paperdag.engine.spec import load_project

    copy_pipeline(REPO, pipeline, dest, smoke=smoke)
    if overrides:
        set_params(dest, list(overrides))
        render(load_project(dest))  # a path param's file is a dep in dvc.yaml
    return commit_project(dest, f"{pipeline} pipeline", render=False)


@dataclass(frozen=True)
class SmokeBuild:
    """A real pipeline's scratch repo at its declared smoke scale, after one `dvc repro`."""

    repo: Path
    output: str  # that `dvc repro`'s stdout
    seconds: float  # copying, committing and the `dvc repro`


def smoke_group(pipeline: str) -> pytest.MarkDecorator:
    """The pytest-xdist group of every test that reads `pipeline`'s shared smoke repo (conftest.py `smoke_build`):
    one worker runs them all, so the repo is built once."""
    return pytest.mark.xdist_group(f"smoke-{pipeline}")


def metrics_after(repo: Path, address: str, edit: Callable[[dict[str, Any]], None] | None = None,
                  **swaps: Callable[[Any], Any] | None) -> dict[str, Any]:
    """Claim falsification (pipeline contract, section 3), in this process: call stage `address` of the built `repo`
    as `paperdag stage` calls it (the function with its typed params from repo's params.yaml and its seed, its
    inputs read by the engine), each input named in `swaps` replaced by `swaps[name](value)` (a gathered input: per
    item; a swap of None leaves its input as read), then `edit(inputs)` (name -> value, or {item: value}) where a swap reads several inputs; return its
    metric outputs by path, written and read back as the engine writes them. Nothing in `repo` changes, and no plot
    is drawn."""
    from paperdag.engine import artifacts
    from paperdag.engine.numerics import from_params
    from paperdag.engine.params import load_params
    from paperdag.engine.runner import prepare, read_inputs, seed_everything
    from paperdag.engine.spec import load_project

    params = load_params(repo)
    project = load_project(repo, params)
    stage = project.stage(address)
    importlib.import_module(stage.module)  # from this checkout (the suite's pythonpath), as the tests import it
    path = list(sys.path)
    fn, kwargs, seed = prepare(project, params, stage)
    sys.path[:] = path  # prepare puts repo's stages/ and src/ first: gone with the repo, and the module is imported
    inputs = read_inputs(repo, project, stage)
    unknown = set(swaps) - set(inputs)
    assert not unknown, f"{address} has no input {sorted(unknown)}; its inputs: {sorted(inputs)}"
    for name, swap in swaps.items():
        if swap is None:
            continue
        inputs[name] = {k: swap(v) for k, v in inputs[name].items()} if name in stage.gathers else swap(inputs[name])
    if edit is not None:
        edit(inputs)
    seed_everything(seed, from_params(params))
    out = fn(**kwargs, **inputs)
    metrics = {}
    with tempfile.TemporaryDirectory(prefix="metrics-after-") as tmp:
        for name, a in stage.outputs.items():
            if a.kind == "metric":
                artifacts.write(a, out[name], Path(tmp) / name)
                metrics[a.path] = json.loads((Path(tmp) / name).read_text())
    return metrics


def judged(repo: Path, pipeline: str, metrics: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """`pipeline`'s claims judged on `metrics` (metric path -> content, as metrics_after returns), its other metric
    files as on disk."""
    from paperdag.engine.claims import evaluate_pipeline

    return evaluate_pipeline(repo, pipeline, metrics=metrics)


def judged_after(repo: Path, address: str, edit: Callable[[dict[str, Any]], None] | None = None,
                 **swaps: Callable[[Any], Any] | None) -> dict[str, dict[str, Any]]:
    """The claims of stage `address`'s pipeline judged on what metrics_after(repo, address, edit, **swaps) returns."""
    return judged(repo, address.split(":", 1)[0], metrics_after(repo, address, edit, **swaps))


def stages_run(dvc_output: str) -> list[str]:
    """The stages a `dvc repro` output says it ran, by name (DVC names one of pipelines/<p>/dvc.yaml with its file)."""
    return [line.split("'")[1].split(":")[-1] for line in dvc_output.splitlines() if line.startswith("Running stage '")]


def chromium_page(html_file: Path, script: str) -> tuple[Any, list[str]]:
    """Open `html_file` in headless Chromium (Debian's package) and evaluate `script` (a JS expression) on it; return
    its value and the console errors and page errors the page raised. Skips where Chromium is absent, unless CI
    requires it (PAPERDAG_REQUIRE_CHROMIUM=1: .ci/run installs it)."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        if os.environ.get("PAPERDAG_REQUIRE_CHROMIUM") == "1":
            pytest.fail("chromium is not installed (apt-get install chromium) and PAPERDAG_REQUIRE_CHROMIUM=1")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    errors: list[str] = []
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=browser, args=["--no-sandbox"])
        try:
            page = b.new_page()
            page.on("console", lambda m: errors.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
            page.on("requestfailed", lambda r: errors.append(f"request failed: {r.url}"))
            page.goto(Path(html_file).resolve().as_uri(), wait_until="load")
            return page.evaluate(script), errors
        finally:
            b.close()

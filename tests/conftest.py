"""Shared fixtures: throw-away git+DVC repositories built from tests/resources, each real pipeline built once at
smoke scale, a Prefect server; and how pytest-xdist shares the tests out between its workers."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest

from paperdag.engine import records
from support import REPO, SmokeBuild, alive, dvc, make_repo, pipeline_repo, smoke_group

# One thread for what the tests compute in their own processes (torch, numpy, polars), set before any test module
# imports them: three workers on two cores, each with the libraries' default of one OpenMP thread a core, spent
# much of their CPU spinning at barriers (tests/lm: 46 -> 30 CPU-s). Stage processes set their own, from
# base.numerics; a test that wants other counts passes them.
for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "POLARS_MAX_THREADS"):
    os.environ.setdefault(_var, "1")

# pytest keeps each test module's assertion-rewritten code in __pycache__ (as `make bytecode` keeps the project's),
# unless writing bytecode is off, as where PYTHONDONTWRITEBYTECODE is set: every worker then rewrote all ~100 test
# modules at every start (~5 CPU-s each). Turned back on in the test processes only (the processes they start keep
# the environment's setting); a worker that finds a module rewritten already (by another, or by an earlier run) reads it.
sys.dont_write_bytecode = False


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """`--dist loadgroup` (pyproject addopts), with the tests outside a group kept together by file as `--dist
    loadfile` keeps them: a pipeline's smoke tests (support.smoke_group) share one worker wherever their files are,
    and a file's module fixtures are still built once. The tests on the session's Prefect server (group "prefect":
    test_flow.py, test_locks.py; ~190 s in a row on one worker, the longest unit) and test_warm.py (~120 s) go out
    first, then the smoke groups, so that no unit of minutes starts after the short files are done (the prefect
    group last-but-one made its worker finish ~35 s after the others; test_warm.py sent out late, ~25 s)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    from paperdag.engine.spec import load_project

    # the units of minutes in a row on one worker that are neither a smoke group nor a pipeline's: the tests on the
    # session's Prefect server (~190 s) and the warm server's (~120 s: a file, one worker, as --dist loadfile keeps it)
    LONGEST = ("prefect", "tests/engine/test_warm.py")
    # a smoke build takes minutes, about in proportion to its stages (each a fresh process; counted at default
    # scale): the most stages first
    stages = {smoke_group(p.name).args[0]: len(p.stages) for p in load_project(REPO).pipelines.values()}

    class LoadGroupOrFile(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            scope = super()._split_scope(nodeid)
            return nodeid.split("::", 1)[0] if scope == nodeid else scope

        def _assign_work_unit(self, node) -> None:
            for scope in sorted((s for s in self.workqueue if s in stages), key=stages.get):
                self.workqueue.move_to_end(scope, last=False)
            for scope in LONGEST[::-1]:  # before them all, longest first
                if scope in self.workqueue:
                    self.workqueue.move_to_end(scope, last=False)
            super()._assign_work_unit(node)

    return LoadGroupOrFile(config, log)


# One `paperdag warm` for the whole run (paperdag.engine.warm), shared by the pytest-xdist workers: every stage process
# the tests start is forked from a process that has imported torch, transformers and sentence-transformers once,
# instead of importing them itself (5-15 CPU-s a stage). The process that runs the session (xdist's controller, or
# the only one) starts it in pytest_configure, so it imports while the workers start and collect (the workers used
# to wait ~10 s for it, one core idle), hands it to the workers in PAPERDAG_WARM (they inherit the environment) and
# stops it in pytest_unconfigure, after every worker is done. The server serves only stages whose load-time
# environment is its own (the workers' is the same); the others run as before. PAPERDAG_WARM=off turns it off
# (tests/engine/test_warm.py checks that both give the same bits).
_WARM: list[tuple[Path, subprocess.Popen, str | None]] = []  # socket, process, PAPERDAG_WARM before
_WARM_PID = "PAPERDAG_SUITE_WARM_PID"  # the server's pid, for the workers to tell a slow start from a failed one
# what only reports (help, markers, fixtures, a collection) and so starts no server
_NO_TESTS = ("help", "collectonly", "markers", "showfixtures", "show_fixtures_per_test", "setupplan")


def pytest_configure(config: pytest.Config) -> None:
    if (hasattr(config, "workerinput") or any(getattr(config.option, o, False) for o in _NO_TESTS)
            or os.environ.get("PAPERDAG_WARM") == "off"):
        return  # an xdist worker (its controller starts it), a command that runs no test, or no server wanted
    from paperdag.engine.prefect_server import die_with_parent

    run = Path(tempfile.mkdtemp(prefix="paperdag-suite-"))
    path = run / "warm.sock"
    with open(path.with_suffix(".log"), "a") as log:
        proc = subprocess.Popen([sys.executable, "-m", "paperdag", "warm", "--socket", str(path), "--idle", "7200",
                                 "--no-prefect"],  # the tests' runs have their own PREFECT_HOMEs
                                cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                preexec_fn=die_with_parent)  # a pytest killed outright leaves no server behind
    _WARM.append((path, proc, os.environ.get("PAPERDAG_WARM")))
    os.environ["PAPERDAG_WARM"], os.environ[_WARM_PID] = str(path), str(proc.pid)


def pytest_unconfigure(config: pytest.Config) -> None:
    from paperdag.engine import warm

    while _WARM:
        path, proc, before = _WARM.pop()
        failed = proc.poll()  # it exited on its own: keep its log, say where
        if failed is None and not warm.stop(path):  # SIGTERM to its claim's holder, SIGKILL after 30 s
            proc.kill()
        proc.wait()
        if failed is None:
            shutil.rmtree(path.parent, ignore_errors=True)
        else:
            print(f"\nthe suite's `paperdag warm` exited {failed} early (its stages ran in their own processes): "
                  f"{path.with_suffix('.log')}", file=sys.stderr)
        os.environ.pop(_WARM_PID, None)
        if before is None:
            os.environ.pop("PAPERDAG_WARM", None)
        else:
            os.environ["PAPERDAG_WARM"] = before


@pytest.fixture(scope="session", autouse=True)
def warm_stage_server() -> Path | None:
    """The suite's `paperdag warm` socket (pytest_configure above), once it serves, or None when there is none (its
    stages then run in their own processes)."""
    value, pid = os.environ.get("PAPERDAG_WARM"), os.environ.get(_WARM_PID)
    if not value or value == "off":
        return None
    path, deadline = Path(value), time.monotonic() + 180
    while not path.exists() and time.monotonic() < deadline and (pid is None or alive(int(pid))):
        time.sleep(0.1)
    if not path.exists():
        warnings.warn(f"the suite's `paperdag warm` does not serve ({path.with_suffix('.log')}): stages run in their own "
                      "processes", stacklevel=1)
        os.environ["PAPERDAG_WARM"] = "off"
        return None
    return path


@pytest.fixture(scope="session")
def smoke_build(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], SmokeBuild]:
    """pipeline -> its SmokeBuild, built on first use and shared by every test of the session that asks
    (tests/pipelines/test_contract.py, tests/methods/<m>/test_<m>_pipeline.py; mark them support.smoke_group so that one
    worker runs them). Copy the repo before changing it."""
    built: dict[str, SmokeBuild] = {}
    failed: dict[str, str] = {}

    def get(pipeline: str) -> SmokeBuild:
        if pipeline in failed:
            pytest.fail(f"{pipeline}'s smoke build failed in an earlier test of this session: {failed[pipeline]}")
        if pipeline not in built:
            start = time.perf_counter()
            try:
                repo = pipeline_repo(tmp_path_factory.mktemp(pipeline) / "repo", pipeline, smoke=True)
                output = dvc(repo, "repro").stdout
                records.drain(repo)  # MLflow's store settled: tests read it and copy the repo
            except Exception as e:
                failed[pipeline] = str(e)[-4000:]
                raise
            built[pipeline] = SmokeBuild(repo, output, time.perf_counter() - start)
        return built[pipeline]

    return get

@pytest.fixture
def toy(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "toy")


@pytest.fixture(scope="session")
def built_toy_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The toy project after one `dvc repro` (built once per session; copy it before changing it)."""

    repo = make_repo(tmp_path_factory.mktemp("built") / "toy")
    dvc(repo, "repro")
    records.drain(repo)  # MLflow's store settled (a detached drainer may still be writing it) before it is copied
    return repo


@pytest.fixture
def built_toy(built_toy_template: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "toy"
    shutil.copytree(built_toy_template, dest, symlinks=True)
    return dest


@pytest.fixture(scope="session")
def prefect_server(tmp_path_factory: pytest.TempPathFactory):
    """One real `prefect server start` for the session, its API alone (--no-services: it keeps flow runs and
    deployments, not task runs, events or scheduled runs, which no test reads; a test that does needs a server with
    its services); PREFECT_API_URL points every later process at it."""
    from paperdag.engine.prefect_server import running_server

    home = tmp_path_factory.mktemp("prefect-home")
    old = {k: os.environ.get(k) for k in ("PREFECT_API_URL", "PREFECT_HOME")}
    with running_server(home, services=False) as url:
        os.environ["PREFECT_API_URL"] = url
        os.environ["PREFECT_HOME"] = str(home)
        try:
            yield url
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

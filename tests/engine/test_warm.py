"""The warm stage server (src/paperdag/engine/warm.py): a stage forked from it computes the bits a fresh process
does, fails and ends as it would, takes signals through its client, and a client the server cannot serve runs the
stage itself."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support import alive, cli, dvc, smoke_group, wait_for
from paperdag.engine import warm
from paperdag.engine.failures import failure_path


@contextlib.contextmanager
def warm_env(value: str):
    """PAPERDAG_WARM set to `value` for the processes started inside, restored after (the suite's own server)."""
    old = os.environ.get(warm.ENV)
    os.environ[warm.ENV] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(warm.ENV, None)
        else:
            os.environ[warm.ENV] = old



@pytest.fixture
def server(toy: Path, tmp_path: Path):
    """A server of the test's own, started in the toy project (preloading only numpy, to be quick), its log."""
    path, log = tmp_path / "w.sock", tmp_path / "warm.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "paperdag", "warm", "--socket", str(path), "--idle", "600",
                                 "--preload", "numpy", "--no-prefect"], cwd=toy, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    wait_for(lambda: path.exists() or proc.poll() is not None, "the warm server's socket")
    assert proc.poll() is None, log.read_text()
    yield path, log
    proc.terminate()
    proc.wait(30)
    assert not path.exists(), "the server removes its socket when it stops"


def served(log: Path) -> list[str]:
    return [line.split(": paperdag ", 1)[1].split(" in ")[0] for line in log.read_text().splitlines()
            if ": paperdag stage " in line and "refused" not in line]


def test_stages_forked_from_the_server_write_what_fresh_processes_write(toy: Path, server, tmp_path: Path) -> None:
    """The toy DAG under `dvc repro` with the server and without it: the same md5 for every output (the volatile
    seconds aside), and the server served each of the four stages."""
    path, log = server
    fresh = tmp_path / "fresh"
    shutil.copytree(toy, fresh, symlinks=True)
    with warm_env(str(path)):
        dvc(toy, "repro")
    with warm_env("off"):
        dvc(fresh, "repro")
    assert sorted(served(log)) == ["stage toy:combine", "stage toy:left", "stage toy:make", "stage toy:right"]
    for out in ["data/toy/table.parquet", "data/toy/left.npy", "data/toy/right.safetensors", "data/toy/model/weights.txt"]:
        assert (toy / out).read_bytes() == (fresh / out).read_bytes(), out
    a, b = (json.loads((r / "data/toy/metrics.json").read_text()) for r in (toy, fresh))
    a["headline"].pop("seconds"), b["headline"].pop("seconds")
    assert a == b


def test_a_failing_stage_fails_as_it_would(toy: Path, server) -> None:
    """A stage that raises, served: the client exits 1 with the runner's one-line reason on its stderr, and the
    failure is recorded where `paperdag status` finds it."""
    path, log = server
    with warm_env("off"):
        dvc(toy, "repro", "pipelines/toy/dvc.yaml")
    p = toy / "params.yaml"
    p.write_text(p.read_text().replace("fail: false", "fail: true"))
    r = cli(toy, "stage", "toy:combine", check=False, env={warm.ENV: str(path)})
    assert r.returncode == 1, r.stderr
    assert "combine was told to fail" in r.stderr
    assert "combine was told to fail" in failure_path(toy, "toy:combine").read_text()
    assert served(log) == ["stage toy:combine"]
    assert "exit 1" in log.read_text()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_signal_to_the_client_ends_the_stage(toy: Path, server, sig: signal.Signals) -> None:
    """SIGTERM to the `paperdag stage` process DVC started reaches the forked stage, which unwinds as it would
    (recorded as terminated) and the client ends as the stage did; SIGKILL to the client (no chance to forward)
    makes the server terminate the stage: no stage runs on unowned."""
    path, log = server
    with warm_env("off"):
        dvc(toy, "repro", "pipelines/toy/dvc.yaml")
    client = subprocess.Popen([sys.executable, "-m", "paperdag", "stage", "toy:combine"], cwd=toy,
                              env={**os.environ, warm.ENV: str(path), "TOY_SLOW_WRITE": "1"},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(lambda: served(log) == ["stage toy:combine"], "the server to fork the stage")
    pid = int(next(line for line in log.read_text().splitlines() if "toy:combine" in line).split("pid ")[1].split(":")[0])
    wait_for(lambda: list(toy.glob("data/toy/*model*")), "the stage to start writing its model")
    client.send_signal(sig)
    client.communicate(timeout=60)
    wait_for(lambda: not alive(pid), "the stage process to end", timeout=30)
    if sig == signal.SIGTERM:
        assert client.returncode != 0
        assert "Terminated" in failure_path(toy, "toy:combine").read_text()
    assert not (toy / "data/toy/model/config.txt").exists(), "no half-written output in place"


def test_a_client_in_another_environment_runs_its_stage_itself(toy: Path, server) -> None:
    """A variable some library reads at import differs (here HF_HOME): the server refuses, the client says so on one
    line and runs the stage in its own process, which succeeds. It asks once: the client asks before it re-executes
    itself under the numerics' environment, and the re-executed process does not ask again."""
    path, log = server
    r = cli(toy, "stage", "toy:make", env={warm.ENV: str(path), "HF_HOME": "/nonexistent-hf-home"})
    assert r.stderr.count("does not serve `paperdag stage`") == 1 and "HF_HOME" in r.stderr, r.stderr
    assert served(log) == [] and log.read_text().count("refused paperdag stage toy:make") == 1
    assert (toy / "data/toy/table.parquet").exists()


def test_no_server_or_a_stale_socket_is_no_error(toy: Path, tmp_path: Path) -> None:
    """PAPERDAG_WARM naming a socket nobody listens on (a server killed hard): the stage runs in its own process."""
    import socket

    stale = tmp_path / "stale.sock"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(stale))
    s.close()
    r = cli(toy, "stage", "toy:make", env={warm.ENV: str(stale)})
    assert r.returncode == 0 and (toy / "data/toy/table.parquet").exists()


def test_the_server_exits_when_idle(toy: Path, tmp_path: Path) -> None:
    path = tmp_path / "w.sock"
    start = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "paperdag", "warm", "--socket", str(path), "--idle", "1", "--preload", "", "--no-prefect"], cwd=toy,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "serving stages on" in r.stdout and not path.exists()
    assert time.monotonic() - start < 120


@smoke_group("rot")
def test_a_served_lm_stage_trains_the_model_a_fresh_process_trains(smoke_build, tmp_path: Path) -> None:
    """The tiny LM of rot's smoke build, trained again in a fresh process (no server): the same weights, bit for
    bit, as the (served, when the suite runs one) build's. torch, transformers and tokenizers are what the server
    preloads; this is where a difference would show."""
    repo = tmp_path / "repo"
    shutil.copytree(smoke_build("rot").repo, repo, symlinks=True)
    before = {f.relative_to(repo): f.read_bytes() for f in (repo / "data/rot").rglob("*.safetensors")}
    assert before, "rot's train stage writes safetensors weights"
    with warm_env("off"):
        dvc(repo, "repro", "-f", "-s", "pipelines/rot/dvc.yaml:rot-train@0")
    after = {f.relative_to(repo): f.read_bytes() for f in (repo / "data/rot").rglob("*.safetensors")}
    assert after.keys() == before.keys()
    assert all(after[k] == before[k] for k in before)


def test_the_suites_own_server_serves_the_suites_stages(toy: Path, warm_stage_server) -> None:
    """The suite runs one server that its workers share (conftest.py): a stage started the way the suite starts them
    is served by it, not refused for an environment that drifted (a library imported in the worker that set a
    variable)."""
    if warm_stage_server is None:
        pytest.skip("PAPERDAG_WARM=off: the suite runs without a server")
    log = warm_stage_server.with_suffix(".log")
    before = log.read_text()
    import sklearn  # noqa: F401 (sets KMP_INIT_AT_FORK in this process, as tests that import it do)

    dvc(toy, "repro", "pipelines/toy/dvc.yaml:toy-make")
    new = log.read_text()[len(before):]
    assert f"paperdag stage toy:make in {toy}" in new, new  # served (a refused client is never listed so)


def test_a_cold_run_leaves_warm_behind_whose_prefect_server_the_next_runs_use(toy: Path, tmp_path: Path) -> None:
    """A `paperdag run` that no server served (PAPERDAG_WARM unset) leaves a `paperdag warm` behind on the project's
    socket, as a build daemon does; it starts a Prefect server beside its imports and publishes it in PREFECT_HOME.
    The next runs on that home (served by the warm process, or not: PAPERDAG_WARM=off) record their flow runs there
    and start no temporary server; neither leaves a second warm, nor may one be started on the same socket. When
    warm stops, the server stops and the publication goes; a publication whose process is gone is ignored (the run
    starts its temporary server, as without warm)."""
    import urllib.request

    from paperdag.engine import prefect_server

    home, sock = tmp_path / "prefect-home", toy / warm.DEFAULT_SOCKET
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", warm.ENV)} | {"PREFECT_HOME": str(home)}

    def run(**extra: str) -> subprocess.CompletedProcess[str]:
        r = subprocess.run([sys.executable, "-m", "paperdag", "run", "toy"], cwd=toy, capture_output=True, text=True,
                           env=env | extra, timeout=600)
        assert r.returncode == 0, r.stderr
        return r

    cold = run()
    assert "started `paperdag warm` (pid " in cold.stderr, cold.stderr
    pid = int(cold.stderr.split("started `paperdag warm` (pid ", 1)[1].split(",", 1)[0])
    try:
        wait_for(lambda: warm.claimant(sock) == pid or not alive(pid), "the warm it started to hold the project's socket")
        wait_for(lambda: sock.exists() or not alive(pid), "the warm server's socket")
        log = (toy / warm.LOG).read_text
        assert alive(pid), log()
        url = prefect_server.published_server(home)
        assert url, log()
        (home / "server.log").unlink()  # the cold run's temporary server
        for extra in ({}, {warm.ENV: "off"}):  # a run forked from warm, and one in its own process
            (toy / "params.yaml").write_text((toy / "params.yaml").read_text().replace("scale: 2.0", "scale: 3.0"))
            r = run(**extra)
            assert not (home / "server.log").exists(), "no temporary server of its own"
            assert "started `paperdag warm`" not in r.stderr and warm.claimant(sock) == pid
            # Prefect's logging as configured (PREFECT_LOGGING_LEVEL=WARNING): no INFO lines about its runs
            assert "Finished in state" not in r.stderr and "Created flow run" not in r.stderr, r.stderr
            (toy / "params.yaml").write_text((toy / "params.yaml").read_text().replace("scale: 3.0", "scale: 2.0"))
        assert log().count("paperdag run toy in") == 1, log()
        second = subprocess.run([sys.executable, "-m", "paperdag", "warm", "--preload", "", "--no-prefect"], cwd=toy,
                                capture_output=True, text=True, env=env, timeout=120)
        assert second.returncode == 2 and f"another `paperdag warm` (pid {pid}) serves" in second.stderr, second.stderr
        req = urllib.request.Request(f"{url}/flow_runs/filter", data=b"{}", method="POST",
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            runs = json.load(resp)
        assert sorted(r["state"]["type"] for r in runs if r["name"]).count("COMPLETED") >= 2
        server_pid = json.loads((home / prefect_server.PUBLISHED).read_text())["pid"]
        # a publication is believed only for the process it names, which must be the server on its port
        gone = subprocess.Popen(["true"])
        gone.wait()
        for n, other in (("dead", gone.pid), ("other", os.getpid())):
            (tmp_path / n).mkdir()
            (tmp_path / n / prefect_server.PUBLISHED).write_text(json.dumps({"url": url, "pid": other}))
            assert prefect_server.published_server(tmp_path / n) is None, n
    finally:
        warm.stop(sock)
    assert not (home / prefect_server.PUBLISHED).exists() and prefect_server.published_server(home) is None
    wait_for(lambda: not alive(server_pid), "the Prefect server to stop with warm", 30)
    (home / prefect_server.PUBLISHED).write_text(json.dumps({"url": url, "pid": server_pid}))
    assert prefect_server.published_server(home) is None, "a publication whose server is gone is ignored"


def test_a_run_leaves_no_warm_where_one_is_named_turned_off_or_claimed(tmp_path: Path) -> None:
    """start_behind starts nothing where PAPERDAG_WARM names a socket or is "off", nor where a live process holds the
    project socket's claim (which claimant names); the claim is one per socket."""
    sock = tmp_path / warm.DEFAULT_SOCKET
    assert warm.start_behind(tmp_path, {warm.ENV: "off"}) is None
    assert warm.start_behind(tmp_path, {warm.ENV: str(tmp_path / "elsewhere.sock")}) is None
    hold = ("import sys, time\nfrom pathlib import Path\nfrom paperdag.engine import warm\n"
            "warm.claim(Path(sys.argv[1]))\nprint('held', flush=True)\ntime.sleep(120)\n")
    holder = subprocess.Popen([sys.executable, "-c", hold, str(sock)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert warm.claimant(sock) == holder.pid
        assert warm.start_behind(tmp_path, {}) is None
        second = subprocess.run([sys.executable, "-c", hold, str(sock)], capture_output=True, text=True, timeout=60)
        assert f"another `paperdag warm` (pid {holder.pid}) serves" in second.stderr, second.stderr
    finally:
        holder.kill()
        holder.wait()
    assert warm.claimant(sock) is None and not (tmp_path / warm.LOG).exists()


def test_installing_a_package_changes_the_libraries_key(tmp_path: Path) -> None:
    """The key's libraries are site-packages' mtimes: a package installed into a (throw-away) virtual environment
    after a process read them changes them."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    code = """
import sysconfig
from pathlib import Path
from paperdag.engine.warm import libraries
before = libraries()
assert {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]} <= set(before), before
(Path(sysconfig.get_paths()["purelib"]) / "newly_installed-1.0.dist-info").mkdir()
assert libraries() != before
"""
    src = str(Path(warm.__file__).resolve().parents[2])  # paperdag.engine.warm imports the standard library only
    r = subprocess.run([str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": src})
    assert r.returncode == 0, r.stderr


def test_a_server_whose_libraries_changed_refuses_and_retires(toy: Path, server, monkeypatch, capsys) -> None:
    """A client whose libraries differ from the server's (a package installed since the server started: the client
    side of that simulated here) is refused, runs its command itself, and the server, which can serve no client
    again, exits at once, long before its idle time (600 s)."""
    from paperdag.engine import numerics
    from paperdag.engine.params import load_params

    path, log = server
    env = {**os.environ, **numerics.environment(numerics.from_params(load_params(toy))), warm.ENV: str(path)}  # as cli.py
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}  # delegate forwards them
    monkeypatch.setenv(warm.ENV, str(path))
    monkeypatch.chdir(toy)  # the child runs in the client's working directory
    try:
        assert warm.delegate(toy, ["stage", "toy:make"], env) == 0  # served
    finally:
        for s, h in handlers.items():
            signal.signal(s, h)
    capsys.readouterr()
    monkeypatch.setattr(warm, "libraries", lambda: {"/site-packages": 1})
    assert warm.delegate(toy, ["stage", "toy:make"], env) is None
    assert "the libraries changed since the server started" in capsys.readouterr().err
    wait_for(lambda: not path.exists(), "the server to retire", 60)
    assert "retiring once its stages are done" in log.read_text()


def test_warm_keeps_its_prefect_server_while_a_run_uses_it(toy: Path, tmp_path: Path) -> None:
    """A warm whose idle time is up does not stop the Prefect server a run (of another process: not one of its
    children) still uses; once the run lets go it retires it: unpublished, stopped, and warm exits."""
    from paperdag.engine import prefect_server

    home, path = tmp_path / "prefect-home", tmp_path / "w.sock"
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"} | {"PREFECT_HOME": str(home)}
    proc = subprocess.Popen([sys.executable, "-m", "paperdag", "warm", "--socket", str(path), "--idle", "1",
                             "--preload", ""], cwd=toy, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        with prefect_server.lease(home, exclusive=False):  # what a `paperdag run` on the server holds
            wait_for(lambda: prefect_server.published_server(home) is not None or proc.poll() is not None,
                     "warm's Prefect server")
            time.sleep(1 + 2 * warm.RECHECK_S)  # idle for longer than --idle, asked again twice
            assert proc.poll() is None and prefect_server.published_server(home), "retired under a run"
        wait_for(lambda: proc.poll() is not None, "warm to exit once the run let go", 60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0 and not (home / prefect_server.PUBLISHED).exists()


def test_a_served_child_carries_what_the_server_learnt_at_its_imports() -> None:
    """A served child imports the project's code afresh, this module included; what the server learnt when it
    imported Prefect (its logging configuration's inputs) reaches the fresh copy, or every served run would make
    its logging configuration again."""
    code = """
from paperdag.engine import warm
warm.PREFECT_LOGGING = "the server's"
old = warm
warm.fresh_project_code()
import paperdag.engine.warm as fresh
assert fresh is not old and fresh.PREFECT_LOGGING == "the server's", fresh.PREFECT_LOGGING
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_prefect_logging_inputs_see_a_logging_setting_and_not_the_api_url(tmp_path: Path) -> None:
    code = """
import os
import prefect.context
from paperdag.engine.settings import prefect_logging_inputs
def now():
    prefect.context.refresh_global_settings_context()
    return prefect_logging_inputs()
base = now()
os.environ["PREFECT_API_URL"] = "http://127.0.0.1:9/api"
assert now() == base, "the API's URL is not a logging input"
os.environ["PREFECT_LOGGING_LEVEL"] = "DEBUG"
assert now() != base, "the level is"
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")} | {"PREFECT_HOME": str(tmp_path)}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr

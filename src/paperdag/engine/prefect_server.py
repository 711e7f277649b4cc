"""The Prefect servers paperdag starts: from a migrated database, children that die with their parent.

Without PREFECT_API_URL, Prefect starts its own temporary server, which on a fresh PREFECT_HOME runs its ~116
SQLite migrations first (20-27 s here) and outlives a `paperdag run` killed with SIGKILL. This module starts the
same server (uvicorn on Prefect's app factory, as Prefect's SubprocessASGIServer does) itself:

- its database starts as a copy of a template made once per installation (`python -m
  paperdag.engine.prefect_server`, which `make` runs; built on first use otherwise), when PREFECT_HOME has none:
  migrated, with Prefect's block types registered. A server on a database at the template's migration is told to
  skip both steps, which it would otherwise run on every start (~1.3 s of its ~4.8 s here);
- on Linux the server gets PR_SET_PDEATHSIG: the kernel sends it SIGTERM when the `paperdag run` dies, however.

`paperdag warm` runs the same server for as long as it lives (`lasting_server`) and publishes it in PREFECT_HOME;
a run on that home uses it instead of starting a temporary one, under a shared lease that keeps warm from retiring
it meanwhile.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import IO

from paperdag.engine.errors import PaperdagError
from paperdag.engine.fsutil import sqlite_template

_PR_SET_PDEATHSIG = 1
PUBLISHED = "paperdag-server.json"  # in PREFECT_HOME: the URL and pid of a `paperdag warm`'s lasting server
LEASE = "paperdag-server.lock"  # in PREFECT_HOME: shared by each run on the lasting server, exclusive to retire it


def die_with_parent() -> None:
    """preexec_fn: ask the kernel to SIGTERM this child when the thread that started it dies (Linux only)."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def template_path() -> Path:
    from importlib import metadata

    return Path(sys.prefix) / "share" / "paperdag" / f"prefect-{metadata.version('prefect')}.db"


def build_template() -> Path:
    """Once per installation, into the virtual environment (a no-op when it exists): the database a first start of
    Prefect's server leaves, its migrations run and Prefect's block types registered."""
    def make(tmp: Path) -> Path:
        db = tmp / "prefect.db"
        env = {**os.environ, "PREFECT_HOME": str(tmp), "PREFECT_API_URL": "",
               "PREFECT_API_DATABASE_CONNECTION_URL": f"sqlite+aiosqlite:///{db}"}
        r = subprocess.run([sys.executable, "-m", "prefect", "server", "database", "upgrade", "-y"], env=env,
                           capture_output=True, text=True)
        if r.returncode != 0 or not db.exists():
            raise PaperdagError(f"could not migrate a Prefect database template: {(r.stderr or r.stdout)[-500:]}")
        # one start of the server registers the block types, which every later start would otherwise do (~1 s)
        with open(tmp / "server.log", "w") as log:
            proc, url = _start(env, log)
            try:
                wait_healthy(url, proc, 120, tmp / "server.log")
            finally:
                stop(proc)
        return db

    return sqlite_template(template_path(), make)


def _settled(db: Path, template: Path) -> bool:
    """Whether `db` is at the template's migration and holds at least its block types: a server on it has nothing
    to migrate or register, and skips both (~1.3 s of its start)."""
    def state(path: Path) -> tuple[list[tuple[str, ...]], int]:
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as c:
            return (c.execute("SELECT version_num FROM alembic_version").fetchall(),
                    c.execute("SELECT count(*) FROM block_type").fetchone()[0])

    try:
        (revision, blocks), (want_revision, want_blocks) = state(db), state(template)
    except sqlite3.Error:
        return False
    return revision == want_revision and blocks >= want_blocks


def _start(env: dict[str, str], log: IO[str]) -> tuple[subprocess.Popen, str]:
    """Prefect's server (uvicorn on Prefect's app factory, as Prefect's SubprocessASGIServer runs it) on a free port,
    a child that dies with this thread; returns it and its API URL."""
    spec = importlib.util.find_spec("prefect")
    assert spec is not None and spec.origin is not None
    port = free_port()
    env = {**env, "PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1", "PREFECT__SERVER_FINAL": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "--app-dir", str(Path(spec.origin).parent.parent), "--factory",
         "prefect.server.api.server:create_app", "--host", "127.0.0.1", "--port", str(port), "--log-level", "error",
         "--lifespan", "on"],
        env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, preexec_fn=die_with_parent)
    return proc, f"http://127.0.0.1:{port}/api"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(url: str, proc: subprocess.Popen, timeout: float, log: Path) -> None:
    """Wait until the Prefect API at `url` answers its health check; raise, with the server log's tail, if the
    server process exits or `timeout` seconds pass first."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            tail = log.read_text()[-1500:] if log.exists() else ""
            raise PaperdagError(f"the Prefect server at {url} did not start within {timeout:.0f} s: {tail}")
        time.sleep(0.05)


def stop(proc: subprocess.Popen, grace: float = 10) -> None:
    """SIGTERM, then SIGKILL after `grace` seconds; reaped either way."""
    proc.terminate()
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextmanager
def running_server(home: Path, services: bool = True) -> Iterator[str]:
    """A real `prefect server start` (what a team points PREFECT_API_URL at) on a free port, for the block's length;
    yields its API URL. Used by the tests and the engine benchmark. Its database starts from the template, as a
    team's long-running server's has been migrated since its first start. `services=False`: the API alone
    (`--no-services`: no scheduler, late-run, task-run recorder, event persister or other loop service, so it keeps
    flow runs and deployments but no task runs, events or scheduled runs), for a caller that only reads and writes
    flow runs and deployments through the API, as the test suite does (idle, the services cost ~0.02 CPU-s a second)."""
    url = f"http://127.0.0.1:{(port := free_port())}/api"
    env = {**_database_env(home), "PREFECT_HOME": str(home), "PREFECT_API_URL": "",
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "PREFECT_LOGGING_LEVEL": "WARNING"}
    with open(home / "server.log", "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port",
                                 str(port), *([] if services else ["--no-services"])],
                                env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            wait_healthy(url, proc, 180, home / "server.log")
            yield url
        finally:
            stop(proc)


def _database_env(home: Path) -> dict[str, str]:
    """The environment of a server on `home`'s database: a copy of the template when there is none, and a database
    at the template's migration told to skip migrating and registering."""
    home.mkdir(parents=True, exist_ok=True)
    db = home / "prefect.db"
    env = dict(os.environ)
    if not os.environ.get("PREFECT_API_DATABASE_CONNECTION_URL"):
        try:
            template = build_template()
            if not db.exists():
                shutil.copyfile(template, db.with_suffix(".tmp"))
                os.replace(db.with_suffix(".tmp"), db)
            if _settled(db, template):
                env.update(PREFECT_API_DATABASE_MIGRATE_ON_START="false", PREFECT_API_BLOCKS_REGISTER_ON_START="false")
        except (OSError, PaperdagError) as e:  # Prefect migrates a fresh database itself: slower, not wrong
            print(f"[paperdag] no Prefect database template ({e}); the server migrates its own", file=sys.stderr)
    return env


def _home() -> Path:
    return Path(os.environ.get("PREFECT_HOME") or Path.home() / ".prefect")


@contextmanager
def _api(updates: dict[str, str]) -> Iterator[None]:
    """os.environ with `updates` for the block's length, restored after."""
    saved = {k: os.environ.get(k) for k in updates}
    os.environ.update(updates)
    try:
        yield
    finally:
        for k, v in saved.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)


@contextmanager
def lease(home: Path, exclusive: bool) -> Iterator[bool]:
    """The lasting server's lease in `home` (locks.lease on LEASE): shared by each run on it, exclusive to retire it."""
    from paperdag.engine import locks

    home.mkdir(parents=True, exist_ok=True)
    with locks.lease(home / LEASE, exclusive) as held:
        yield held


class LastingServer:
    """The Prefect server of `paperdag warm` (`lasting_server`)."""

    def __init__(self, home: Path, proc: subprocess.Popen, url: str, log: IO[str]) -> None:
        self.home, self.proc, self.url, self.log = home, proc, url, log

    def ready(self) -> str:
        """Wait until the server is healthy, then publish it in PREFECT_HOME; return its URL."""
        self.log.flush()
        wait_healthy(self.url, self.proc, 120, self.home / "warm-server.log")
        from paperdag.engine.fsutil import atomic_write_text

        atomic_write_text(self.home / PUBLISHED, json.dumps({"url": self.url, "pid": self.proc.pid}) + "\n")
        return self.url

    def retire(self) -> bool:
        """Unpublish the server unless a run uses it (holds the lease): then False, and it stays published. A run
        that looks for it afterwards starts its own temporary server."""
        with lease(self.home, exclusive=True) as free:
            if free:
                self.unpublish()
            return free

    def unpublish(self) -> None:
        marker = self.home / PUBLISHED
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            if json.loads(marker.read_text())["pid"] == self.proc.pid:  # ours, not another warm's
                marker.unlink()


@contextmanager
def lasting_server(home: Path) -> Iterator[LastingServer]:
    """The Prefect server of `paperdag warm`, for the block's length: started at once (from the template, a child
    that dies with this process); `ready()` waits until it is healthy and publishes its URL in `home`, where every
    `paperdag run` on this PREFECT_HOME finds it (`temporary_server`) instead of starting its own; `retire()`
    unpublishes it unless a run still uses it. Unpublished and stopped when the block ends, used or not (warm
    stopped by a signal: a run still on it loses its server)."""
    env = _database_env(home)
    log = open(home / "warm-server.log", "w")  # noqa: SIM115 (the server process writes it while it lives)
    proc, url = _start(env, log)
    server = LastingServer(home, proc, url, log)
    try:
        yield server
    finally:
        server.unpublish()
        stop(proc)
        log.close()


def published_server(home: Path) -> str | None:
    """The API URL of the lasting server published in `home` (a running `paperdag warm`'s), or None: none published,
    its process gone (or, on Linux, the pid now another process's: its command line lacks the port), or it does not
    answer its health check."""
    try:
        doc = json.loads((home / PUBLISHED).read_text())
        pid, url = int(doc["pid"]), str(doc["url"])
        os.kill(pid, 0)
        port = url.rsplit(":", 1)[1].split("/", 1)[0]
        if Path("/proc/self").exists() and port.encode() not in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0"):
            return None
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return None
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=10) as r:
            return url if r.status == 200 else None
    except OSError:
        return None


@contextmanager
def temporary_server() -> Iterator[Callable[[], None]]:
    """For the block's length, PREFECT_API_URL points at a temporary server (unless it was set already, or a
    `paperdag warm` serves a Prefect server for this PREFECT_HOME: then at that one).

    Start this before importing Prefect (its settings are read at import) and call the yielded `ready()` before the
    first flow: the server starts while the caller imports Prefect and plans."""
    if os.environ.get("PREFECT_API_URL"):
        yield lambda: None
        return
    home = _home()
    with lease(home, exclusive=False):  # held while the run uses it: warm does not retire it under the run
        lasting = published_server(home)
        if lasting:
            with _api({"PREFECT_API_URL": lasting}):
                yield lambda: None
            return
    env = _database_env(home)
    log = open(home / "server.log", "w")  # noqa: SIM115 (the server process writes it while it lives)
    proc, url = _start(env, log)

    def ready() -> None:
        log.flush()
        wait_healthy(url, proc, float(os.environ.get("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")),
                     home / "server.log")

    # a temporary server's logs die with it, and a log batch flushed after it stopped would print a connection error
    try:
        with _api({"PREFECT_API_URL": url, "PREFECT_LOGGING_TO_API_ENABLED": "false"}):
            yield ready
    finally:
        stop(proc)
        log.close()

if __name__ == "__main__":
    print(build_template())

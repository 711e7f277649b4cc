"""`paperdag run PIPELINE`: check, plan, and only then start Prefect.

In this order, each step cheap before the next one costs: a Dask scheduler named with --address answers and has a
worker; the run lock and DVC's lock (a second run is refused at once); `--set` overrides, validated before
params.yaml is written; dvc.yaml rendered; a temporary Prefect server started (it takes seconds) while DVC plans the
stale stages and this process imports Prefect; the flow (flow.py).
An up-to-date pipeline stops the server at once.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from paperdag.engine import locks, warm
from paperdag.engine.errors import StageError
from paperdag.engine.render import ensure_rendered
from paperdag.engine.runner import validated_project
from paperdag.engine.settings import prefect_defaults
from paperdag.engine.status import stale_stages

if TYPE_CHECKING:
    from distributed import Client


def quiet_prefect() -> None:
    """A failed stage is reported once, on one line (flow.py); Prefect's own task and flow-run logs would repeat it
    as tracebacks."""
    import logging

    for name in ("prefect.task_runs", "prefect.flow_runs"):
        logging.getLogger(name).setLevel(logging.CRITICAL)


def _settings_from_environment() -> None:
    """Prefect reads its settings (PREFECT_HOME, PREFECT_API_URL, ...) and its logging configuration when it is
    imported. A process that had imported it before this run set them (a warm server's child: warm.py) reads them
    again, through the refresh Prefect provides for environment changes; its logging configuration too (~0.3 s),
    unless what it is made from is what it was at the import (settings.prefect_logging_inputs)."""
    import prefect.context
    from prefect.logging.configuration import setup_logging

    from paperdag.engine.settings import prefect_logging_inputs

    prefect.context.refresh_global_settings_context()
    if warm.PREFECT_LOGGING is None or prefect_logging_inputs() != warm.PREFECT_LOGGING:
        setup_logging()


def _deliver_logs_and_events() -> None:
    """Prefect's log and event workers send their last batches when the interpreter exits; a run served by a warm
    server ends with os._exit and would lose them. (Not for a run in its own process: its exit drains them, and
    draining here, before its temporary server stops, cost ~1-2 s a run.)"""
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    for worker in (APILogWorker, EventsWorker):
        worker.drain_all(timeout=5)


def _no_heartbeats() -> contextlib.AbstractContextManager[object]:
    """No flow-run heartbeats: a temporary server dies with the run and nobody reads them, and stopping their thread
    costs up to a second at the end of every run (it sleeps in one-second steps)."""
    from prefect import settings

    return settings.temporary_settings(updates={settings.PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None})


DASK_CONNECT_S = 30.0  # how long to wait for a Dask scheduler named with --address to answer (distributed's default)
DASK_WORKER_WAIT_S = 30.0  # --wait-for-workers' default
WATCH_POLL_S = 1.0  # how often a run on a Dask cluster asks its scheduler for workers (dask_watchdog)
WATCH_ANSWER_S = 5.0  # the watchdog's shortest wait for the scheduler's answer (unanswered counts as no worker)


def require_dask_worker(address: str, wait: float = DASK_WORKER_WAIT_S) -> None:
    """A StageError naming `address` where it is not a scheduler's address, where no Dask scheduler answers there
    (DASK_CONNECT_S), or where the scheduler has no worker after `wait` seconds: a stage sent to a scheduler without
    workers waits there forever, and so did the run. wait <= 0: the workers are not checked (a cluster that starts
    them when tasks arrive)."""
    from distributed.comm.addressing import get_address_host_port
    from distributed.exceptions import WorkerStartTimeoutError

    try:  # checked first: a Client refused its address only after its constructor, and then hung on exit
        get_address_host_port(address)
    except ValueError as e:
        raise StageError(f"--address {address!r} is not a Dask scheduler's address (tcp://HOST:PORT): {e}") from None
    try:
        client = _client(address)
    except (OSError, ImportError, TypeError) as e:  # unreachable or slow (TimeoutError), versions, TLS not configured
        raise StageError(f"cannot reach a Dask scheduler at {address} (--address): {type(e).__name__}: {e}") from None
    with client:
        if wait <= 0 or client.scheduler_info().get("workers"):
            return
        print(f"waiting up to {wait:g} s for a worker of the Dask scheduler at {address}", file=sys.stderr, flush=True)
        try:
            client.wait_for_workers(1, timeout=wait)
        except WorkerStartTimeoutError:
            raise StageError(f"the Dask scheduler at {address} has no worker (waited {wait:g} s): a stage sent there "
                             f"would wait forever; start one (`dask worker {address}`) and run again, or pass "
                             "--wait-for-workers 0 to a cluster that starts them when tasks arrive") from None


def _client(address: str) -> Client:
    """A distributed Client of the scheduler at `address`, or an OSError within DASK_CONNECT_S (+2 s): its handshake
    exchanged first, under a bound (_handshake), since Client's own connection waits for the handshake forever."""
    from distributed import Client

    _handshake(address, DASK_CONNECT_S)
    return Client(address, timeout=DASK_CONNECT_S, set_as_default=False)


def _handshake(address: str, timeout: float) -> None:
    """Connect to `address` and exchange distributed's handshake, as a Client's connection does (its security
    included), within `timeout` seconds (TimeoutError otherwise). distributed bounds the connection but not the
    handshake after it: a peer that accepts and never answers (not a Dask scheduler, or a hung one) held Client()
    forever, and so the run. On a thread of its own, so that a caller inside an event loop (a notebook) can call it."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    from distributed.client import _maybe_call_security_loader  # how Client finds its security, config aside
    from distributed.comm import connect
    from distributed.security import Security

    security = _maybe_call_security_loader(address) or Security()

    async def probe() -> None:
        # connect() bounds its own connecting (an OSError of its own); the outer bound, a little later, is the
        # handshake's, so that a host that never connects is not reported as one that never answered
        try:
            comm = await asyncio.wait_for(connect(address, timeout=timeout, **security.get_connection_args("client")),
                                          timeout + 2)
        except TimeoutError:
            raise TimeoutError(f"connected, and no answer to distributed's handshake within {timeout + 2:g} s (is a "
                               "Dask scheduler listening there?)") from None
        await comm.close()

    with ThreadPoolExecutor(1, thread_name_prefix="dask handshake") as pool:
        pool.submit(asyncio.run, probe()).result()


@contextlib.contextmanager
def dask_watchdog(address: str, wait: float) -> Iterator[None]:
    """While a run's stages are on the Dask scheduler at `address`: where it has had no worker (every worker left or
    died) or has not answered (it stopped, or hangs) for `wait` seconds, the stages it holds would wait forever, and
    so would the run; the flow is told to stop (flow.abandon), naming it and why. wait <= 0: not watched (a cluster
    that starts its workers when tasks arrive)."""
    from paperdag.engine import flow

    if wait <= 0:
        yield
        return
    stop = threading.Event()

    def workers(client: Client | None, within: float) -> int | None:
        """How many workers the scheduler has, or None where it does not answer within `within` seconds (gone, or
        hung: a question to a hung scheduler is otherwise never answered, and the watchdog waited with the run)."""
        try:
            return client.sync(client.scheduler.identity, n_workers=0, callback_timeout=within)["n_workers"] \
                if client else None
        except Exception:
            return None

    def watch() -> None:
        try:
            client = _client(address)
        except (OSError, ImportError, TypeError):
            client = None
        since: float | None = None  # when the scheduler was first found without a worker, or first not answering
        try:
            while not stop.wait(WATCH_POLL_S):
                asked = time.monotonic()
                # a slow answer is an answer: once one is missing, the next may take what is left of `wait`
                found = workers(client, WATCH_ANSWER_S if since is None else max(WATCH_ANSWER_S, since + wait - asked))
                if found:
                    since = None
                    continue
                since = since or asked
                if time.monotonic() - since >= wait and not stop.is_set():
                    what = (f"has had no worker for {wait:g} s (every worker left or died)" if found is not None
                            else f"has not answered for {time.monotonic() - since:.0f} s (it stopped, or hangs)")
                    flow.abandon(f"the Dask scheduler at {address} {what}: the stages still on it would wait forever, "
                                 "so the run stopped; start a worker (or the scheduler) and run again (the stages that "
                                 "finished are recorded)")
                    return
        finally:
            if client is not None:
                client.close(timeout=WATCH_ANSWER_S)

    watcher = threading.Thread(target=watch, name="dask watchdog", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        stop.set()
        watcher.join(timeout=DASK_CONNECT_S)


def run_pipeline(root: Path, pipeline: str, runner: str = "thread", address: str | None = None,
                 workers: int | None = None, overrides: Sequence[str] = (),
                 wait_for_workers: float | None = None) -> dict[str, str]:
    """Run the pipeline's stale stages as a Prefect flow; return stage address -> 'done'. Raises StageError naming
    the failed stages (each already reported on one line)."""
    root = Path(root).resolve()
    if runner == "dask" and address:
        require_dask_worker(address, DASK_WORKER_WAIT_S if wait_for_workers is None else wait_for_workers)
    preloaded = "prefect" in sys.modules  # imported before its settings below were written
    prefect_defaults(root)
    with locks.run_lock(root):
        locks.refuse_if_dvc_busy(root)
        if overrides:
            from paperdag.engine.params import set_params

            # the whole project must validate with the new values before they are written
            for key, old, new in set_params(root, list(overrides), lambda p: validated_project(root, params=p)):
                print(f"params.yaml: {key}: {old!r} -> {new!r}", file=sys.stderr)
        project = validated_project(root, [pipeline])  # a bad value is refused before Prefect starts
        ensure_rendered(project)
        from paperdag.engine.prefect_server import temporary_server

        # heartbeats are Prefect's sign of a live flow run, read only by an automation a user sets up on a lasting
        # server: exported, they are kept
        beats = any(os.environ.get(k) for k in ("PREFECT_FLOWS_HEARTBEAT_FREQUENCY", "PREFECT_RUNNER_HEARTBEAT_FREQUENCY"))
        # the server (seconds to start: Prefect's own imports) starts while DVC plans; it is stopped at once when
        # there is nothing to run (Prefect is not even imported then: an up-to-date run stays a second or two)
        with temporary_server() as ready:
            todo = stale_stages(project, pipeline)
            if not todo:
                print(f"{pipeline}: every stage is up to date", file=sys.stderr)
                return {}
            from paperdag.engine import flow  # imports Prefect, which reads PREFECT_API_URL now

            if preloaded:
                _settings_from_environment()
            quiet_prefect()

            configured = flow.paperdag_pipeline.with_options(
                task_runner=flow.task_runner(runner, address, workers, len(todo)))
            ready()
            wait = DASK_WORKER_WAIT_S if wait_for_workers is None else wait_for_workers
            watched = dask_watchdog(address, wait) if runner == "dask" and address else contextlib.nullcontext()
            flow.abandoned(clear=True)  # an earlier run's reason in this process is not this run's
            with contextlib.nullcontext() if beats else _no_heartbeats(), watched:
                state = configured(root=str(root), pipeline=pipeline, stages=[s.address for s in todo], return_state=True)
            if warm.client_pid() != os.getpid():  # a warm server's child: it ends with os._exit
                _deliver_logs_and_events()
        if state.is_failed():
            raise StageError(flow.abandoned() or state.message or f"{pipeline}: the flow failed")
        return state.result()

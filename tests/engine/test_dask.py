"""A run on a Dask cluster (orchestrate.require_dask_worker, orchestrate.dask_watchdog) stops, with one line naming
the scheduler, wherever its stages would otherwise wait forever: no worker, no scheduler, a peer that never answers
distributed's handshake, a scheduler that stops answering mid-run. The runs end to end on a cluster (Prefect, DVC):
tests/engine/test_flow.py."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support import wait_for


@pytest.mark.timeout(120)  # without the fix a mute peer held the check forever: fail, not wait for the suite's 1200 s
def test_dask_runner_refuses_a_scheduler_without_workers_and_an_address_without_one(tmp_path: Path, monkeypatch,
                                                                                    capsys) -> None:
    """`paperdag run --runner dask --address` checks the scheduler before anything else (run lock, params, Prefect;
    here there is not even a project): one without a worker after --wait-for-workers stops the run with a message
    naming it (a stage sent there waited forever, and so did the run), as do an address where none answers and one
    that is not an address; a wait of 0 checks no worker."""
    import re

    from distributed import LocalCluster

    from paperdag.engine import orchestrate
    from paperdag.engine.errors import StageError

    with LocalCluster(n_workers=0, processes=False, protocol="tcp", dashboard_address=None) as cluster:
        address = cluster.scheduler_address  # tcp://: what another process reaches
        with pytest.raises(StageError, match=rf"Dask scheduler at {re.escape(address)} has no worker \(waited 0.5 s\)"):
            orchestrate.run_pipeline(tmp_path, "toy", "dask", address, wait_for_workers=0.5)
        assert f"waiting up to 0.5 s for a worker of the Dask scheduler at {address}" in capsys.readouterr().err
        orchestrate.require_dask_worker(address, 0)  # a cluster that starts its workers when tasks arrive
    monkeypatch.setattr(orchestrate, "DASK_CONNECT_S", 0.5)
    with pytest.raises(StageError, match=rf"cannot reach a Dask scheduler at {re.escape(address)}"):
        orchestrate.require_dask_worker(address)  # the cluster is gone
    # a peer that accepts the connection and never answers distributed's handshake (not a scheduler, or a hung one):
    # distributed bounds the connection, not the handshake after it, and the run waited forever
    with socket.create_server(("127.0.0.1", 0)) as mute:
        silent = f"tcp://127.0.0.1:{mute.getsockname()[1]}"
        started = time.monotonic()
        said = (rf"cannot reach a Dask scheduler at {re.escape(silent)} \(--address\): "
                "TimeoutError: connected, and no answer to distributed's handshake")
        with pytest.raises(StageError, match=said):
            orchestrate.require_dask_worker(silent)
        assert time.monotonic() - started < 10
    with pytest.raises(StageError, match="'scheduler:8786x' is not a Dask scheduler's address"):
        orchestrate.require_dask_worker("scheduler:8786x")


@pytest.mark.timeout(120)
def test_the_watchdog_stops_a_run_whose_scheduler_stops_answering() -> None:
    """A scheduler that hangs mid-run (here SIGSTOP; a deadlocked or swapped-out one alike) answers no question: the
    watchdog's asking it for workers waited forever, and so did the run. An unanswered question now counts as no
    worker, so the flow is told to stop once that has lasted `wait` seconds; while the scheduler answers with a worker,
    it is not."""
    from paperdag.engine import flow, orchestrate
    from paperdag.engine.prefect_server import free_port

    address = f"tcp://127.0.0.1:{free_port()}"
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    scheduler = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port",
                                  address.rsplit(":", 1)[1], "--no-dashboard"], **quiet)
    worker = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads", "1",
                               "--no-nanny", "--no-dashboard"], **quiet)
    flow.abandoned(clear=True)
    try:
        orchestrate.require_dask_worker(address, 60)  # the scheduler up, with its worker
        with orchestrate.dask_watchdog(address, 2):
            time.sleep(3 + orchestrate.WATCH_POLL_S)  # asked, answered with a worker, for longer than `wait`
            assert flow.abandoned() is None
            os.kill(scheduler.pid, signal.SIGSTOP)
            stopped = time.monotonic()
            wait_for(lambda: flow.abandoned() is not None, "the watchdog to give up on the hung scheduler", 30)
            assert time.monotonic() - stopped < max(2, orchestrate.WATCH_ANSWER_S) + orchestrate.WATCH_POLL_S + 5
            assert f"the Dask scheduler at {address} has not answered for " in flow.abandoned()
    finally:
        flow.abandoned(clear=True)
        for proc in (worker, scheduler):
            proc.kill()  # a stopped process dies of SIGKILL too
            proc.wait(30)

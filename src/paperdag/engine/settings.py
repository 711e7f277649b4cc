"""Environment defaults for the embedded services; set before Prefect is imported. Anything exported wins."""

from __future__ import annotations

import os
from pathlib import Path


def prefect_defaults(root: Path) -> None:
    """Quiet, reliable Prefect settings (see STACK_NOTES): a project-local home, a patient temporary server."""
    os.environ.setdefault("PREFECT_HOME", str(Path(root).resolve() / ".prefect"))
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    # Prefect persists results with cloudpickle; the project forbids pickle, and DVC keeps the outputs anyway
    os.environ.setdefault("PREFECT_RESULTS_PERSIST_BY_DEFAULT", "false")
    os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "error")
    os.environ.setdefault("DVC_NO_ANALYTICS", "1")

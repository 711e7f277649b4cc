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


def prefect_logging_inputs() -> str:
    """What Prefect's logging configuration is made from, as resolved now (Prefect imported): its logging settings
    from every source (environment, profile, prefect.toml, .env), the logging.yml it reads (path and mtime), and
    whether stderr is a terminal (its console handler's colours)."""
    import json

    from prefect.settings import get_current_settings

    logging = get_current_settings().logging
    path = Path(logging.config_path) if logging.config_path else None
    stamp = path.stat().st_mtime_ns if path is not None and path.exists() else None
    return json.dumps([logging.model_dump(mode="json"), str(path), stamp, os.isatty(2)], sort_keys=True, default=str)

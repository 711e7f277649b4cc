"""A project's first MLflow store: a copy of the installation's template (paperdag.engine.tracking.build_template)
against the store MLflow makes itself (its tables created and every migration run on first open).

In one process with MLflow imported (as a drain or a reader has it), interleaved, each repeat on new project
directories: the time from "no mlflow.db" to a client that has created an experiment, each way. The template is
made first if missing (not timed: once per installation, by `make`).

Usage: .venv/bin/python benchmarks/bench_mlflow_store.py [--repeats 7]; writes benchmarks/results/mlflow_store.json.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    os.environ.pop("MLFLOW_TRACKING_URI", None)
    logging.getLogger("mlflow").setLevel(logging.WARNING)
    logging.getLogger("alembic").setLevel(logging.WARNING)
    from mlflow.tracking import MlflowClient

    from paperdag.engine import tracking

    tracking.build_template()

    def first_open(root: Path, template: bool) -> float:
        t = time.perf_counter()
        if template:
            client = tracking.client(root, drain=False)
        else:  # what MLflow does on a new store
            client = MlflowClient(tracking_uri=tracking.tracking_uri(root))
        tracking.experiment_id(client, root, "bench")
        return time.perf_counter() - t

    own, copied = [], []
    with tempfile.TemporaryDirectory(prefix="paperdag-bench-store-") as tmp:
        (Path(tmp) / "warm-up").mkdir()
        first_open(Path(tmp) / "warm-up", False)  # MLflow's lazy imports, untimed
        for i in range(args.repeats):
            for way, times in ((False, own), (True, copied)):
                root = Path(tmp) / f"{i}-{way}"
                root.mkdir()
                times.append(first_open(root, way))
    result = {"repeats": args.repeats, "mlflow_makes_it_s": statistics.median(own),
              "template_copy_s": statistics.median(copied),
              "ratio": statistics.median(own) / statistics.median(copied),
              "all": {"mlflow_makes_it_s": own, "template_copy_s": copied}}
    out = HERE / "results" / "mlflow_store.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"a project's first MLflow store, medians of {args.repeats}: MLflow makes it {result['mlflow_makes_it_s']:.2f} s, "
          f"a copy of the template {result['template_copy_s']:.3f} s ({result['ratio']:.0f}x); wrote {out.name}")


if __name__ == "__main__":
    main()

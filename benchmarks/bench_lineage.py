"""The lineage commands on this whole repository: `paperdag audit`, `paperdag why`, `paperdag lineage`, `paperdag
export --ro-crate`, `paperdag report`, each the median of a few calls, on a copy of the checkout (the commands drain
run records and write the run index: the checkout itself is left alone). The first audit after the copy rebuilds
the run index from MLflow; it is reported apart ("cold").

Usage: .venv/bin/python benchmarks/bench_lineage.py [--repeats 3]; writes benchmarks/results/lineage.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SKIP = {".venv", "report", ".prefect", "__pycache__"}


def timed(cwd: Path, *args: str, ok: tuple[int, ...] = (0,)) -> float:
    """Seconds one `paperdag ARGS` takes (exit codes in `ok` accepted: audit and why --check exit 1 on findings)."""
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "paperdag", *args], cwd=cwd, capture_output=True, text=True,
                       env={**os.environ, "PAPERDAG_ROOT": str(cwd)})
    if r.returncode not in ok:
        raise SystemExit(f"paperdag {' '.join(args)} exited {r.returncode}:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        shutil.copytree(REPO, repo, symlinks=True, ignore=lambda d, names: [n for n in names if n in SKIP])
        for index in (repo / ".paperdag").glob("run-index*.jsonl"):  # cold: the first reader rebuilds it from MLflow
            index.unlink()
        from paperdag.engine import dvc

        locked = dvc.lock(repo)["stages"]
        results = {
            "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                        "load_1min_at_start": os.getloadavg()[0]},
            "repository": {"dvc_lock_stages": len(locked), "pipelines": len(list((repo / "pipelines").glob("*.yaml")))},
            "audit_cold_s": timed(repo, "audit", ok=(0, 1)),
        }
        target = "data/mfc/metrics.json"
        commands = {
            "audit_s": ("audit",),
            "why_s": ("why",),
            "lineage_s": ("lineage", target),
            "export_ro_crate_s": ("export", "--ro-crate", str(Path(tmp) / "crate")),
            "report_s": ("report", "--out", str(Path(tmp) / "report")),
        }
        for name, cmd in commands.items():
            results[name] = statistics.median(timed(repo, *cmd, ok=(0, 1)) for _ in range(args.repeats))
    results["target_s"] = 5.0
    out = HERE / "results" / "lineage.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()

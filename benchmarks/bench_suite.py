"""What `make test` costs, per pipeline and for the rest, and what it would cost with more pipelines.

Runs the suite once as `make test` runs it (pytest with the project's addopts: three workers), with a JUnit report,
and splits the tests' seconds (setup, call and teardown: a pipeline's smoke build is counted in the first test of
its smoke group to run) into each pipeline's (its smoke group, see owner(), and tests/methods/<pipeline>/) and the
rest (engine, blocks, statistics; its ten slowest tests are listed), with the 25 slowest files and the CPU-seconds
the machine was busy meanwhile (/proc/stat: the suite is CPU-bound, so this is what it costs). The estimate for
more pipelines assumes each new pipeline costs the mean of the present ones and the workers stay as busy as in this
run (wall = test-seconds / that parallelism); and the test-seconds each new pipeline may cost for the suite to stay
under the target (--minutes).

    .venv/bin/python benchmarks/bench_suite.py [--pipelines 19] [-- PYTEST ARGS]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


def owner(classname: str, name: str, pipelines: set[str]) -> str:
    """The pipeline a test belongs to, or "" for the rest: the tests in a pipeline's smoke group (xdist appends
    `@smoke-<pipeline>` to their names; an engine test that reuses that pipeline's smoke build is one of them, since
    whichever test of the group runs first pays for the build), then those under tests/methods/<pipeline>/."""
    group = re.search(r"@smoke-([a-z_]+)$", name)
    if group and group.group(1) in pipelines:
        return group.group(1)
    parts = classname.split(".")
    if parts[:2] == ["tests", "methods"] and len(parts) > 2 and parts[2] in pipelines:
        return parts[2]
    return ""


def busy_cpu_s() -> float | None:
    """CPU-seconds this machine has spent busy since boot (all cores; /proc/stat, Linux), or None elsewhere."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:8]]
    except (OSError, ValueError):
        return None
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")  # less idle and iowait


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pipelines", type=int, default=19, help="how many pipelines to estimate the suite for")
    ap.add_argument("--minutes", type=float, default=10, help="the suite's target: the budget each new pipeline has")
    ap.add_argument("pytest_args", nargs="*")
    args = ap.parse_args()
    pipelines = {p.stem for p in (REPO / "pipelines").glob("*.yaml")}
    with tempfile.TemporaryDirectory(prefix="paperdag-suite-") as tmp:
        report = Path(tmp) / "junit.xml"
        t, busy = time.perf_counter(), busy_cpu_s()
        r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}",
                            *args.pytest_args], cwd=REPO)
        wall = time.perf_counter() - t
        busy = busy_cpu_s() - busy if busy is not None else None
        cases = list(ET.parse(report).getroot().iter("testcase"))
    seconds: dict[str, float] = defaultdict(float)
    by_file: dict[str, float] = defaultdict(float)
    rest: list[tuple[float, str]] = []
    for c in cases:
        who, took = owner(c.get("classname", ""), c.get("name", ""), pipelines), float(c.get("time") or 0)
        seconds[who] += took
        by_file[c.get("classname", "").replace(".", "/") + ".py"] += took
        if not who:
            rest.append((took, f"{c.get('classname')}::{c.get('name')}"))
    per_pipeline = {p: seconds.get(p, 0.0) for p in sorted(pipelines)}
    total = sum(seconds.values())
    parallelism = total / wall
    mean = statistics.mean(per_pipeline.values())
    estimate = (total + (args.pipelines - len(pipelines)) * mean) / parallelism
    new = args.pipelines - len(pipelines)
    budget = (60 * args.minutes * parallelism - total) / new if new > 0 else None  # test-seconds each may add
    results = {
        "exit": r.returncode, "tests": len(cases), "wall_s": wall, "test_seconds": total, "parallelism": parallelism,
        # the machine's, whatever ran on it meanwhile: on an otherwise idle machine, what the suite costs in CPU
        "machine_busy_cpu_s": busy, "cores": os.cpu_count(),
        "rest_s": seconds.get("", 0.0), "slowest_rest": [{"test": t, "s": round(x, 2)} for x, t in sorted(rest)[::-1][:10]],
        "slowest_files": [{"file": f, "s": round(x, 2)} for f, x in sorted(by_file.items(), key=lambda kv: -kv[1])[:25]],
        "per_pipeline_s": per_pipeline, "mean_pipeline_s": mean,
        "estimate": {"pipelines": args.pipelines, "wall_s": estimate,
                     "assumes": "each new pipeline costs the present mean; the workers as busy as in this run"},
        "budget": {"minutes": args.minutes, "per_new_pipeline_s": budget,
                   "means": "the test-seconds each new pipeline may cost for the suite to stay under the target"},
    }
    out = HERE / "results" / "suite.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"make test: {len(cases)} tests, exit {r.returncode}, {wall:.0f} s wall, {total:.0f} test-seconds "
          f"({parallelism:.2f} busy workers)" + (f"; the machine busy {busy:.0f} CPU-s on {os.cpu_count()} cores" if busy else ""))
    print(f"the rest (engine, blocks, ...): {results['rest_s']:.0f} test-seconds")
    for p, s in sorted(per_pipeline.items(), key=lambda x: -x[1]):
        print(f"  {p:14s} {s:6.0f} test-seconds")
    print(f"mean pipeline {mean:.0f} test-seconds; with {args.pipelines} pipelines: ~{estimate:.0f} s wall "
          f"({estimate / 60:.1f} min)")
    if budget is not None:
        print(f"under {args.minutes:g} min, each of the {new} new pipelines may cost {budget:.0f} test-seconds")
    print(f"wrote {out.relative_to(REPO)}")
    sys.exit(r.returncode)


if __name__ == "__main__":
    main()

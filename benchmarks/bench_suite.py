"""What `make test` costs, per pipeline and for the rest, and what it would cost with more pipelines.

Runs the suite once as `make test` runs it (pytest with the project's addopts: three workers), with a JUnit report,
and splits the tests' seconds (setup, call and teardown: a pipeline's smoke build is counted in the first test of
its smoke group to run) into each pipeline's (its smoke group, see owner(), and tests/methods/<pipeline>/) and the
rest (engine, blocks, statistics; its ten slowest tests are listed), with the 25 slowest files and the CPU-seconds
the machine was busy meanwhile (/proc/stat: the suite is CPU-bound, so this is what it costs). The estimate for
more pipelines assumes each new pipeline costs the mean of the present ones and the workers stay as busy as in this
run (wall = test-seconds / that parallelism); and the test-seconds each new pipeline may cost for the suite to stay
under the target (--minutes).

With --cpu it also says where the machine's CPU went: every process started meanwhile is sampled (psutil, every
0.25 s; a process that lives less than that is missed, and what one spends after its last sample, so the sum is a
lower bound) and its CPU-seconds summed by kind (a pytest worker, a process the warm server forked, a `dvc repro`,
a Prefect server, ...) and by the test whose temporary directory it ran in. The sampling costs a few per cent of a core, so the run's other figures are a little
worse than without it.

    .venv/bin/python benchmarks/bench_suite.py [--pipelines 19] [--cpu] [-- PYTEST ARGS]
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


def kind(command: list[str], parent: list[str]) -> str:
    """What a process is, from its command line and its parent's."""
    args, parent = [c.rsplit("/", 1)[-1] for c in command], [c.rsplit("/", 1)[-1] for c in parent]
    if "exec(eval(sys.stdin.readline()))" in " ".join(command):
        return "pytest worker"  # execnet's bootstrap
    for tool in ("paperdag", "dvc"):
        if tool in args[:3]:
            sub = next((c for c in args[args.index(tool) + 1:] if not c.startswith("-")), "")
            if (tool, sub) == ("paperdag", "warm") and "paperdag" in parent and "warm" in parent:
                return "forked by paperdag warm (stages, served runs)"  # a fork keeps its server's command line
            return f"{tool} {sub}".strip()
    if "paperdag.engine.dvcmain" in args[:3]:
        return "dvc (paperdag.engine.dvcmain)"
    if "pytest" in args[:3]:
        return "pytest"
    if "uvicorn" in args[:3] or "prefect" in args[:3]:
        return "Prefect server"
    if any(x in " ".join(command) for x in ("playwright", "chrom", "headless_shell")):
        return "Playwright (its driver, Chromium)"
    return "other: " + " ".join(args[:3])[:60]


TEST_DIR = re.compile(r"/pytest-\d+/(?:popen-gw\d+/)?([^/]+?)\d*(?:/|$)")


class CpuSampler:
    """CPU-seconds of every process started after it, by kind() and by the test directory it ran in."""

    def __init__(self) -> None:
        import psutil

        self.psutil, self.start, self.me = psutil, time.time(), os.getpid()
        self.seen: dict[tuple[int, float], dict] = {}

    def sample(self) -> None:
        for p in self.psutil.process_iter(["pid", "ppid", "create_time", "cmdline", "cpu_times", "cwd"]):
            i = p.info
            if i["pid"] == self.me or not i["create_time"] or i["create_time"] < self.start or i["cpu_times"] is None:
                continue
            key = (i["pid"], i["create_time"])
            row = self.seen.setdefault(key, {"cmdline": i["cmdline"] or [], "ppid": i["ppid"], "cwd": i["cwd"] or ""})
            row["cpu"] = i["cpu_times"].user + i["cpu_times"].system

    def report(self) -> dict:
        by_pid = {pid: row for (pid, _), row in self.seen.items()}
        kinds: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
        tests: dict[str, float] = defaultdict(float)
        for row in self.seen.values():
            parent = by_pid.get(row["ppid"], {}).get("cmdline", [])
            k = kinds[kind(row["cmdline"], parent)]
            k[0] += row.get("cpu", 0.0)
            k[1] += 1
            m = TEST_DIR.search(row["cwd"])
            tests[m.group(1) if m else "(outside a test's directory)"] += row.get("cpu", 0.0)
        return {
            "sampled_cpu_s": sum(k[0] for k in kinds.values()),
            "by_kind": {n: {"cpu_s": round(c, 1), "processes": p} for n, (c, p) in sorted(kinds.items(), key=lambda kv: -kv[1][0])},
            "by_test_directory": {n: round(c, 1) for n, c in sorted(tests.items(), key=lambda kv: -kv[1])[:30]},
            "note": "processes sampled every 0.25 s: one that lived less is missed, and what one spent after its last "
                    "sample (a lower bound); a test's directory "
                    "is pytest's tmp_path (its name cut to 30 characters) or a smoke build's (the pipeline's name)",
        }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pipelines", type=int, default=19, help="how many pipelines to estimate the suite for")
    ap.add_argument("--minutes", type=float, default=10, help="the suite's target: the budget each new pipeline has")
    ap.add_argument("--cpu", action="store_true", help="also sample where the CPU goes (by process kind and by test)")
    ap.add_argument("pytest_args", nargs="*")
    args = ap.parse_args()
    pipelines = {p.stem for p in (REPO / "pipelines").glob("*.yaml")}
    with tempfile.TemporaryDirectory(prefix="paperdag-suite-") as tmp:
        report = Path(tmp) / "junit.xml"
        sampler = CpuSampler() if args.cpu else None
        t, busy = time.perf_counter(), busy_cpu_s()
        r = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}",
                              *args.pytest_args], cwd=REPO)
        while r.poll() is None:
            if sampler:
                sampler.sample()
            time.sleep(0.25)
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
    if sampler:
        results["cpu"] = sampler.report()
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
    if sampler:
        cpu = results["cpu"]
        print(f"where the CPU went (sampled, a lower bound): {cpu['sampled_cpu_s']:.0f} CPU-s")
        for n, k in list(cpu["by_kind"].items())[:15]:
            print(f"  {k['cpu_s']:7.1f} CPU-s {k['processes']:5d} processes  {n}")
        print("by test directory:")
        for n, c in list(cpu["by_test_directory"].items())[:15]:
            print(f"  {c:7.1f} CPU-s  {n}")
    print(f"wrote {out.relative_to(REPO)}")
    sys.exit(r.returncode)


if __name__ == "__main__":
    main()

"""What DVC's bookkeeping of dvc.lock costs per stage, with the committed lock of every pipeline in one file (as the
project keeps it: one dvc.yaml) against the same entries split one lock per pipeline (what one dvc.yaml per pipeline
would give). After every stage it runs, `dvc repro` rewrites the whole lock (Lockfile.dump_stages ->
dvc.utils.serialize.modify_yaml: a round-trip parse that keeps comments, then a dump; treeverse/dvc#10629), so the
cost grows with the lock, not with the stage; a command also reads the lock once (timed apart: load_yaml, which DVC's
validated read costs at least). Measured on copies of the committed dvc.lock, side by side in one run, CPU-seconds of
this process (median of --repeats). Then end to end (--pipeline, default rap): its smoke-scale scratch repository
built once, and `dvc repro -f -s <pipeline>-claims` (a stage of milliseconds) timed, alternating, with the lock that
pipeline would have alone (its smoke entries, and its committed ones the smoke scale lacks) and with every other
pipeline's committed entries added. That difference also holds `paperdag stage`'s own read of dvc.lock (its outputs'
recorded md5s: ~0.25 CPU-s at this size, with the C loader).

    .venv/bin/python benchmarks/bench_dvc_lock.py [--repeats 3] [--pipeline rap]   # writes benchmarks/results/dvc_lock.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import yaml
from bench_tests_ab import children_cpu_s  # this directory's: CPU-seconds of the processes waited for
from dvc.utils.serialize import load_yaml, modify_yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


def median_cpu_s(call, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.process_time()
        call()
        times.append(time.process_time() - start)
    return statistics.median(times)


def rewrite(path: Path) -> None:
    """What DVC does to the lock after one stage (it changes that stage's entry; the cost is the whole file's)."""
    with modify_yaml(path) as data:
        data["schema"] = data.get("schema", "2.0")


def costs(path: Path, repeats: int) -> dict[str, float]:
    return {"rewrite_per_stage_cpu_s": median_cpu_s(lambda: rewrite(path), repeats),
            "read_per_command_cpu_s": median_cpu_s(lambda: load_yaml(path), repeats)}


def pipeline_of(stage: str, pipelines: list[str]) -> str:
    return next(p for p in pipelines if stage.startswith(f"{p}-"))


def one_stage_s(repo: Path, stage: str, repeats: int, lock_text: str) -> dict[str, float]:
    """Median wall and CPU seconds of `dvc repro -f -s stage` in `repo` with dvc.lock set to `lock_text` each time."""
    walls, cpus = [], []
    env = {**os.environ, "PAPERDAG_WARM": "off", "PAPERDAG_DRAIN": "off"}
    for _ in range(repeats):
        (repo / "dvc.lock").write_text(lock_text)
        before = children_cpu_s()
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "dvc", "repro", "-f", "-s", stage], cwd=repo, env=env, check=True,
                       capture_output=True)
        walls.append(time.perf_counter() - start)
        cpus.append(children_cpu_s() - before)
    return {"wall_s": statistics.median(walls), "cpu_s": statistics.median(cpus)}


def end_to_end(pipeline: str, lock: dict, pipelines: list[str], repeats: int) -> dict:
    """`pipeline`'s claims stage rerun in its smoke repo, with the lock it would have alone and with every pipeline's."""
    from bench_warm import scratch_repo  # this directory's: a committed scratch copy of one pipeline

    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"  # the stages' `paperdag`
    with tempfile.TemporaryDirectory(prefix="paperdag-dvc-lock-e2e-") as tmp:
        repo = scratch_repo(Path(tmp) / pipeline, pipeline)
        subprocess.run([sys.executable, "-m", "dvc", "repro"], cwd=repo, check=True, capture_output=True,
                       env={**os.environ, "PAPERDAG_DRAIN": "off"})
        own = yaml.safe_load((repo / "dvc.lock").read_text())
        committed = {k: v for k, v in lock["stages"].items() if k not in own["stages"]}
        own["stages"] |= {k: v for k, v in committed.items() if pipeline_of(k, pipelines) == pipeline}
        alone = yaml.safe_dump(own, sort_keys=False)
        own["stages"] |= committed
        every = yaml.safe_dump(own, sort_keys=False)
        stage = f"{pipeline}-claims"
        runs: dict[str, list[dict[str, float]]] = {"alone": [], "every_pipeline": []}
        for _ in range(repeats):
            runs["alone"].append(one_stage_s(repo, stage, 1, alone))
            runs["every_pipeline"].append(one_stage_s(repo, stage, 1, every))
    median = {k: {m: statistics.median(r[m] for r in v) for m in ("wall_s", "cpu_s")} for k, v in runs.items()}
    return {"pipeline": pipeline, "stage": stage, "lock_bytes": {"alone": len(alone), "every_pipeline": len(every)},
            "median": median, "ratio_every_over_alone_wall": median["every_pipeline"]["wall_s"] / median["alone"]["wall_s"]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--pipeline", default="rap", help="whose smoke repo the end-to-end leg builds ('' skips it)")
    args = ap.parse_args()
    lock = yaml.safe_load((REPO / "dvc.lock").read_text())
    stages = lock["stages"]
    pipelines = sorted((p.stem for p in (REPO / "pipelines").glob("*.yaml")), key=len, reverse=True)
    by_pipeline: dict[str, dict] = defaultdict(dict)
    for name, entry in stages.items():
        by_pipeline[pipeline_of(name, pipelines)][name] = entry
    with tempfile.TemporaryDirectory(prefix="paperdag-dvc-lock-") as tmp:
        whole = Path(tmp) / "dvc.lock"
        whole.write_text((REPO / "dvc.lock").read_text())
        one = costs(whole, args.repeats)
        split = {}
        for pipeline, entries in sorted(by_pipeline.items()):
            path = Path(tmp) / pipeline / "dvc.lock"
            path.parent.mkdir()
            path.write_text(yaml.safe_dump({"schema": lock.get("schema", "2.0"), "stages": entries}, sort_keys=False))
            split[pipeline] = {"stages": len(entries), "bytes": path.stat().st_size, **costs(path, args.repeats)}
    n = len(stages)
    weighted = {k: sum(p["stages"] * p[k] for p in split.values()) / n for k in one}
    per_stage = "rewrite_per_stage_cpu_s"
    results = {"stages": n, "pipelines": len(split), "lock_bytes": len((REPO / "dvc.lock").read_bytes()),
               "one_lock": {**one, "every_stage_cpu_s": one[per_stage] * n},
               "lock_per_pipeline": {**weighted, "every_stage_cpu_s": weighted[per_stage] * n, "pipelines": split},
               "ratio_one_over_split": one[per_stage] / weighted[per_stage],
               "note": "at the committed lock's size: a `dvc repro` of every stage from an empty lock costs about half"}
    if args.pipeline:
        results["end_to_end"] = end_to_end(args.pipeline, lock, pipelines, args.repeats)
    out = HERE / "results" / "dvc_lock.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"dvc.lock: {n} stages of {len(split)} pipelines, {results['lock_bytes'] / 1e3:.0f} kB")
    for label, c in (("one lock:", one), ("a lock a pipeline:", weighted)):
        print(f"  {label:19s} {c[per_stage]:.2f} CPU-s a stage to rewrite it ({c[per_stage] * n / 60:.1f} CPU-min over every "
              f"stage), {c['read_per_command_cpu_s']:.2f} CPU-s a command to read it")
    print(f"  ratio {results['ratio_one_over_split']:.1f}x a stage")
    if args.pipeline:
        e = results["end_to_end"]
        alone, every = e["median"]["alone"], e["median"]["every_pipeline"]
        print(f"  `dvc repro -f -s {e['stage']}`: {alone['wall_s']:.1f} s wall ({alone['cpu_s']:.1f} CPU-s) with the lock "
              f"{args.pipeline} would have alone ({e['lock_bytes']['alone'] / 1e3:.0f} kB), {every['wall_s']:.1f} s "
              f"({every['cpu_s']:.1f} CPU-s) with every pipeline's ({e['lock_bytes']['every_pipeline'] / 1e3:.0f} kB): "
              f"{e['ratio_every_over_alone_wall']:.1f}x")
    print(f"wrote {out.relative_to(REPO)}")


if __name__ == "__main__":
    main()

"""What DVC's bookkeeping of dvc.lock costs per stage, with the committed lock of every pipeline in one file (as the
project keeps it: one dvc.yaml) against the same entries split one lock per pipeline (what one dvc.yaml per pipeline
would give). After every stage it runs, `dvc repro` rewrites the whole lock (dvc.utils.serialize.modify_yaml: a
round-trip parse that keeps comments, then a dump; treeverse/dvc#10629) and reads it again to save the stage
(load_yaml); both grow with the lock, not with the stage. Measured on copies of the committed dvc.lock, side by side
in one run, CPU-seconds of this process (median of --repeats). Then end to end (--pipeline, default rap): its
smoke-scale scratch repository built once, and `dvc repro -f -s <pipeline>-claims` (a stage of milliseconds) timed
with the repository's own lock and with every other pipeline's committed entries added to it, alternating.

    .venv/bin/python benchmarks/bench_dvc_lock.py [--repeats 3] [--pipeline rap]   # writes benchmarks/results/dvc_lock.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import yaml
from dvc.utils.serialize import load_yaml, modify_yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


def per_stage_cpu_s(path: Path, repeats: int) -> float:
    """CPU-seconds DVC spends on `path` after one stage: rewrite it (round trip) and read it back."""
    times = []
    for _ in range(repeats):
        start = time.process_time()
        with modify_yaml(path) as data:
            data["schema"] = data.get("schema", "2.0")  # DVC changes one stage's entry; the cost is the whole file's
        load_yaml(path)
        times.append(time.process_time() - start)
    return statistics.median(times)


def one_stage_s(repo: Path, stage: str, repeats: int, lock_text: str) -> dict[str, float]:
    """Median wall and CPU seconds of `dvc repro -f -s stage` in `repo` with dvc.lock set to `lock_text` each time."""
    walls, cpus = [], []
    env = {**os.environ, "PAPERDAG_WARM": "off", "PAPERDAG_DRAIN": "off"}
    for _ in range(repeats):
        (repo / "dvc.lock").write_text(lock_text)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "dvc", "repro", "-f", "-s", stage], cwd=repo, env=env, check=True,
                       capture_output=True)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return {"wall_s": statistics.median(walls), "cpu_s": statistics.median(cpus)}


def end_to_end(pipeline: str, lock: dict, repeats: int) -> dict:
    """`pipeline`'s claims stage rerun in its smoke repo: its own lock against its own plus every other pipeline's."""
    from bench_warm import scratch_repo  # this directory's: a committed scratch copy of one pipeline

    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"  # the stages' `paperdag`
    with tempfile.TemporaryDirectory(prefix="paperdag-dvc-lock-e2e-") as tmp:
        repo = scratch_repo(Path(tmp) / pipeline, pipeline)
        subprocess.run([sys.executable, "-m", "dvc", "repro"], cwd=repo, check=True, capture_output=True,
                       env={**os.environ, "PAPERDAG_DRAIN": "off"})
        own = (repo / "dvc.lock").read_text()
        merged = yaml.safe_load(own)
        merged["stages"] |= {k: v for k, v in lock["stages"].items() if k.split("-", 1)[0] != pipeline}
        merged_text = yaml.safe_dump(merged, sort_keys=False)
        stage = f"{pipeline}-claims"
        runs: dict[str, list[dict[str, float]]] = {"own": [], "with_others": []}
        for _ in range(repeats):
            runs["own"].append(one_stage_s(repo, stage, 1, own))
            runs["with_others"].append(one_stage_s(repo, stage, 1, merged_text))
    median = {k: {m: statistics.median(r[m] for r in v) for m in ("wall_s", "cpu_s")} for k, v in runs.items()}
    return {"pipeline": pipeline, "stage": stage, "lock_bytes": {"own": len(own), "with_others": len(merged_text)},
            "median": median, "ratio_with_others_over_own_wall": median["with_others"]["wall_s"] / median["own"]["wall_s"]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--pipeline", default="rap", help="whose smoke repo the end-to-end leg builds ('' skips it)")
    args = ap.parse_args()
    lock = yaml.safe_load((REPO / "dvc.lock").read_text())
    stages = lock["stages"]
    by_pipeline: dict[str, dict] = defaultdict(dict)
    for name, entry in stages.items():
        by_pipeline[name.split("-", 1)[0]][name] = entry
    with tempfile.TemporaryDirectory(prefix="paperdag-dvc-lock-") as tmp:
        whole = Path(tmp) / "dvc.lock"
        whole.write_text((REPO / "dvc.lock").read_text())
        one_file = per_stage_cpu_s(whole, args.repeats)
        split = {}
        for pipeline, entries in sorted(by_pipeline.items()):
            path = Path(tmp) / pipeline / "dvc.lock"
            path.parent.mkdir()
            path.write_text(yaml.safe_dump({"schema": lock.get("schema", "2.0"), "stages": entries}, sort_keys=False))
            split[pipeline] = {"stages": len(entries), "bytes": path.stat().st_size,
                               "per_stage_cpu_s": per_stage_cpu_s(path, args.repeats)}
    n = len(stages)
    weighted = sum(p["stages"] * p["per_stage_cpu_s"] for p in split.values()) / n
    results = {"stages": n, "pipelines": len(split), "lock_bytes": len((REPO / "dvc.lock").read_bytes()),
               "one_lock": {"per_stage_cpu_s": one_file, "all_stages_cpu_s": one_file * n},
               "lock_per_pipeline": {"per_stage_cpu_s": weighted, "all_stages_cpu_s": weighted * n, "pipelines": split},
               "ratio_one_over_split": one_file / weighted,
               "note": "at the committed lock's size: a full `dvc repro` grows the lock from empty, so its sum is about half"}
    if args.pipeline:
        results["end_to_end"] = end_to_end(args.pipeline, lock, args.repeats)
    out = HERE / "results" / "dvc_lock.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"dvc.lock: {n} stages of {len(split)} pipelines, {results['lock_bytes'] / 1e3:.0f} kB")
    print(f"  one lock:          {one_file:.2f} CPU-s a stage, {one_file * n / 60:.1f} CPU-min over every stage")
    print(f"  a lock a pipeline: {weighted:.2f} CPU-s a stage (weighted by stages), {weighted * n / 60:.1f} CPU-min")
    print(f"  ratio {one_file / weighted:.1f}x")
    if args.pipeline:
        e = results["end_to_end"]
        own, others = e["median"]["own"], e["median"]["with_others"]
        print(f"  `dvc repro -f -s {e['stage']}`: {own['wall_s']:.1f} s wall ({own['cpu_s']:.1f} CPU-s) with its own "
              f"lock ({e['lock_bytes']['own'] / 1e3:.0f} kB), {others['wall_s']:.1f} s ({others['cpu_s']:.1f} CPU-s) with "
              f"every pipeline's ({e['lock_bytes']['with_others'] / 1e3:.0f} kB): {e['ratio_with_others_over_own_wall']:.1f}x")
    print(f"wrote {out.relative_to(REPO)}")


if __name__ == "__main__":
    main()

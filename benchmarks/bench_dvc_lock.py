"""What DVC's bookkeeping of dvc.lock costs per stage: the committed locks as the project keeps them now, one per
pipeline (pipelines/<p>/dvc.lock beside its dvc.yaml; the root's holds the claims stages), against the same entries
in one lock (the layout before: one dvc.yaml). After every stage it runs, `dvc repro` rewrites the whole lock that
records the stage (Lockfile.dump_stages -> dvc.utils.serialize.modify_yaml: a round-trip parse that keeps comments,
then a dump; treeverse/dvc#10629), so the cost grows with that lock, not with the stage; a command also reads the
locks once (timed apart: load_yaml, which DVC's validated read costs at least). Measured on copies of the committed
locks, side by side in one run, CPU-seconds of this process (median of --repeats). Then end to end (--pipeline,
default rap): its smoke-scale scratch repository built once, and `dvc repro -f -s <pipeline>-claims` (a stage of
milliseconds, in the root dvc.yaml) timed, alternating, with the root lock a full checkout has (its claims entry and
every other pipeline's: this layout) and with every committed entry in it (the one lock of before). That
difference also holds `paperdag stage`'s own read of the lock (its outputs' recorded md5s). Last (--status-pipeline,
default mfc), one `dvc status` of this repository three ways: a user's plain one, the engine's over every dvc.yaml,
and the engine's over one pipeline's dvc.yaml and the root's (status_s).

    .venv/bin/python benchmarks/bench_dvc_lock.py [--repeats 3] [--pipeline rap] [--status-pipeline mfc]
    # writes benchmarks/results/dvc_lock.json
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
from pathlib import Path

import yaml
from bench_tests_ab import children_cpu_s  # this directory's: CPU-seconds of the processes waited for
from dvc.utils.serialize import load_yaml, modify_yaml

from paperdag.engine.dvc import lock_files

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


def whole_bytes(locks: list[Path]) -> int:
    return sum(len(entries_text(p).encode()) for p in locks) + len("schema: '2.0'\nstages:\n")


def costs(path: Path, repeats: int) -> dict[str, float]:
    return {"rewrite_per_stage_cpu_s": median_cpu_s(lambda: rewrite(path), repeats),
            "read_per_command_cpu_s": median_cpu_s(lambda: load_yaml(path), repeats)}


def entries_text(path: Path) -> str:
    """A DVC lock file's stage entries as DVC wrote them (the text under `stages:`)."""
    return path.read_text().split("stages:\n", 1)[1]


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


def end_to_end(pipeline: str, locks: list[Path], repeats: int) -> dict:
    """`pipeline`'s claims stage rerun in its smoke repo, with the root lock of this layout and with one lock."""
    from bench_warm import scratch_repo  # this directory's: a committed scratch copy of one pipeline

    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"  # the stages' `paperdag`
    with tempfile.TemporaryDirectory(prefix="paperdag-dvc-lock-e2e-") as tmp:
        repo = scratch_repo(Path(tmp) / pipeline, pipeline)
        subprocess.run([sys.executable, "-m", "dvc", "repro"], cwd=repo, check=True, capture_output=True,
                       env={**os.environ, "PAPERDAG_DRAIN": "off"})
        smoke_root = yaml.safe_load((repo / "dvc.lock").read_text())
        smoke_all = {**smoke_root["stages"], **yaml.safe_load((repo / f"pipelines/{pipeline}/dvc.lock").read_text())["stages"]}
        committed = {k: v for path in locks for k, v in yaml.safe_load(path.read_text())["stages"].items()}
        committed_root = yaml.safe_load((REPO / "dvc.lock").read_text())["stages"]
        layout = yaml.safe_dump({"schema": "2.0", "stages": {**committed_root, **smoke_root["stages"]}}, sort_keys=False)
        one = yaml.safe_dump({"schema": "2.0", "stages": {**committed, **smoke_all}}, sort_keys=False)
        stage = f"{pipeline}-claims"
        runs: dict[str, list[dict[str, float]]] = {"this_layout": [], "one_lock": []}
        for _ in range(repeats):
            runs["this_layout"].append(one_stage_s(repo, stage, 1, layout))
            runs["one_lock"].append(one_stage_s(repo, stage, 1, one))
    median = {k: {m: statistics.median(r[m] for r in v) for m in ("wall_s", "cpu_s")} for k, v in runs.items()}
    return {"pipeline": pipeline, "stage": stage, "lock_bytes": {"this_layout": len(layout), "one_lock": len(one)},
            "median": median, "ratio_one_over_layout_wall": median["one_lock"]["wall_s"] / median["this_layout"]["wall_s"]}


def status_s(pipeline: str, repeats: int) -> dict:
    """What one status of this repository costs, wall and CPU seconds (medians, alternating): a user's plain `dvc
    status` (DVC parses params.yaml once per stage that lists params), the engine's over every dvc.yaml (dvcmain:
    params parsed once a version), and the engine's over one pipeline's files (its dvc.yaml and the root's: what
    planning `paperdag run <pipeline>` and `paperdag why <pipeline>` ask)."""
    env = {**os.environ, "DVC_NO_ANALYTICS": "1"}
    legs = {"plain_dvc_every_file": ["-m", "dvc", "status", "--json"],
            "engine_every_file": ["-m", "paperdag.engine.dvcmain", "status", "--json"],
            "engine_one_pipeline": ["-m", "paperdag.engine.dvcmain", "status", "--json",
                                    f"pipelines/{pipeline}/dvc.yaml", "dvc.yaml"]}
    runs: dict[str, list[dict[str, float]]] = {k: [] for k in legs}
    for _ in range(repeats):
        for name, args in legs.items():
            before = children_cpu_s()
            start = time.perf_counter()
            subprocess.run([sys.executable, *args], cwd=REPO, env=env, check=True, capture_output=True)
            runs[name].append({"wall_s": time.perf_counter() - start, "cpu_s": children_cpu_s() - before})
    median = {k: {m: statistics.median(r[m] for r in v) for m in ("wall_s", "cpu_s")} for k, v in runs.items()}
    return {"pipeline": pipeline, "median": median,
            "ratio_every_over_one_pipeline": median["engine_every_file"]["wall_s"] / median["engine_one_pipeline"]["wall_s"],
            "ratio_plain_over_engine": median["plain_dvc_every_file"]["wall_s"] / median["engine_every_file"]["wall_s"]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--pipeline", default="rap", help="whose smoke repo the end-to-end leg builds ('' skips it)")
    ap.add_argument("--status-pipeline", default="mfc", help="whose files the one-pipeline status reads ('' skips the "
                    "status leg)")
    args = ap.parse_args()
    locks = lock_files(REPO)
    with tempfile.TemporaryDirectory(prefix="paperdag-dvc-lock-") as tmp:
        whole = Path(tmp) / "dvc.lock"
        whole.write_text("schema: '2.0'\nstages:\n" + "".join(entries_text(p) for p in locks))
        one = costs(whole, args.repeats)
        split = {}
        for path in locks:
            name = path.parent.name if path.parent != REPO else "(root: claims)"
            copy = Path(tmp) / name / "dvc.lock"
            copy.parent.mkdir()
            copy.write_text(path.read_text())
            split[name] = {"stages": len(yaml.safe_load(path.read_text())["stages"]), "bytes": path.stat().st_size,
                           **costs(copy, args.repeats)}
    n = sum(p["stages"] for p in split.values())
    weighted = {k: sum(p["stages"] * p[k] for p in split.values()) / n for k in one}
    weighted["read_per_command_cpu_s"] = sum(p["read_per_command_cpu_s"] for p in split.values())  # it reads them all
    per_stage = "rewrite_per_stage_cpu_s"
    results = {"stages": n, "lock_files": len(split), "one_lock_bytes": whole_bytes(locks),
               "one_lock": {**one, "every_stage_cpu_s": one[per_stage] * n},
               "lock_per_pipeline": {**weighted, "every_stage_cpu_s": weighted[per_stage] * n, "files": split},
               "ratio_one_over_split": one[per_stage] / weighted[per_stage],
               "note": "at the committed locks' size: a `dvc repro` of every stage from empty locks costs about half"}
    if args.pipeline:
        results["end_to_end"] = end_to_end(args.pipeline, locks, args.repeats)
    if args.status_pipeline:
        results["status"] = status_s(args.status_pipeline, args.repeats)
    out = HERE / "results" / "dvc_lock.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"{n} stages in {len(split)} dvc.lock files, {results['one_lock_bytes'] / 1e3:.0f} kB in all")
    for label, c in (("in one lock:", one), ("a lock a pipeline:", weighted)):
        print(f"  {label:19s} {c[per_stage]:.2f} CPU-s a stage to rewrite it ({c[per_stage] * n / 60:.1f} CPU-min over every "
              f"stage), {c['read_per_command_cpu_s']:.2f} CPU-s a command to read every lock")
    print(f"  ratio {results['ratio_one_over_split']:.1f}x a stage")
    if args.pipeline:
        e = results["end_to_end"]
        layout, one_lock = e["median"]["this_layout"], e["median"]["one_lock"]
        print(f"  `dvc repro -f -s {e['stage']}`: {layout['wall_s']:.1f} s wall ({layout['cpu_s']:.1f} CPU-s) with the root "
              f"lock of this layout ({e['lock_bytes']['this_layout'] / 1e3:.0f} kB), {one_lock['wall_s']:.1f} s "
              f"({one_lock['cpu_s']:.1f} CPU-s) with every entry in one lock ({e['lock_bytes']['one_lock'] / 1e3:.0f} kB): "
              f"{e['ratio_one_over_layout_wall']:.1f}x")
    if args.status_pipeline:
        st = results["status"]["median"]
        print("  a status of this repository, wall (CPU) seconds: " + ", ".join(
            f"{k} {v['wall_s']:.1f} ({v['cpu_s']:.1f})" for k, v in st.items()))
    print(f"wrote {out.relative_to(REPO)}")


if __name__ == "__main__":
    main()

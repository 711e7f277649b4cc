"""The engine's share of a build: whole pipelines built by `dvc repro` in fresh scratch clones, as `make repro` builds
them on a fresh clone (fresh stage processes: no `paperdag warm`).

Per pipeline (a scratch copy of this project's pipeline, paperdag.engine.scratch; its default scale unless
--smoke), from each stage's last line, `[paperdag] P:S: done: stage X s, Y s in all, Z s since the process started`:
- stage: sum of X, the stage function and the writing of its outputs;
- engine: sum of (Y - X), issue 13's measure: the project's validation, the stage module's imports, reading the
  inputs, the md5s, the run record;
- process: sum of (Z - X), the engine with each stage process's start before paperdag's clock (the interpreter,
  paperdag's imports, the numerics' re-execution);
- the rest: the build's wall time minus the sum of Z: DVC's planning, its commits, its lock.
Reported: engine / wall (the issue's share), process / wall, and (wall - stage) / wall (all that is not a stage's
work).

Usage: .venv/bin/python benchmarks/bench_engine_share.py [--smoke] [--pipelines mfc,welfare_nns]
(default: every pipeline); writes benchmarks/results/engine_share[_smoke].json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_warm import scratch_repo  # this directory's: a scratch copy of one pipeline, committed

ROOT = Path(__file__).resolve().parents[1]
DONE = re.compile(r"\[paperdag\] (\S+): done: stage ([0-9.]+) s, ([0-9.]+) s in all, ([0-9.]+) s since the process started")


def sh(cwd: Path, *cmd: str, env: dict[str, str] | None = None) -> str:
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env={**os.environ, **(env or {})})
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed in {cwd}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return r.stdout + r.stderr


def build(repo: Path) -> dict[str, object]:
    t = time.perf_counter()
    out = sh(repo, sys.executable, "-m", "dvc", "repro", env={"PAPERDAG_WARM": "off"})
    wall = time.perf_counter() - t
    stages = {m.group(1): (float(m.group(2)), float(m.group(3)), float(m.group(4))) for m in DONE.finditer(out)}
    if not stages:
        raise SystemExit(f"no stage reported its times in {repo}:\n{out[-3000:]}")
    stage = sum(x for x, _, _ in stages.values())
    in_all = sum(y for _, y, _ in stages.values())
    age = sum(z for _, _, z in stages.values())
    return {"stages": len(stages), "wall_s": wall, "stage_s": stage, "engine_s": in_all - stage,
            "process_s": age - stage, "rest_s": wall - age, "engine_share": (in_all - stage) / wall,
            "process_share": (age - stage) / wall, "not_stage_share": (wall - stage) / wall,
            "per_stage": {a: {"stage_s": x, "in_all_s": y, "process_s": z} for a, (x, y, z) in stages.items()}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--smoke", action="store_true", help="each pipeline's smoke scale (the test suite's)")
    ap.add_argument("--pipelines", help="comma-separated (default: every pipeline in pipelines/)")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("DVC_NO_ANALYTICS", "1")
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    names = args.pipelines.split(",") if args.pipelines else sorted(p.stem for p in (ROOT / "pipelines").glob("*.yaml"))
    results: dict[str, dict[str, object]] = {}
    with tempfile.TemporaryDirectory(prefix="paperdag-share-") as tmp:
        for name in names:
            results[name] = build(scratch_repo(Path(tmp) / name, name, smoke=args.smoke))
            r = results[name]
            print(f"{name:12s} {r['stages']:3d} stages  wall {r['wall_s']:7.1f} s  stage {r['stage_s']:7.1f} s  "
                  f"engine {r['engine_s']:6.1f} s ({100 * r['engine_share']:.1f} %)  with process start "
                  f"{r['process_s']:6.1f} s ({100 * r['process_share']:.1f} %)  DVC {r['rest_s']:6.1f} s", flush=True)
    total = {k: sum(float(r[k]) for r in results.values()) for k in ("wall_s", "stage_s", "engine_s", "process_s", "rest_s")}
    total["engine_share"] = total["engine_s"] / total["wall_s"]
    total["process_share"] = total["process_s"] / total["wall_s"]
    total["not_stage_share"] = (total["wall_s"] - total["stage_s"]) / total["wall_s"]
    doc = {"scale": "smoke" if args.smoke else "default", "machine": {"cpus": os.cpu_count()}, "total": total,
           "pipelines": results}
    out = ROOT / "benchmarks" / "results" / f"engine_share{'_smoke' if args.smoke else ''}.json"
    out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"all: wall {total['wall_s']:.1f} s, stage work {total['stage_s']:.1f} s, engine {total['engine_s']:.1f} s "
          f"= {100 * total['engine_share']:.1f} % of the wall time ({100 * total['process_share']:.1f} % with each stage "
          f"process's start); not stage work {100 * total['not_stage_share']:.1f} %")
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()

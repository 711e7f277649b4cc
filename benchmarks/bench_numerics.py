"""The cost of portable numerics: the heaviest training stage (lookaheadkv:train_lm, the tiny Llama) under
`base.numerics.mode: portable` vs `native`, side by side in one run.

A throw-away git + DVC repo holds the lookaheadkv pipeline with train_lm shortened to --steps optimiser steps, in
one curriculum phase like the default scale's last (the splits and recall drills with contexts up to T); synthesize
runs once, then train_lm runs --repeats times per mode, alternating. The figure is each mode's fastest stage time
(`paperdag stage` reports the stage function's own time, without the engine's start-up) and their ratio.

    .venv/bin/python benchmarks/bench_numerics.py      # writes benchmarks/results/numerics.json, prints a table
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).parent / "results" / "numerics.json"
sys.path.insert(0, str(ROOT / "tests"))


def stage_seconds(repo: Path, address: str) -> float:
    r = subprocess.run([sys.executable, "-m", "paperdag", "stage", address], cwd=repo, capture_output=True, text=True,
                       env={**os.environ, "PAPERDAG_ROOT": str(repo)})
    if r.returncode != 0:
        raise SystemExit(f"paperdag stage {address} failed:\n{r.stderr[-3000:]}")
    m = re.search(r"done: stage ([0-9.]+) s", r.stderr)
    assert m, r.stderr[-2000:]
    return float(m.group(1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=400, help="train_lm optimiser steps (default scale: 2200 over five phases)")
    ap.add_argument("--repeats", type=int, default=2, help="runs per mode, alternating; the fastest counts")
    args = ap.parse_args()
    from paperdag.engine.params import set_params
    from support import pipeline_repo

    with tempfile.TemporaryDirectory(prefix="bench-numerics-") as tmp:
        last = f"{{steps: {args.steps}, contexts: 252, mixture: {{question_after: 1.0, question_before: 1.0, drill: 2.0}}}}"
        repo = pipeline_repo(Path(tmp) / "repo", "lookaheadkv", [f"lookaheadkv.train_lm.steps={args.steps}",
                                                                 f"lookaheadkv.train_lm.curriculum=[{last}]",
                                                                 "lookaheadkv.train_lm.min_full_cache_em=0.0"])  # timing, not learning
        stage_seconds(repo, "lookaheadkv:synthesize")
        times: dict[str, list[float]] = {"native": [], "portable": []}
        for _ in range(args.repeats):
            for mode in times:
                set_params(repo, [f"base.numerics.mode={mode}"])
                times[mode].append(stage_seconds(repo, "lookaheadkv:train_lm@0"))
                print(f"{mode:9s} {times[mode][-1]:7.1f} s", flush=True)
    best = {m: min(t) for m, t in times.items()}
    result = {
        "stage": "lookaheadkv:train_lm@0", "steps": args.steps, "repeats": args.repeats, "seconds": times,
        "best_seconds": best, "portable_over_native": best["portable"] / best["native"],
        "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count(), "processor": platform.processor()},
    }
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"lookaheadkv:train_lm, {args.steps} steps: native {best['native']:.1f} s, portable {best['portable']:.1f} s "
          f"-> portable / native = {result['portable_over_native']:.2f}x")


if __name__ == "__main__":
    main()

"""What turning on torch's deterministic kernels costs a stage process that imports torch: the public
`torch.use_deterministic_algorithms(True, warn_only=True)` (which imports torch._inductor.config, and with it
torch._dynamo, to tell torch.compile) against the engine's numerics._deterministic (ATen's flag set directly, the
inductor config told if and when it is imported), side by side in one run: fresh interpreters, alternating, each
timed from after `import torch` (CPU-seconds of the process, via resource; wall seconds). The saving is real in a
cold stage process that uses torch without transformers' model code (rap's planner, a toy fit): loading a
transformers model imports torch._dynamo anyway, and a stage forked from `paperdag warm` finds it preloaded.

    .venv/bin/python benchmarks/bench_deterministic.py [--repeats 5]   # writes benchmarks/results/deterministic.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

TIMED = """
import json, resource, time
import torch
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
c, w = cpu(), time.perf_counter()
{call}
assert torch.are_deterministic_algorithms_enabled() and torch.is_deterministic_algorithms_warn_only_enabled()
print(json.dumps({{"cpu_s": cpu() - c, "wall_s": time.perf_counter() - w}}))
"""
CALLS = {"public": "torch.use_deterministic_algorithms(True, warn_only=True)",
         "engine": "from paperdag.engine.numerics import _deterministic\n_deterministic(torch)"}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    runs: dict[str, list[dict[str, float]]] = {k: [] for k in CALLS}
    for _ in range(args.repeats):
        for name, call in CALLS.items():
            r = subprocess.run([sys.executable, "-c", TIMED.format(call=call)], capture_output=True, text=True, check=True)
            runs[name].append(json.loads(r.stdout.strip().splitlines()[-1]))
    median = {k: {m: statistics.median(r[m] for r in v) for m in ("cpu_s", "wall_s")} for k, v in runs.items()}
    results = {"repeats": args.repeats, "runs": runs, "median": median,
               "saved_cpu_s_per_stage": median["public"]["cpu_s"] - median["engine"]["cpu_s"]}
    out = HERE / "results" / "deterministic.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    for k, m in median.items():
        print(f"{k:7s} median {m['cpu_s']:.3f} CPU-s, {m['wall_s']:.3f} s wall")
    print(f"the engine's call saves {results['saved_cpu_s_per_stage']:.2f} CPU-s in a stage process that imports torch and "
          "nothing that imports torch._dynamo itself (transformers' models do; a warm server's preloads have)")
    print(f"wrote {out.relative_to(HERE.parent)}")


if __name__ == "__main__":
    main()

"""What a change to the tests (or the code they run) does to their cost: the same pytest selection at two commits,
side by side in one sitting (A, B, A, B, ... so that a slower stretch of the machine hits both), each in a detached
git worktree of this repository with its own src/ first on PYTHONPATH (this virtual environment's editable install
points at the main checkout). Reports per commit the median wall seconds and CPU-seconds of pytest and every
process it waited for (getrusage of the children: the workers, the stage processes, the warm server and what it
forked), and B / A for both; writes benchmarks/results/tests_ab.json (or --out NAME: benchmarks/results/NAME.json).

    .venv/bin/python benchmarks/bench_tests_ab.py A B [--rounds 2] [--out NAME] -- PYTEST ARGS

e.g. `... d8a1f39 HEAD -- tests/methods` for the pipelines' tests before and after a change.
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
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()


def children_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run(tree: Path, pytest_args: list[str]) -> dict[str, float]:
    """One pytest run in `tree`: its wall and CPU seconds, and its exit status."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree / "src"), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    cpu, t = children_cpu_s(), time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *pytest_args], cwd=tree, env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = {"wall_s": time.perf_counter() - t, "cpu_s": children_cpu_s() - cpu, "exit": r.returncode}
    print(f"  {tree.name}: {out['wall_s']:.0f} s wall, {out['cpu_s']:.0f} CPU-s, exit {r.returncode}: "
          f"{r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ''}", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default="tests_ab", help="the results file's name under benchmarks/results/ (no .json)")
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    args = ap.parse_args(argv[:split])
    args.pytest_args = argv[split + 1:]
    name = args.out.removesuffix(".json")
    if not name or Path(name).name != name:
        ap.error(f"--out {args.out!r}: a name, not a path (the file goes under benchmarks/results/)")
    commits = {"a": git("rev-parse", "--short", args.a), "b": git("rev-parse", "--short", args.b)}
    runs: dict[str, list[dict[str, float]]] = {"a": [], "b": []}
    with tempfile.TemporaryDirectory(prefix="paperdag-ab-") as tmp:
        trees = {k: Path(tmp) / k for k in commits}
        try:
            for k, commit in commits.items():
                git("worktree", "add", "--detach", str(trees[k]), commit)
            for i in range(args.rounds):
                print(f"round {i + 1}", flush=True)
                for k in ("a", "b"):
                    runs[k].append(run(trees[k], args.pytest_args))
        finally:
            for tree in trees.values():
                subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=REPO, capture_output=True)
    median = {k: {m: statistics.median(r[m] for r in runs[k]) for m in ("wall_s", "cpu_s")} for k in runs}
    results = {"commits": commits, "pytest_args": args.pytest_args, "rounds": args.rounds, "runs": runs, "median": median,
               "ratio_b_over_a": {m: median["b"][m] / median["a"][m] for m in ("wall_s", "cpu_s")}}
    out = HERE / "results" / f"{name}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    for k in ("a", "b"):
        print(f"{commits[k]}: median {median[k]['wall_s']:.0f} s wall, {median[k]['cpu_s']:.0f} CPU-s")
    ratio = results["ratio_b_over_a"]
    print(f"{commits['b']} / {commits['a']}: wall x{ratio['wall_s']:.2f}, CPU x{ratio['cpu_s']:.2f}")
    print(f"wrote {out.relative_to(REPO)}")
    sys.exit(max(r["exit"] for rs in runs.values() for r in rs))


if __name__ == "__main__":
    main()

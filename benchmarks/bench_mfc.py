"""Benchmark mfc against exact Prim on an n = 20000 Euclidean Gaussian mixture, in one process (mfc.md targets),
with the trade-off sweep: fixed-r over --r-sweep, greedy-B and dp-B over B = --budget-sweep * t.

    .venv/bin/python benchmarks/bench_mfc.py            # writes benchmarks/results/mfc.json, prints a table
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from threadpoolctl import threadpool_limits

from paperdag.methods.mfc import (
    EuclideanSpace,
    complete_forest,
    completed_tree,
    exact_mst,
    gamma_weight_ratio,
    gaussian_mixture,
    is_spanning_tree,
    learned_forest,
    mst_bound,
    tree_cost,
)

T = TypeVar("T")
RESULTS = Path(__file__).parent / "results" / "mfc.json"
VARIANTS = ("simple", "fixed-r", "greedy-B", "dp-B", "opt")
BUDGETED = ("greedy-B", "dp-B")


def best_of(repeats: int, run: Callable[[], T]) -> tuple[T, float]:
    """The last result and the fastest wall time over `repeats` runs."""
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - start)
    return result, min(times)  # type: ignore[return-value]


def sweep(args: argparse.Namespace) -> list[tuple[str, int | None, int | None]]:
    """(variant, r, B / t) for every run: each variant's curve, the default budget always included."""
    runs: list[tuple[str, int | None, int | None]] = []
    for variant in VARIANTS:
        if variant == "fixed-r":
            runs += [(variant, r, None) for r in sorted({*args.r_sweep, args.r})]
        elif variant in BUDGETED:
            runs += [(variant, None, e) for e in sorted({*args.budget_sweep, args.extra_reps_per_cluster})]
        else:
            runs.append((variant, None, None))
    return runs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=20000, help="points")
    ap.add_argument("--dim", type=int, default=32, help="dimension d")
    ap.add_argument("--components", type=int, default=20, help="Gaussian components")
    ap.add_argument("--separation", type=float, default=4.0, help="std of component centres")
    ap.add_argument("--points-per-cluster", type=int, default=200, help="t = ceil(n / this)")
    ap.add_argument("--r", type=int, default=8, help="reps per component for fixed-r")
    ap.add_argument("--extra-reps-per-cluster", type=int, default=7, help="B = this * t")
    ap.add_argument("--max-reps-per-component", type=int, default=32, help="cap on r_i")
    ap.add_argument("--r-sweep", type=int, nargs="+", default=[1, 2, 4, 8, 16], help="fixed-r's trade-off curve (plus --r)")
    ap.add_argument(
        "--budget-sweep", type=int, nargs="+", default=[0, 1, 2, 4, 8, 16],
        help="greedy-B and dp-B's trade-off curve, B = value * t (plus --extra-reps-per-cluster)",
    )
    ap.add_argument("--exact-dense-max-n", type=int, default=20000,
                    help="exact Prim over the blocked n x n matrix (the completion's kernel) up to this n, as mfc.evaluate")
    ap.add_argument("--repeats", type=int, default=3, help="timed runs per method; the fastest counts")
    ap.add_argument(
        "--blas-threads", type=int, default=1,
        help="BLAS threads for both sides (1: on small shared machines, BLAS threads oversubscribe and add noise)",
    )
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    with threadpool_limits(limits=args.blas_threads):
        run_benchmark(args)


def run_benchmark(args: argparse.Namespace) -> None:
    """Exact Prim, the learned forest and every completion variant on one instance, timed in this process."""
    n = args.n
    space = EuclideanSpace(gaussian_mixture(n, args.dim, args.components, args.separation, args.seed))
    t = max(2, math.ceil(n / args.points_per_cluster))
    budget = args.extra_reps_per_cluster * t

    # exact reference: Prim, O(n^2)
    counted, counter = space.counting()
    (mst_edges, mst_weights), exact_s = best_of(args.repeats, lambda: exact_mst(counted, dense_below=args.exact_dense_max_n))
    exact_calls = counter.calls // args.repeats
    mst_cost = float(mst_weights.sum())

    # learned forest F_t
    counted, counter = space.counting()
    forest, forest_s = best_of(args.repeats, lambda: learned_forest(counted, t, seed=args.seed))
    forest_calls = counter.calls // args.repeats
    gamma = gamma_weight_ratio(forest.labels, forest.cost, mst_edges, mst_weights)

    rows = []
    for variant, r, extra in sweep(args):
        counted, counter = space.counting()
        repeats = 1 if variant == "opt" else args.repeats

        def run(variant: str = variant, counted: EuclideanSpace = counted, r: int = r or 1, b: int = (extra or 0) * t):  # noqa: ANN202
            return complete_forest(counted, forest, variant, r=r, budget=b, max_reps_per_component=args.max_reps_per_component)

        completion, seconds = best_of(repeats, run)
        cost = tree_cost(forest, completion)
        rows.append(
            {
                "variant": variant,
                "budget": f"r={r}" if r is not None else f"B={extra}t" if extra is not None else "",
                "default_budget": r in (None, args.r) and extra in (None, args.extra_reps_per_cluster),
                "reps": completion.total_reps,
                "tree_cost": cost,
                "calls": counter.calls // repeats,
                "runtime_s": seconds,
                "spanning": is_spanning_tree(n, completed_tree(forest, completion)[0]),
            }
        )
    optimal = next(r["tree_cost"] for r in rows if r["variant"] == "opt")
    for r in rows:
        r["cost_ratio_mst"] = r["tree_cost"] / mst_cost
        r["cost_ratio_opt_completion"] = r["tree_cost"] / optimal
        r["distance_call_fraction"] = r["calls"] / n**2
        r["speedup_completion_only"] = exact_s / r["runtime_s"]
        r["speedup_with_forest"] = exact_s / (r["runtime_s"] + forest_s)
        r["within_bound"] = bool(
            r["spanning"] and r["tree_cost"] <= 2 * optimal * (1 + 1e-9) and r["tree_cost"] <= mst_bound(gamma) * mst_cost * (1 + 1e-9)
        )

    defaults = [r for r in rows if r["default_budget"]]
    best = min((r for r in defaults if r["variant"] in BUDGETED), key=lambda r: (round(r["cost_ratio_mst"], 12), r["calls"]))
    violations = sum(not r["within_bound"] for r in rows)
    targets = {
        "cost_ratio_mst <= 1.05": best["cost_ratio_mst"] <= 1.05,
        "distance_call_fraction <= 0.05": best["distance_call_fraction"] <= 0.05,
        "speedup_completion_only >= 10": best["speedup_completion_only"] >= 10,
        "speedup_with_forest >= 10": best["speedup_with_forest"] >= 10,
        "bound_violations == 0": violations == 0,
    }
    report = {
        "config": {**{k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}, "t": t, "budget_B": budget},
        "machine": {"python": platform.python_version(), "processor": platform.machine()},
        "exact": {"mst_cost": mst_cost, "calls": exact_calls, "call_fraction": exact_calls / n**2, "runtime_s": exact_s},
        "forest": {"t": forest.t, "gamma": gamma, "calls": forest_calls, "call_fraction": forest_calls / n**2, "runtime_s": forest_s},
        "variants": defaults,
        "sweep": rows,
        "headline": {
            "variant": best["variant"],
            "cost_ratio_mst": best["cost_ratio_mst"],
            "distance_call_fraction": best["distance_call_fraction"],
            "forest_distance_call_fraction": forest_calls / n**2,
            "speedup_completion_only": best["speedup_completion_only"],
            "speedup_with_forest": best["speedup_with_forest"],
            "bound_violations": violations,
        },
        "targets_met": targets,
        "timing_note": (
            f"fastest of {args.repeats} runs each (opt: 1), exact Prim and every variant in this one process, "
            f"{args.blas_threads} BLAS thread(s) for both"
        ),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")

    print(f"n={n} d={args.dim} t={t} B={budget} gamma={gamma:.3f}  exact Prim {exact_s:.2f}s ({exact_calls / n**2:.3f} n^2 calls)  "
          f"forest {forest_s:.2f}s ({forest_calls / n**2:.4f} n^2 calls)")
    print(f"{'variant':9s} {'budget':>6s} {'reps':>6s} {'cost/MST':>9s} {'cost/OPT':>9s} {'calls/n^2':>10s} {'time s':>7s} {'speedup':>8s} {'+forest':>8s} bound")
    for r in rows:
        print(
            f"{r['variant']:9s} {r['budget']:>6s} {r['reps']:6d} {r['cost_ratio_mst']:9.4f} {r['cost_ratio_opt_completion']:9.4f} "
            f"{r['distance_call_fraction']:10.4f} {r['runtime_s']:7.3f} {r['speedup_completion_only']:8.1f} "
            f"{r['speedup_with_forest']:8.1f} {'ok' if r['within_bound'] else 'VIOLATED'}"
        )
    print(f"best budgeted at the default budget: {best['variant']} {best['budget']}; targets: " + ", ".join(f"{k}: {'met' if v else 'NOT met'}" for k, v in targets.items()))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

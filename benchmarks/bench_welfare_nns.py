"""Benchmark welfare_nns against its targets (shared/methods/welfare_nns.md) in one process, side by side, on an
n = 100k Gaussian mixture with the Clus and Prob schemes (and both at once for the multi-attribute greedy):

- Nash-ANN vs Div-ANN on (ratio, entropy): does some Nash-ANN eta dominate some cap k', per scheme?
- NSW over per-attribute HNSW / NSW with the exact (flat) oracle, same eta (target >= 0.95);
- Nash-ANN latency / plain top-k latency on the same global HNSW (target <= attributes searched + 1);
- multi-attribute greedy over L = 10k candidates, ms per query (target <= 50), vs a non-incremental greedy.

    .venv/bin/python benchmarks/bench_welfare_nns.py      # writes benchmarks/results/welfare_nns.json, prints a table
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from paperdag.methods.welfare_nns import (
    clus_attributes,
    div_ann,
    gaussian_mixture,
    multi_label_membership,
    nash_ann,
    nsw,
    one_hot,
    prob_attributes,
    sigma_from_scores,
    unit_rows,
    utilities,
    welfare_gain,
    welfare_greedy,
)
from paperdag.retrieval import AnnIndex, PerAttributeIndex, attribute_entropy

RESULTS = Path(__file__).parent / "results" / "welfare_nns.json"


def timed(fn, *args, repeats: int = 1):  # noqa: ANN001, ANN202
    """fn(*args) and its fastest wall time (ms) over `repeats` runs."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn(*args)
        best = min(best, time.perf_counter() - start)
    return out, 1e3 * best


def naive_greedy(sims: np.ndarray, membership: np.ndarray, k: int, eta: float) -> np.ndarray:
    """The same greedy recomputing every candidate's gain over all c attributes at every step: O(k L c)."""
    w, picked, available = np.zeros(membership.shape[1]), [], np.ones(len(sims), dtype=bool)
    for _ in range(k):
        gains = (membership * welfare_gain(w[None, :] + eta, sims[:, None], 0.0)).sum(axis=1)  # (L,)
        j = int(np.argmax(np.where(available, gains, -np.inf)))
        picked.append(j)
        available[j] = False
        w += membership[j] * sims[j]
    return np.asarray(picked)


def lists_of(hits: dict[int, tuple[np.ndarray, np.ndarray]], metric: str) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    return {a: (ids[0], sigma_from_scores(scores[0], metric)) for a, (scores, ids) in hits.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=100_000, help="points")
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--components", type=int, default=50)
    ap.add_argument("--separation", type=float, default=0.5)
    ap.add_argument("--attributes", type=int, default=20, help="c of both schemes")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--eta", type=float, default=1.0, help="eta of the NSW-vs-oracle, latency and greedy targets")
    ap.add_argument("--eta-sweep", type=float, nargs="+", default=[0.1, 1, 10, 20, 30, 50, 100, 150, 200, 300, 500, 1000, 3000])
    ap.add_argument("--caps", type=int, nargs="+", default=[1, 2, 3, 5, 10])
    ap.add_argument("--candidates", type=int, default=10_000, help="L of the multi-attribute greedy")
    ap.add_argument("--hnsw-m", type=int, default=16)
    ap.add_argument("--ef-construction", type=int, default=100)
    ap.add_argument("--ef-search", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3, help="timed runs per query and method; the fastest counts")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    with threadpool_limits(limits=1):  # one thread for builds (deterministic HNSW) and every timed call
        run(args)


def run(args: argparse.Namespace) -> None:
    points = unit_rows(gaussian_mixture(args.n + args.queries, args.dim, args.components, args.separation, args.seed))
    items, queries = points[: args.n], points[args.n :]
    schemes = {
        "clus": clus_attributes(items, args.attributes, args.seed),
        "prob": prob_attributes(args.n, args.attributes, 1.0, args.seed + 1),
    }
    hnsw = {"hnsw_m": args.hnsw_m, "ef_construction": args.ef_construction, "ef_search": args.ef_search}
    start = time.perf_counter()
    ann = AnnIndex.build(items, "hnsw", "ip", **hnsw)
    build_s = {"global": time.perf_counter() - start}
    exact = AnnIndex.build(items, "flat", "ip")
    k, eta = args.k, args.eta

    exact_ids = exact.search(queries, k)[1]
    exact_mass = sigma_from_scores(exact.search(queries, k)[0], "ip").sum(axis=1)
    per_scheme = {}
    for name, labels in schemes.items():
        start = time.perf_counter()
        per = PerAttributeIndex.build(items, labels, "hnsw", "ip", **hnsw)
        build_s[name] = time.perf_counter() - start
        oracle = PerAttributeIndex.build(items, labels, "flat", "ip")
        c = len(per.attributes)
        search_ms, topk_ms, approx_lists, oracle_lists = [], [], [], []
        for q in queries:  # top-k and the per-attribute searches timed interleaved: the same machine load for both
            best_per, best_top = float("inf"), float("inf")
            for _ in range(args.repeats):
                hits, ms = timed(per.search_each, q[None], k)
                best_per = min(best_per, ms)
                best_top = min(best_top, timed(ann.search, q[None], k)[1])
            search_ms.append(best_per)
            topk_ms.append(best_top)
            approx_lists.append(lists_of(hits, "ip"))
            oracle_lists.append(lists_of(oracle.search_each(q[None], k), "ip"))
        search_ms, topk_ms = np.array(search_ms), np.array(topk_ms)

        def score(chosen: list[tuple[np.ndarray, np.ndarray]]) -> tuple[float, float]:
            ratio = np.mean([s.sum() / m for (_, s), m in zip(chosen, exact_mass, strict=True)])
            entropy = np.mean([attribute_entropy(labels[i]) for i, _ in chosen])
            return float(ratio), float(entropy)

        curve = {}
        for e in sorted({*args.eta_sweep, eta}):
            picks = [nash_ann(lists, k, e) for lists in approx_lists]
            curve[e] = score([(s.ids, s.sims) for s in picks])
        divs = {}
        for cap in args.caps:
            chosen = []
            for lists in approx_lists:
                ids = np.concatenate([i for i, _ in lists.values()])
                sims = np.concatenate([s for _, s in lists.values()])
                keep = ids >= 0
                pos = div_ann(sims[keep], labels[ids[keep]], k, cap)
                chosen.append((ids[keep][pos], sims[keep][pos]))
            divs[cap] = score(chosen)
        pairs = [(cap, e) for cap, (dr, de) in divs.items() for e, (nr, ne) in curve.items()
                 if nr >= dr - 1e-9 and ne >= de - 1e-9 and (nr > dr + 1e-9 or ne > de + 1e-9)]

        nash_ms, nsw_ratio = [], []
        for lists, best in zip(approx_lists, oracle_lists, strict=True):
            chosen, ms = timed(nash_ann, lists, k, eta, repeats=args.repeats)
            nash_ms.append(ms)
            reached = nsw(utilities(chosen.sims, one_hot(labels[chosen.ids], c)), eta)
            optimum = nash_ann(best, k, eta)
            nsw_ratio.append(reached / nsw(utilities(optimum.sims, one_hot(labels[optimum.ids], c)), eta))
        nash_total = search_ms + np.array(nash_ms)
        per_scheme[name] = {
            "attributes_searched": c,
            "nash_vs_div_pairs": [{"cap": cap, "eta": e} for cap, e in pairs],
            "nash_curve": {str(e): {"ratio": r, "entropy": h} for e, (r, h) in curve.items()},
            "div_curve": {str(cap): {"ratio": r, "entropy": h} for cap, (r, h) in divs.items()},
            "nsw_vs_exact": float(np.mean(nsw_ratio)),
            "nsw_vs_exact_min_query": float(np.min(nsw_ratio)),
            "topk_ms": float(topk_ms.mean()),
            "nash_search_ms": float(search_ms.mean()),
            "nash_select_ms": float(np.mean(nash_ms)),
            "nash_latency_ratio": float(nash_total.mean() / topk_ms.mean()),
        }

    # multi-attribute greedy over L candidates: every item carries its Clus and its Prob attribute
    membership = multi_label_membership((schemes["clus"], args.attributes), (schemes["prob"], args.attributes))
    greedy_ms, naive_ms, fetch_ms, same = [], [], [], 0
    for q in queries:
        (scores, ids), ms = timed(ann.search, q[None], args.candidates)
        fetch_ms.append(ms)
        ids, sims = ids[0][ids[0] >= 0], sigma_from_scores(scores[0][ids[0] >= 0], "ip")
        fast, ms = timed(welfare_greedy, sims, membership[ids], k, eta, repeats=args.repeats)
        greedy_ms.append(ms)
        slow, ms = timed(naive_greedy, sims, membership[ids], k, eta, repeats=args.repeats)
        naive_ms.append(ms)
        same += sorted(fast.tolist()) == sorted(slow.tolist())
    greedy = {
        "candidates": args.candidates,
        "attributes": 2 * args.attributes,
        "greedy_ms_per_query": float(np.mean(greedy_ms)),
        "greedy_ms_p95": float(np.percentile(greedy_ms, 95)),
        "naive_greedy_ms_per_query": float(np.mean(naive_ms)),
        "speedup_vs_naive": float(np.mean(naive_ms) / np.mean(greedy_ms)),
        "same_sets_as_naive": same / len(queries),
        "fetch_ms_per_query": float(np.mean(fetch_ms)),
    }
    worst = max(per_scheme, key=lambda s: per_scheme[s]["nash_latency_ratio"] / (per_scheme[s]["attributes_searched"] + 1))
    targets = {
        "nash_vs_div_dominates (both schemes)": all(per_scheme[s]["nash_vs_div_pairs"] for s in per_scheme),
        "nsw_vs_exact >= 0.95": min(per_scheme[s]["nsw_vs_exact"] for s in per_scheme) >= 0.95,
        "nash_latency_ratio <= attributes + 1": per_scheme[worst]["nash_latency_ratio"] <= per_scheme[worst]["attributes_searched"] + 1,
        "greedy_ms_per_query <= 50": greedy["greedy_ms_per_query"] <= 50,
    }
    config = {**vars(args), "out": str(args.out)}
    results = {
        "config": config,
        "machine": {"python": platform.python_version(), "processor": platform.machine(), "threads": 1},
        "exact_topk_recall_of_hnsw": float(np.mean([len(set(a) & set(b)) / k for a, b in zip(ann.search(queries, k)[1], exact_ids, strict=True)])),
        "build_s": build_s,
        "schemes": per_scheme,
        "greedy": greedy,
        "targets": targets,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")

    print(f"n={args.n} d={args.dim} k={k} eta={eta} queries={args.queries} (one thread, best of {args.repeats} per query)")
    print(f"{'scheme':6s} {'c':>3s} {'NSW/exact':>10s} {'topk ms':>8s} {'nash ms':>8s} {'ratio':>6s} {'<=c+1':>6s}  Nash dominates Div at")
    for name, r in per_scheme.items():
        pairs = ", ".join(f"k'={p['cap']} (eta={p['eta']:g})" for p in r["nash_vs_div_pairs"]) or "none"
        total = r["nash_search_ms"] + r["nash_select_ms"]
        print(f"{name:6s} {r['attributes_searched']:3d} {r['nsw_vs_exact']:10.4f} {r['topk_ms']:8.3f} {total:8.3f} "
              f"{r['nash_latency_ratio']:6.1f} {r['attributes_searched'] + 1:6d}  {pairs}")
    g = greedy
    print(f"greedy over L={g['candidates']} (c={g['attributes']}): {g['greedy_ms_per_query']:.2f} ms/query "
          f"(p95 {g['greedy_ms_p95']:.2f}; naive {g['naive_greedy_ms_per_query']:.1f} ms, x{g['speedup_vs_naive']:.1f}; "
          f"fetch {g['fetch_ms_per_query']:.1f} ms)")
    for name, met in targets.items():
        print(f"  {'met ' if met else 'MISS'}  {name}")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

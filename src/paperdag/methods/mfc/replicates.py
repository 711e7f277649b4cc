"""The paper's comparison over replicates: at the official code's operating points (t = sqrt(n), sqrt(n)/2,
sqrt(n)/4; noisy forests; real data), do greedy-B and dp-B complete a forest more cheaply than fixed-r (simple
is fixed-r with r = 1) for no more distance calls?

One replicate is one seed: a fresh point set (a fresh mixture, or a fresh random subset of a real set, as the
official code draws one per repeat), a fresh k-center start and fresh noise. In each cell (family, t, noise,
R / t) of a seed, the method's completion cost / optimal completion is set against the best fixed-r whose own
distance calls are no more than the method's (the strongest fixed-r at equal calls); the per-seed mean over
cells is the paired unit, so the interval is over seeds (paperdag.stats.paired).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import numpy as np

from paperdag.methods.mfc.completion import complete_forest
from paperdag.methods.mfc.forest import LearnedForest, forest_of, learned_forest
from paperdag.methods.mfc.metrics import EuclideanSpace, MetricSpace
from paperdag.methods.mfc.mst import exact_mst
from paperdag.methods.mfc.quality import alpha_bound, gamma_weight_ratio, tree_cost
from paperdag.points import gaussian_mixture
from paperdag.stats import interval, paired

T_FRACTIONS = {"sqrt(n)": 1, "sqrt(n)/2": 2, "sqrt(n)/4": 4}  # the official code's t = floor(sqrt n) / divisor
METHODS = ("greedy-B", "dp-B")


def clusters(n: int, label: str) -> int:
    """t for one of T_FRACTIONS's labels (at least 2)."""
    return max(2, math.isqrt(n) // T_FRACTIONS[label])


def replicate_points(family: str, seed: int, gaussian: tuple[int, int, int, float], digits: np.ndarray | None,
                     digits_n: int) -> np.ndarray:
    """One replicate's point set: a fresh Gaussian mixture (n, dim, components, separation) or a fresh random subset
    of `digits_n` rows of load_digits, drawn from `seed`."""
    if family == "gaussian":
        n, dim, components, separation = gaussian
        return gaussian_mixture(n, dim, components, separation, seed)
    if digits is None:
        raise ValueError(f"replicate family {family!r} needs the digits array")
    return digits[np.random.default_rng(seed).choice(len(digits), min(digits_n, len(digits)), replace=False)]


def compare_cell(space: MetricSpace, t: int, noise: float, seed: int, multipliers: Iterable[int], r_max: int,
                 cap: int | None, forest: LearnedForest | None = None,
                 mst: tuple[np.ndarray, np.ndarray] | None = None) -> list[dict]:
    """Every variant on one learned forest (k-center into t clusters with `noise`, unless `forest` is given): opt,
    fixed-r for r = 1..r_max (r = 1 is `simple`), greedy-B and dp-B with R = m t reps (B = (m - 1) t) for each
    multiplier m. One row each: reps, distance calls of the completion (reps chosen + candidates), tree cost,
    cost / optimal completion, alpha, and the forest's gamma (from `mst`, the space's exact MST, computed here when
    not given)."""
    forest = forest or learned_forest(space, t, noise=noise, seed=seed)
    mst_edges, mst_weights = mst if mst is not None else exact_mst(space)
    gamma = gamma_weight_ratio(forest.labels, forest.cost, mst_edges, mst_weights)
    counted, counter = space.counting()

    def run(variant: str, knob: int, **options: int | None) -> dict:
        before = counter.calls
        completion = complete_forest(counted, forest, variant, **options)
        return {"variant": variant, "knob": knob, "t": forest.t, "reps": completion.total_reps, "calls": counter.calls - before,
                "tree_cost": tree_cost(forest, completion), "alpha_bound": alpha_bound(completion.radius_sum, forest.cost)}

    rows = [run("opt", 0)]
    rows += [run("fixed-r", r, r=r) for r in range(1, r_max + 1)]
    for m in multipliers:
        rows += [run(v, m, budget=(m - 1) * forest.t, max_reps_per_component=cap) for v in METHODS]
    optimal = rows[0]["tree_cost"]
    for row in rows:
        row["cost_ratio_opt"] = row["tree_cost"] / optimal
        row["gamma"] = gamma
    return rows


def replicated_rows(seed: int, replicates: int, families: list[str], t_labels: list[str], noises: list[float],
                    multipliers: list[int], r_max: int, cap: int | None, gaussian: tuple[int, int, int, float],
                    digits: np.ndarray | None, digits_n: int,
                    progress: Callable[[list], Iterable] = iter) -> list[dict]:
    """compare_cell at every (replicate, family, t label, noise), one fresh point set per (replicate, family), its
    exact MST computed once; one row per run, keyed by family, seed (the replicate), t_label, noise and n."""
    jobs = [(s, f, lab, noise) for s in range(replicates) for f in families for lab in t_labels for noise in noises]
    rows, spaces = [], {}
    for rep, family, label, noise in progress(jobs):
        if (rep, family) not in spaces:
            space = EuclideanSpace(replicate_points(family, seed + 7919 * rep, gaussian, digits, digits_n))
            spaces = {(rep, family): (space, exact_mst(space))}  # the exact MST once per point set: gamma per cell
        space, mst = spaces[(rep, family)]
        cell = compare_cell(space, clusters(len(space), label), noise, seed + rep, multipliers, r_max, cap, mst=mst)
        rows += [{"family": family, "seed": rep, "t_label": label, "noise": noise, "n": len(space), **r} for r in cell]
    return rows


def matched_baseline(fixed: list[dict], calls: int) -> dict:
    """The cheapest-tree fixed-r run whose distance calls are <= `calls` (r = 1, simple, when none is): the strongest
    fixed-r at no more calls than the method's."""
    within = [r for r in fixed if r["calls"] <= calls] or [min(fixed, key=lambda r: r["knob"])]
    return min(within, key=lambda r: (r["cost_ratio_opt"], r["calls"]))


def paired_rows(rows: list[dict]) -> list[dict]:
    """One row per (cell, method, m): the method's cost / opt, calls and alpha beside the matched fixed-r's and simple's.

    `rows` carry family, seed, t_label, noise besides compare_cell's columns."""
    cells: dict[tuple, list[dict]] = {}
    for row in rows:
        cells.setdefault((row["family"], row["t_label"], row["noise"], row["seed"]), []).append(row)
    out = []
    for (family, t_label, noise, seed), cell in sorted(cells.items()):
        fixed = [r for r in cell if r["variant"] == "fixed-r"]
        simple = min(fixed, key=lambda r: r["knob"])
        for row in (r for r in cell if r["variant"] in METHODS):
            base = matched_baseline(fixed, row["calls"])
            same_reps = next((r for r in fixed if r["knob"] == row["knob"]), base)  # fixed-r with r = m: R = m t too
            out.append({
                "family": family, "t_label": t_label, "noise": noise, "seed": seed, "method": row["variant"], "multiplier": row["knob"],
                "t": row["t"], "gamma": row["gamma"], "cost_ratio_opt": row["cost_ratio_opt"], "calls": row["calls"], "alpha_bound": row["alpha_bound"],
                "fixed_r": base["knob"], "fixed_r_cost_ratio_opt": base["cost_ratio_opt"], "fixed_r_calls": base["calls"],
                "fixed_r_alpha_bound": base["alpha_bound"], "simple_cost_ratio_opt": simple["cost_ratio_opt"],
                "simple_calls": simple["calls"], "same_reps_cost_ratio_opt": same_reps["cost_ratio_opt"],
                "same_reps_calls": same_reps["calls"],
            })
    return out


def _per_seed(pairs: list[dict], key: str) -> tuple[list[float], list[float]]:
    """Per-seed means over cells of the method's `key` and the baseline's (same seeds, same cells: paired)."""
    seeds = sorted({p["seed"] for p in pairs})
    method = [float(np.mean([p["cost_ratio_opt"] for p in pairs if p["seed"] == s])) for s in seeds]
    base = [float(np.mean([p[key] for p in pairs if p["seed"] == s])) for s in seeds]
    return method, base


def _differs(pairs: list[dict]) -> float:
    """Share of the pairs where the method's tree and the matched fixed-r's differ in cost."""
    return float(np.mean([abs(p["cost_ratio_opt"] - p["fixed_r_cost_ratio_opt"]) > 1e-12 for p in pairs]))


def summary(rows: list[dict], method: str = "dp-B") -> dict[str, object]:
    """The replicated headline: `method` against the matched fixed-r and against simple, paired over seeds, with
    intervals; the same per (family, t, noise, m) setting; call and alpha ratios beside them."""
    pairs = paired_rows(rows)
    mine = [p for p in pairs if p["method"] == method]
    if not mine:
        raise ValueError(f"replicates: no {method} rows; is mfc.compare.multipliers empty?")
    m_fixed, b_fixed = _per_seed(mine, "fixed_r_cost_ratio_opt")
    m_simple, b_simple = _per_seed(mine, "simple_cost_ratio_opt")
    m_reps, b_reps = _per_seed(mine, "same_reps_cost_ratio_opt")
    others = {other: paired(*_per_seed([p for p in pairs if p["method"] == other], "fixed_r_cost_ratio_opt"))
              for other in METHODS}
    settings: dict[tuple, list[dict]] = {}
    for p in mine:
        settings.setdefault((p["family"], p["t_label"], p["noise"], p["multiplier"]), []).append(p)
    table = []
    for (family, t_label, noise, m), group in sorted(settings.items()):
        table.append({
            "family": family, "t_label": t_label, "noise": noise, "multiplier": m, "t": int(np.mean([g["t"] for g in group])),
            "gamma": interval([g["gamma"] for g in group]),  # the paper's weight ratio of the learned forests
            "cost_ratio_opt": interval([g["cost_ratio_opt"] for g in group]),
            "fixed_r_cost_ratio_opt": interval([g["fixed_r_cost_ratio_opt"] for g in group]),
            "minus_fixed_r": paired([g["cost_ratio_opt"] for g in group], [g["fixed_r_cost_ratio_opt"] for g in group]),
            "minus_simple": paired([g["cost_ratio_opt"] for g in group], [g["simple_cost_ratio_opt"] for g in group]),
            "differs_from_fixed_r_fraction": _differs(group),
            "calls_ratio_vs_fixed_r": float(np.mean([g["calls"] / g["fixed_r_calls"] for g in group])),
            "alpha_bound": interval([g["alpha_bound"] for g in group]),
            "fixed_r_alpha_bound": interval([g["fixed_r_alpha_bound"] for g in group]),
        })
    return {
        "method": method,
        "replicates": len(m_fixed),
        "minus_fixed_r_at_equal_calls": paired(m_fixed, b_fixed),
        "minus_simple": paired(m_simple, b_simple),
        "minus_fixed_r_at_equal_reps": paired(m_reps, b_reps),  # fixed-r with r = m (R = m t), more calls for the method
        "calls_ratio_vs_fixed_r_at_equal_reps": float(np.mean([p["calls"] / p["same_reps_calls"] for p in mine])),
        "minus_fixed_r_by_method": others,
        "calls_ratio_vs_fixed_r": float(np.mean([p["calls"] / p["fixed_r_calls"] for p in mine])),
        "differs_from_fixed_r_fraction": _differs(mine),
        "note": ("cost / optimal completion of the method minus that of the best fixed-r (simple = r 1 among them) whose "
                 "completion makes no more distance calls, mean over (family, t, noise, R / t) cells per seed, interval "
                 "over seeds"),
        "settings": table,
    }


# ---------------------------------------------------------------- the worst case: factor 2 tight


def worst_case_points(t: int, eps: float) -> np.ndarray:
    """2t points in R^(2t) where one representative per component costs ~2x the optimal completion.

    Component k is {a_k, b_k} with d(a_k, b_k) = 1; the b's lie eps apart (b_k = eps / sqrt 2 e_k) and a_k = b_k +
    e_(t+k), so every a_k is ~1 from every other point. The a's come first (ids 0..t-1), so the first
    farthest-first representative of each component is a_k (k-center also recovers the pairs): simple's candidate
    edges all cost sqrt(1 + eps^2), the optimal completion's eps, and w(T) / w(opt) =
    (t + (t - 1) sqrt(1 + eps^2)) / (t + (t - 1) eps) -> 2 (alpha = 1 + t / t = 2 too). A second representative (b_k) recovers the optimum.
    """
    b = np.zeros((t, 2 * t))
    b[np.arange(t), np.arange(t)] = eps / math.sqrt(2.0)
    a = b.copy()
    a[np.arange(t), t + np.arange(t)] = 1.0
    return np.concatenate([a, b])  # (2t, 2t)


def worst_case(space: MetricSpace, t: int) -> list[dict]:
    """simple, fixed-r (r = 2) and opt on the worst case with its pairs as the forest (k-center from a b point would
    split them): compare_cell's rows, no budgeted runs."""
    labels = np.concatenate([np.arange(t), np.arange(t)])
    return compare_cell(space, t, 0.0, 0, [], 2, None, forest=forest_of(space, labels))


def worst_case_summary(rows: list[dict]) -> dict[str, object]:
    """simple's cost / optimal completion and alpha on the worst case, beside r = 2's (which is exact). Its forest
    has gamma = 1 (the pairs' edges are MST edges, the optimal completion is the MST), so the 2 gamma w(MST) bound
    is as tight there as the 2 x optimal one."""
    simple = next(r for r in rows if r["variant"] == "fixed-r" and r["knob"] == 1)
    two = next(r for r in rows if r["variant"] == "fixed-r" and r["knob"] == 2)
    return {"t": simple["t"], "gamma": simple["gamma"], "simple_cost_ratio_opt": simple["cost_ratio_opt"],
            "simple_alpha_bound": simple["alpha_bound"], "r2_cost_ratio_opt": two["cost_ratio_opt"]}


def worst_case_rows(t: int, eps: float) -> list[dict]:
    """worst_case on worst_case_points(t, eps), as rows of the compare table (family "worst")."""
    space = EuclideanSpace(worst_case_points(t, eps))
    return [{"family": "worst", "seed": 0, "t_label": "pairs", "noise": 0.0, "n": len(space), **r} for r in worst_case(space, t)]

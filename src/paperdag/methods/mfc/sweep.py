"""The trade-off sweep: each completion variant at each budget, one record per run with its cost and calls."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import polars as pl

from paperdag.methods.mfc.completion import Completion, complete_forest
from paperdag.methods.mfc.forest import LearnedForest
from paperdag.methods.mfc.metrics import MetricSpace
from paperdag.methods.mfc.quality import completed_tree, is_spanning_tree, tree_cost

BUDGETED = ("greedy-B", "dp-B")  # the variants spending a budget B of extra representatives
SETTING_SCHEMA = {"r": pl.Int64, "extra_reps_per_cluster": pl.Int64}  # null where the variant has no such knob


@dataclass(frozen=True)
class Setting:
    """One point on a variant's trade-off curve: r for fixed-r, B / t for greedy-B and dp-B, nothing for simple and opt."""

    r: int | None = None
    extra_reps_per_cluster: int | None = None
    default: bool = True  # the budget the headline is read at (mfc.infer.reps_per_component / extra_reps_per_cluster)

    @property
    def label(self) -> str:
        if self.r is not None:
            return f"r={self.r}"
        if self.extra_reps_per_cluster is not None:
            return f"B={self.extra_reps_per_cluster}t"
        return ""


def settings(variant: str, r: int, r_sweep: list[int], extra: int, extra_sweep: list[int]) -> list[Setting]:
    """The sweep of one variant, always including the default budget (r for fixed-r, B / t = extra for the budgeted)."""
    if variant == "fixed-r":
        return [Setting(r=v, default=v == r) for v in sorted({*r_sweep, r})]
    if variant in BUDGETED:
        return [Setting(extra_reps_per_cluster=e, default=e == extra) for e in sorted({*extra_sweep, extra})]
    return [Setting()]


def record(name: str, metric: str, n: int, forest: LearnedForest, setting: Setting, budget: int, completion: Completion,
           calls: int, runtime: float) -> dict:
    """The results row of one completion: its budget, representatives, cost w(F_t) + w(completion) and calls."""
    return {
        "instance": name, "metric": metric, "n": n, "t": forest.t, "variant": completion.variant, "r": setting.r,
        "extra_reps_per_cluster": setting.extra_reps_per_cluster, "default_budget": setting.default, "budget": budget,
        "reps": completion.total_reps, "radius_sum": completion.radius_sum, "forest_cost": forest.cost,
        "completion_cost": completion.cost, "tree_cost": tree_cost(forest, completion),
        "selection_calls": completion.selection_calls, "candidate_calls": completion.candidate_calls, "calls": calls,
        "runtime_s": runtime, "spanning": is_spanning_tree(n, completed_tree(forest, completion)[0]),
    }


def run_setting(name: str, metric: str, space: MetricSpace, forest: LearnedForest, variant: str, setting: Setting,
                max_reps_per_component: int) -> tuple[dict, pl.DataFrame]:
    """Complete `forest` at one setting of its sweep (B = extra reps per cluster x t), timed and counted: its results
    record and its added edges."""
    counted, counter = space.counting()
    budget = (setting.extra_reps_per_cluster or 0) * forest.t  # B
    start = time.perf_counter()
    completion = complete_forest(counted, forest, variant, r=setting.r or 1, budget=budget,
                                 max_reps_per_component=max_reps_per_component)
    runtime = time.perf_counter() - start
    return (record(name, metric, len(space), forest, setting, budget, completion, counter.calls, runtime),
            added_edges(name, setting, completion))


def added_edges(name: str, setting: Setting, completion: Completion) -> pl.DataFrame:
    """The completion's edges, keyed by instance, variant and setting."""
    return pl.DataFrame(
        {"instance": name, "variant": completion.variant, "r": setting.r, "extra_reps_per_cluster": setting.extra_reps_per_cluster,
         "u": completion.edges[:, 0], "v": completion.edges[:, 1], "weight": completion.weights},
        schema_overrides=SETTING_SCHEMA | {"u": pl.Int64, "v": pl.Int64, "weight": pl.Float64},
    )


def setting_of(row: dict) -> Setting:
    return Setting(r=row["r"], extra_reps_per_cluster=row["extra_reps_per_cluster"], default=row["default_budget"])


def sweep(points: pl.DataFrame, forest: pl.DataFrame, forest_edges: pl.DataFrame, variants: list[str], r: int,
          r_sweep: list[int], extra: int, extra_sweep: list[int], max_reps_per_component: int,
          progress: Callable[[list], Iterable] = iter) -> tuple[pl.DataFrame, pl.DataFrame]:
    """run_setting for every instance of the points table, variant and setting of its sweep: the results table and
    the added edges."""
    from paperdag.methods.mfc import tables

    records, added = [], []
    jobs = [(name, rows, v, s) for name, rows in tables.instances(points) for v in variants
            for s in settings(v, r, r_sweep, extra, extra_sweep)]
    current: dict[str, tuple] = {}
    for name, rows, variant, setting in progress(jobs):
        if name not in current:
            current = {name: (tables.space(rows), tables.read_forest(name, forest, forest_edges))}
        space, learned = current[name]
        row, edges = run_setting(name, rows["metric"][0], space, learned, variant, setting, max_reps_per_component)
        records.append(row)
        added.append(edges)
    return pl.DataFrame(records, schema_overrides=SETTING_SCHEMA | {"radius_sum": pl.Float64}), pl.concat(added)

"""Glue between the paperdag engine and the mfc method: synthesize -> train -> infer -> evaluate.

The method lives in paperdag.methods.mfc (its points tables, sweep and evaluation included); these functions read the
tables, call it per instance with one BLAS thread and a timer, and return its tables.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Annotated, Literal

import numpy as np
import polars as pl
from pydantic import AfterValidator, Field, NonNegativeFloat, NonNegativeInt, PositiveInt
from rich.progress import track
from threadpoolctl import threadpool_limits

from paperdag.engine.params import Fraction
from paperdag.methods.mfc import (
    VARIANTS,
    EuclideanSpace,
    complete_forest,
    exact_mst,
    gamma_overlap,
    gamma_weight_ratio,
    learned_forest,
    tables,
)
from paperdag.methods.mfc.instances import bit_strings, edited_strings, item_sets, uniform_cube
from paperdag.points import gaussian_mixture, points_path, read_points

INSTANCES = ("gaussian", "gaussian_noisy", "uniform", "hamming", "jaccard", "edit", "digits")
Instance = Literal[INSTANCES + ("file",)]  # "file": the user's points_file
# Every timed computation (forest, completions, exact Prim) runs with one BLAS thread: on a small shared machine,
# BLAS threads oversubscribe the cores and make wall times noisy by several x, unevenly across methods.
BLAS_THREADS = 1


def _has_references(variants: list[str]) -> list[str]:
    if not {"opt", "simple"} <= set(variants):
        raise ValueError("must include opt (the optimal completion the bound is checked against) and simple (the "
                         "one-representative baseline the headline compares with)")
    return variants


# ---------------------------------------------------------------- synthesize


@dataclass(frozen=True)
class SynthesizeParams:
    instances: list[Literal[INSTANCES]]
    gaussian_n: PositiveInt
    gaussian_dim: PositiveInt
    gaussian_components: PositiveInt
    gaussian_separation: NonNegativeFloat
    gaussian_noisy_n: PositiveInt
    uniform_n: PositiveInt
    uniform_dim: PositiveInt
    hamming_n: PositiveInt
    hamming_bits: PositiveInt
    hamming_components: PositiveInt
    hamming_flip: Fraction
    jaccard_n: PositiveInt
    jaccard_vocabulary: PositiveInt
    jaccard_components: PositiveInt
    jaccard_set_size: PositiveInt
    edit_n: PositiveInt
    edit_length: PositiveInt
    edit_components: PositiveInt
    edit_max_edits: NonNegativeInt
    points_file: Annotated[str, AfterValidator(points_path)]
    points_metric: Literal["euclidean", "hamming"]
    seed: int


def synthesize(params: SynthesizeParams) -> dict[str, object]:
    """Point sets in every metric (plus load_digits and an optional user file), one row per point."""
    p = params
    make = {  # the gaussian_noisy family is the headline's at smaller n; train gives it a noisy forest
        "gaussian": lambda s: tables.vectors("gaussian", gaussian_mixture(
            p.gaussian_n, p.gaussian_dim, p.gaussian_components, p.gaussian_separation, s)),
        "gaussian_noisy": lambda s: tables.vectors("gaussian_noisy", gaussian_mixture(
            p.gaussian_noisy_n, p.gaussian_dim, p.gaussian_components, p.gaussian_separation, s)),
        "uniform": lambda s: tables.vectors("uniform", uniform_cube(p.uniform_n, p.uniform_dim, s)),
        "hamming": lambda s: tables.items("hamming", "hamming", [row.tolist() for row in bit_strings(
            p.hamming_n, p.hamming_bits, p.hamming_components, p.hamming_flip, s)]),
        "jaccard": lambda s: tables.items("jaccard", "jaccard", item_sets(
            p.jaccard_n, p.jaccard_vocabulary, p.jaccard_components, p.jaccard_set_size, s)),
        "edit": lambda s: tables.strings("edit", edited_strings(p.edit_n, p.edit_length, p.edit_components, p.edit_max_edits, s)),
        "digits": lambda s: tables.vectors("digits", _load_digits()),
    }
    frames = [make[name](p.seed + 1000 * offset) for offset, name in enumerate(p.instances)]
    if p.points_file:
        points, _ = read_points(p.points_file, "params.yaml mfc.synthesize.points_file")
        frames.append(tables.items("file", "hamming", points.astype(np.int64).tolist()) if p.points_metric == "hamming"
                      else tables.vectors("file", points.astype(np.float64)))
    return {"points": tables.points_table(frames)}


def _load_digits() -> np.ndarray:
    from sklearn.datasets import load_digits

    return load_digits().data.astype(np.float64)  # (1797, 64), ships offline


# ---------------------------------------------------------------- train: the learned forest


@dataclass(frozen=True)
class TrainParams:
    points_per_cluster: PositiveInt
    noise: Fraction
    noise_per_instance: dict[Instance, Fraction]
    seed: int


def train(params: TrainParams, points: pl.DataFrame) -> dict[str, object]:
    """F_t per instance: k-center into t = ceil(n / points_per_cluster) clusters (a fraction `noise` of points then
    moved to random clusters), an exact MST in each."""
    labels, edges, stats = [], [], {}
    for name, rows in track(tables.instances(points), description="mfc train: learned forests"):
        space, counter = tables.space(rows).counting()
        n = len(space)
        t = max(2, math.ceil(n / params.points_per_cluster))
        noise = params.noise_per_instance.get(name, params.noise)
        with threadpool_limits(limits=BLAS_THREADS):
            start = time.perf_counter()
            forest = learned_forest(space, t, noise=noise, seed=params.seed)
            runtime = time.perf_counter() - start
        forest_labels, forest_edges = tables.forest_tables(name, forest)
        labels.append(forest_labels)
        edges.append(forest_edges)
        stats[name] = {"n": n, "t": forest.t, "noise": noise, "cost": forest.cost, "calls": counter.calls, "runtime_s": runtime}
    return {"forest": pl.concat(labels), "forest_edges": pl.concat(edges), "forest_stats": stats}


# ---------------------------------------------------------------- infer: every completion variant, swept over its budget


@dataclass(frozen=True)
class InferParams:
    variants: Annotated[list[Literal[VARIANTS]], AfterValidator(_has_references)]
    reps_per_component: PositiveInt
    extra_reps_per_cluster: NonNegativeInt
    max_reps_per_component: PositiveInt
    r_sweep: list[PositiveInt]
    budget_sweep: list[NonNegativeInt]


def infer(params: InferParams, points: pl.DataFrame, forest: pl.DataFrame, forest_edges: pl.DataFrame) -> dict[str, object]:
    """Complete each learned forest with each variant at each budget of its sweep; count calls, time each, keep the edges."""
    from paperdag.methods.mfc.sweep import SETTING_SCHEMA, added_edges, record, settings

    p = params
    records, added = [], []
    jobs = [(name, rows, v, s) for name, rows in tables.instances(points) for v in p.variants
            for s in settings(v, p.reps_per_component, p.r_sweep, p.extra_reps_per_cluster, p.budget_sweep)]
    current: dict[str, tuple] = {}
    for name, rows, variant, setting in track(jobs, description="mfc infer: completions"):
        if name not in current:
            current = {name: (tables.space(rows), tables.read_forest(name, forest, forest_edges))}
        space, learned = current[name]
        counted, counter = space.counting()
        budget = (setting.extra_reps_per_cluster or 0) * learned.t  # B
        with threadpool_limits(limits=BLAS_THREADS):
            start = time.perf_counter()
            completion = complete_forest(counted, learned, variant, r=setting.r or 1, budget=budget,
                                         max_reps_per_component=p.max_reps_per_component)
            runtime = time.perf_counter() - start
        records.append(record(name, rows["metric"][0], len(space), learned, setting, budget, completion, counter.calls, runtime))
        added.append(added_edges(name, setting, completion))
    return {"results": pl.DataFrame(records, schema_overrides=SETTING_SCHEMA | {"radius_sum": pl.Float64}),
            "completions": pl.concat(added)}


# ---------------------------------------------------------------- compare: the variants over replicates, where they differ


def _at_least_two(multipliers: list[int]) -> list[int]:
    if not multipliers or min(multipliers) < 2:
        raise ValueError(f"R / t multipliers must be >= 2 (m = 1 is simple itself), got {multipliers}")
    return multipliers


@dataclass(frozen=True)
class CompareParams:
    families: list[Literal["gaussian", "digits"]]
    replicates: Annotated[int, Field(ge=2)]  # seeds; >= 2 for an interval (the official code averages 16)
    gaussian_n: PositiveInt
    gaussian_dim: PositiveInt
    gaussian_components: PositiveInt
    gaussian_separation: NonNegativeFloat
    digits_n: PositiveInt
    t_labels: list[Literal["sqrt(n)", "sqrt(n)/2", "sqrt(n)/4"]]
    noises: list[Fraction]
    multipliers: Annotated[list[PositiveInt], AfterValidator(_at_least_two)]
    r_max: PositiveInt
    max_reps_per_component: PositiveInt
    worst_case_t: PositiveInt
    worst_case_eps: NonNegativeFloat
    seed: int

    def __post_init__(self) -> None:
        if self.r_max < max(self.multipliers):
            raise ValueError("r_max", f"must be >= the largest multiplier {max(self.multipliers)} (fixed-r at R = m t); got {self.r_max}")


def compare(params: CompareParams) -> dict[str, object]:
    """Per replicate seed: a fresh Gaussian mixture and a fresh random subset of load_digits, each completed at every
    (t, noise) by opt, fixed-r (r = 1..r_max) and greedy-B / dp-B (R = m t); plus the factor-2 worst case."""
    from paperdag.methods.mfc.replicates import clusters, compare_cell, worst_case, worst_case_points

    p = params
    digits = _load_digits() if "digits" in p.families else None
    jobs = [(s, f, lab, noise) for s in range(p.replicates) for f in p.families for lab in p.t_labels for noise in p.noises]
    rows, spaces = [], {}
    for seed, family, label, noise in track(jobs, description="mfc compare: replicates"):
        key = (seed, family)
        if key not in spaces:
            rng_seed = p.seed + 7919 * seed
            points = (gaussian_mixture(p.gaussian_n, p.gaussian_dim, p.gaussian_components, p.gaussian_separation, rng_seed)
                      if family == "gaussian" else
                      digits[np.random.default_rng(rng_seed).choice(len(digits), min(p.digits_n, len(digits)), replace=False)])
            space = EuclideanSpace(points)
            with threadpool_limits(limits=BLAS_THREADS):
                spaces = {key: (space, exact_mst(space))}  # the exact MST once per point set: gamma per cell
        space, mst = spaces[key]
        with threadpool_limits(limits=BLAS_THREADS):
            cell = compare_cell(space, clusters(len(space), label), noise, p.seed + seed, p.multipliers, p.r_max,
                                p.max_reps_per_component, mst=mst)
        rows += [{"family": family, "seed": seed, "t_label": label, "noise": noise, "n": len(space), **r} for r in cell]
    worst = EuclideanSpace(worst_case_points(p.worst_case_t, p.worst_case_eps))
    rows += [{"family": "worst", "seed": 0, "t_label": "pairs", "noise": 0.0, "n": len(worst), **r}
             for r in worst_case(worst, p.worst_case_t)]
    return {"compare": pl.DataFrame(rows)}


# ---------------------------------------------------------------- evaluate: exact reference, bounds, headline


@dataclass(frozen=True)
class EvaluateParams:
    headline_instance: Instance
    replicated_method: Literal["greedy-B", "dp-B"]
    exact_dense_max_n: PositiveInt


def evaluate(params: EvaluateParams, points: pl.DataFrame, forest: pl.DataFrame, forest_stats: dict[str, dict[str, float]],
             results: pl.DataFrame, compare: pl.DataFrame) -> dict[str, object]:
    """Exact MST per instance (timed, counted), then cost / MST, cost / optimal completion, calls / n^2, bounds;
    one table row per (instance, variant, budget), exact MST last in each instance; the replicated comparison and
    the worst case from compare's rows."""
    from paperdag.methods.mfc.evaluation import headline, instance_table
    from paperdag.methods.mfc.figures import replicated as replicated_figure
    from paperdag.methods.mfc.figures import tradeoff
    from paperdag.methods.mfc.replicates import summary, worst_case_summary

    reference, table = {}, []
    for name, rows in track(tables.instances(points), description="mfc evaluate: exact MST"):
        space, counter = tables.space(rows).counting()
        with threadpool_limits(limits=BLAS_THREADS):
            start = time.perf_counter()
            mst_edges, mst_weights = exact_mst(space, dense_below=params.exact_dense_max_n)
            runtime = time.perf_counter() - start
        labels, stats = tables.labels_of(name, forest), forest_stats[name]
        gamma = gamma_weight_ratio(labels, stats["cost"], mst_edges, mst_weights)
        pieces = gamma_overlap(labels, mst_edges)
        mst = {"n": len(space), "mst_cost": float(mst_weights.sum()), "calls": counter.calls, "runtime_s": runtime, "gamma": gamma,
               "gamma_pieces": pieces, "noise": stats["noise"]}
        reference[name] = mst
        instance = {"instance": name, "metric": rows["metric"][0], "n": len(space), "t": stats["t"], "noise": stats["noise"],
                    "gamma": gamma, "gamma_pieces": pieces}
        table += instance_table(instance, results.filter(pl.col("instance") == name).to_dicts(), stats, mst)
    rows = compare.to_dicts()
    replicated = summary([r for r in rows if r["family"] != "worst"], method=params.replicated_method)
    worst = worst_case_summary([r for r in rows if r["family"] == "worst"])
    top = headline(table, params.headline_instance)
    top |= {"replicates": replicated["replicates"], "replicated_minus_fixed_r": replicated["minus_fixed_r_at_equal_calls"],
            "replicated_minus_simple": replicated["minus_simple"], "worst_case_simple_cost_ratio_opt": worst["simple_cost_ratio_opt"]}
    metrics = {"headline": top, "table": table, "reference": reference, "replicated": replicated, "worst_case": worst}
    return {"metrics": metrics, "tradeoff": tradeoff(table), "replicated": replicated_figure(rows)}

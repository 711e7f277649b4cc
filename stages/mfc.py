"""Glue between the paperdag engine and the mfc method: synthesize -> train -> infer -> evaluate.

The method lives in paperdag.methods.mfc (its points tables, sweep and evaluation included); these functions read the
tables, call it per instance with one BLAS thread and a timer, and return its tables.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import polars as pl
from pydantic import AfterValidator, Field, NonNegativeFloat, NonNegativeInt, PositiveInt
from rich.progress import track
from threadpoolctl import threadpool_limits

from paperdag.engine.params import Fraction
from paperdag.methods.mfc import VARIANTS, tables
from paperdag.methods.mfc.forest import trained_forest
from paperdag.methods.mfc.instances import digits, point_table
from paperdag.points import points_path, read_points

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
    frames = [point_table(name, p, p.seed + 1000 * offset) for offset, name in enumerate(p.instances)]
    if p.points_file:
        frames.append(tables.file_table(read_points(p.points_file, "params.yaml mfc.synthesize.points_file")[0], p.points_metric))
    return {"points": tables.points_table(frames)}


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
        with threadpool_limits(limits=BLAS_THREADS):
            forest, stats[name] = trained_forest(tables.space(rows), params.points_per_cluster,
                                                 params.noise_per_instance.get(name, params.noise), params.seed)
        forest_labels, forest_edges = tables.forest_tables(name, forest)
        labels.append(forest_labels)
        edges.append(forest_edges)
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
    from paperdag.methods.mfc.sweep import sweep

    p = params
    with threadpool_limits(limits=BLAS_THREADS):
        results, completions = sweep(points, forest, forest_edges, p.variants, p.reps_per_component, p.r_sweep,
                                     p.extra_reps_per_cluster, p.budget_sweep, p.max_reps_per_component,
                                     progress=lambda jobs: track(jobs, description="mfc infer: completions"))
    return {"results": results, "completions": completions}


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
    from paperdag.methods.mfc.replicates import replicated_rows, worst_case_rows

    p = params
    with threadpool_limits(limits=BLAS_THREADS):
        rows = replicated_rows(p.seed, p.replicates, p.families, p.t_labels, p.noises, p.multipliers, p.r_max,
                               p.max_reps_per_component, (p.gaussian_n, p.gaussian_dim, p.gaussian_components, p.gaussian_separation),
                               digits() if "digits" in p.families else None, p.digits_n,
                               progress=lambda jobs: track(jobs, description="mfc compare: replicates"))
    return {"compare": pl.DataFrame(rows + worst_case_rows(p.worst_case_t, p.worst_case_eps))}


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
    from paperdag.methods.mfc import evaluation, figures

    with threadpool_limits(limits=BLAS_THREADS):
        reference, table = evaluation.exact_references(points, forest, forest_stats, results, params.exact_dense_max_n,
                                                       progress=lambda jobs: track(jobs, description="mfc evaluate: exact MST"))
    rows = compare.to_dicts()
    metrics = evaluation.metrics(table, reference, rows, params.headline_instance, params.replicated_method)
    return {"metrics": metrics, "tradeoff": figures.tradeoff(table), "replicated": figures.replicated(rows)}

"""Glue between the paperdag engine and the mfc method: synthesize -> train -> infer -> evaluate.

The method lives in paperdag.methods.mfc; these functions only turn tables into metric spaces and back.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from pydantic import NonNegativeFloat, NonNegativeInt, PositiveInt
from rich.progress import track
from threadpoolctl import threadpool_limits

from paperdag.engine.params import Fraction
from paperdag.methods.mfc import (
    VARIANTS,
    EditSpace,
    EuclideanSpace,
    HammingSpace,
    JaccardSpace,
    LearnedForest,
    MetricSpace,
    bit_strings,
    complete_forest,
    edited_strings,
    exact_mst,
    gamma_overlap,
    gaussian_mixture,
    is_spanning_tree,
    item_sets,
    learned_forest,
    mst_bound,
    uniform_cube,
)

INSTANCES = ("gaussian", "gaussian_noisy", "uniform", "hamming", "jaccard", "edit", "digits")
BUDGETED = ("greedy-B", "dp-B")  # the variants spending a budget B of extra representatives
# Every timed computation (forest, completions, exact Prim) runs with one BLAS thread: on a small shared machine,
# BLAS threads oversubscribe the cores and make wall times noisy by several x, unevenly across methods.
BLAS_THREADS = 1
_POINT_SCHEMA = {
    "instance": pl.String,
    "metric": pl.String,
    "vector": pl.List(pl.Float64),  # euclidean points
    "items": pl.List(pl.Int64),  # hamming bits (0/1) or jaccard set items
    "text": pl.String,  # edit-distance strings
}


# ---------------------------------------------------------------- synthesize


@dataclass(frozen=True)
class SynthesizeParams:
    instances: list[str]
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
    points_file: str
    points_metric: str
    seed: int


def synthesize(params: SynthesizeParams) -> dict[str, object]:
    """Point sets in every metric (plus load_digits and an optional user file), one row per point."""
    unknown = sorted(set(params.instances) - set(INSTANCES))
    if unknown:
        raise ValueError(f"params.yaml mfc.synthesize.instances: unknown {unknown}; choose from {INSTANCES}")
    p, frames = params, []
    for offset, name in enumerate(p.instances):
        seed = p.seed + 1000 * offset
        if name == "gaussian":
            frames.append(_vectors(name, gaussian_mixture(p.gaussian_n, p.gaussian_dim, p.gaussian_components, p.gaussian_separation, seed)))
        elif name == "gaussian_noisy":  # the headline family at smaller n; train gives it a noisy forest
            frames.append(
                _vectors(name, gaussian_mixture(p.gaussian_noisy_n, p.gaussian_dim, p.gaussian_components, p.gaussian_separation, seed))
            )
        elif name == "uniform":
            frames.append(_vectors(name, uniform_cube(p.uniform_n, p.uniform_dim, seed)))
        elif name == "hamming":
            bits = bit_strings(p.hamming_n, p.hamming_bits, p.hamming_components, p.hamming_flip, seed)
            frames.append(_items(name, "hamming", [row.tolist() for row in bits]))
        elif name == "jaccard":
            sets = item_sets(p.jaccard_n, p.jaccard_vocabulary, p.jaccard_components, p.jaccard_set_size, seed)
            frames.append(_items(name, "jaccard", sets))
        elif name == "edit":
            strings = edited_strings(p.edit_n, p.edit_length, p.edit_components, p.edit_max_edits, seed)
            frames.append(pl.DataFrame({"instance": name, "metric": "edit", "text": strings}))
        elif name == "digits":
            from sklearn.datasets import load_digits

            frames.append(_vectors(name, load_digits().data.astype(np.float64)))  # (1797, 64), ships offline
    if p.points_file:
        frames.append(_read_points_file(p.points_file, p.points_metric))
    table = pl.concat([f.with_columns(_missing_columns(f)).select(_POINT_SCHEMA.keys()) for f in frames], how="vertical")
    return {"points": table.cast(_POINT_SCHEMA)}


def _vectors(instance: str, points: np.ndarray) -> pl.DataFrame:
    return pl.DataFrame({"instance": instance, "metric": "euclidean", "vector": points.tolist()})


def _items(instance: str, metric: str, items: list[list[int]]) -> pl.DataFrame:
    return pl.DataFrame({"instance": instance, "metric": metric, "items": items}, schema_overrides={"items": pl.List(pl.Int64)})


def _missing_columns(frame: pl.DataFrame) -> list[pl.Expr]:
    return [pl.lit(None, dtype=dtype).alias(name) for name, dtype in _POINT_SCHEMA.items() if name not in frame.columns]


def _read_points_file(path: str, metric: str) -> pl.DataFrame:
    """A user's points: .npy (n, d) or Parquet (a list column `vector`, or only numeric columns), as instance 'file'."""
    source = Path(path)
    if not source.exists():
        raise FileNotFoundError(f"params.yaml mfc.synthesize.points_file: {path} does not exist (use \"\" for none)")
    if metric not in ("euclidean", "hamming"):
        raise ValueError(f"params.yaml mfc.synthesize.points_metric: {metric!r}; choose euclidean or hamming")
    if source.suffix == ".npy":
        points = np.load(source)
    elif source.suffix == ".parquet":
        table = pl.read_parquet(source)
        points = np.array(table["vector"].to_list()) if "vector" in table.columns else table.to_numpy()
    else:
        raise ValueError(f"params.yaml mfc.synthesize.points_file: {path} must end in .npy or .parquet")
    if points.ndim != 2:
        raise ValueError(f"{path}: expected a 2-D array of points, got shape {points.shape}")
    if metric == "hamming":
        return _items("file", "hamming", points.astype(np.int64).tolist())
    return _vectors("file", points.astype(np.float64))


def _space(points: pl.DataFrame) -> MetricSpace:
    """The metric space of one instance's rows."""
    metric = points["metric"][0]
    if metric == "euclidean":
        return EuclideanSpace(np.array(points["vector"].to_list(), dtype=np.float64))
    if metric == "hamming":
        return HammingSpace(np.array(points["items"].to_list(), dtype=np.uint8))
    if metric == "jaccard":
        return JaccardSpace.from_sets(points["items"].to_list())
    if metric == "edit":
        return EditSpace(points["text"].to_list())
    raise ValueError(f"points table: unknown metric {metric!r}")


def _instances(points: pl.DataFrame) -> list[tuple[str, pl.DataFrame]]:
    names = points["instance"].unique(maintain_order=True).to_list()
    return [(name, points.filter(pl.col("instance") == name)) for name in names]


# ---------------------------------------------------------------- train: the learned forest


@dataclass(frozen=True)
class TrainParams:
    points_per_cluster: PositiveInt
    noise: Fraction
    noise_per_instance: dict[str, Fraction]
    seed: int


def train(params: TrainParams, points: pl.DataFrame) -> dict[str, object]:
    """F_t per instance: k-center into t = ceil(n / points_per_cluster) clusters (a fraction `noise` of points then
    moved to random clusters), an exact MST in each."""
    unknown = sorted(set(params.noise_per_instance) - {*INSTANCES, "file"})
    if unknown:
        raise ValueError(f"params.yaml mfc.train.noise_per_instance: unknown instances {unknown}; choose from {INSTANCES + ('file',)}")
    labels, edges, stats = [], [], {}
    for name, rows in track(_instances(points), description="mfc train: learned forests"):
        space, counter = _space(rows).counting()
        n = len(space)
        t = max(2, math.ceil(n / params.points_per_cluster))
        noise = params.noise_per_instance.get(name, params.noise)
        with threadpool_limits(limits=BLAS_THREADS):
            start = time.perf_counter()
            forest = learned_forest(space, t, noise=noise, seed=params.seed)
            runtime = time.perf_counter() - start
        labels.append(pl.DataFrame({"instance": name, "point": np.arange(n), "component": forest.labels}))
        edges.append(
            pl.DataFrame({"instance": name, "u": forest.edges[:, 0], "v": forest.edges[:, 1], "weight": forest.weights})
        )
        stats[name] = {"n": n, "t": forest.t, "noise": noise, "cost": forest.cost, "calls": counter.calls, "runtime_s": runtime}
    return {"forest": pl.concat(labels), "forest_edges": pl.concat(edges), "forest_stats": stats}


def _forest(name: str, forest: pl.DataFrame, forest_edges: pl.DataFrame) -> LearnedForest:
    labels = forest.filter(pl.col("instance") == name).sort("point")["component"].to_numpy()
    e = forest_edges.filter(pl.col("instance") == name)
    return LearnedForest(
        labels=labels.astype(np.int64),
        edges=np.stack([e["u"].to_numpy(), e["v"].to_numpy()], axis=1).astype(np.int64),
        weights=e["weight"].to_numpy().astype(np.float64),
    )


# ---------------------------------------------------------------- infer: every completion variant, swept over its budget


@dataclass(frozen=True)
class InferParams:
    variants: list[str]
    reps_per_component: PositiveInt
    extra_reps_per_cluster: NonNegativeInt
    max_reps_per_component: PositiveInt
    r_sweep: list[PositiveInt]
    budget_sweep: list[NonNegativeInt]


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


def settings(params: InferParams, variant: str) -> list[Setting]:
    """The sweep of one variant, always including the default budget."""
    if variant == "fixed-r":
        values = sorted({*params.r_sweep, params.reps_per_component})
        return [Setting(r=r, default=r == params.reps_per_component) for r in values]
    if variant in BUDGETED:
        values = sorted({*params.budget_sweep, params.extra_reps_per_cluster})
        return [Setting(extra_reps_per_cluster=e, default=e == params.extra_reps_per_cluster) for e in values]
    return [Setting()]


def _check_infer_params(params: InferParams) -> None:
    unknown = sorted(set(params.variants) - set(VARIANTS))
    if unknown:
        raise ValueError(f"params.yaml mfc.infer.variants: unknown {unknown}; choose from {VARIANTS}")
    if params.reps_per_component < 1 or any(r < 1 for r in params.r_sweep):
        raise ValueError("params.yaml mfc.infer.reps_per_component / r_sweep: every r must be >= 1 (one rep per component at least)")
    if params.extra_reps_per_cluster < 0 or any(e < 0 for e in params.budget_sweep):
        raise ValueError("params.yaml mfc.infer.extra_reps_per_cluster / budget_sweep: every B / t must be >= 0")


def infer(params: InferParams, points: pl.DataFrame, forest: pl.DataFrame, forest_edges: pl.DataFrame) -> dict[str, object]:
    """Complete each learned forest with each variant at each budget of its sweep; count calls, time each, keep the edges."""
    _check_infer_params(params)
    records, added = [], []
    jobs = [(name, rows, v, s) for name, rows in _instances(points) for v in params.variants for s in settings(params, v)]
    spaces: dict[str, tuple[MetricSpace, LearnedForest]] = {}
    for name, rows, variant, setting in track(jobs, description="mfc infer: completions"):
        if name not in spaces:
            spaces = {name: (_space(rows), _forest(name, forest, forest_edges))}
        space, learned = spaces[name]
        counted, counter = space.counting()
        budget = (setting.extra_reps_per_cluster or 0) * learned.t  # B
        with threadpool_limits(limits=BLAS_THREADS):
            start = time.perf_counter()
            completion = complete_forest(
                counted,
                learned,
                variant,
                r=setting.r or 1,
                budget=budget,
                max_reps_per_component=params.max_reps_per_component,
            )
            runtime = time.perf_counter() - start
        tree = np.concatenate([learned.edges, completion.edges])
        records.append(
            {
                "instance": name,
                "metric": rows["metric"][0],
                "n": len(space),
                "t": learned.t,
                "variant": variant,
                "r": setting.r,
                "extra_reps_per_cluster": setting.extra_reps_per_cluster,
                "default_budget": setting.default,
                "budget": budget,
                "reps": completion.total_reps,
                "radius_sum": completion.radius_sum,
                "forest_cost": learned.cost,
                "completion_cost": completion.cost,
                "tree_cost": learned.cost + completion.cost,
                "selection_calls": completion.selection_calls,
                "candidate_calls": completion.candidate_calls,
                "calls": counter.calls,
                "runtime_s": runtime,
                "spanning": is_spanning_tree(len(space), tree),
            }
        )
        added.append(
            pl.DataFrame(
                {
                    "instance": name,
                    "variant": variant,
                    "r": setting.r,
                    "extra_reps_per_cluster": setting.extra_reps_per_cluster,
                    "u": completion.edges[:, 0],
                    "v": completion.edges[:, 1],
                    "weight": completion.weights,
                },
                schema_overrides=_SETTING_SCHEMA | {"u": pl.Int64, "v": pl.Int64, "weight": pl.Float64},
            )
        )
    return {
        "results": pl.DataFrame(records, schema_overrides=_SETTING_SCHEMA | {"radius_sum": pl.Float64}),
        "completions": pl.concat(added),
    }


_SETTING_SCHEMA = {"r": pl.Int64, "extra_reps_per_cluster": pl.Int64}  # null where the variant has no such knob


# ---------------------------------------------------------------- evaluate: exact reference, bounds, headline


@dataclass(frozen=True)
class EvaluateParams:
    headline_instance: str


def evaluate(
    params: EvaluateParams,
    points: pl.DataFrame,
    forest: pl.DataFrame,
    forest_stats: dict[str, dict[str, float]],
    results: pl.DataFrame,
) -> dict[str, object]:
    """Exact MST per instance (timed, counted), then cost / MST, cost / optimal completion, calls / n^2, bounds;
    one table row per (instance, variant, budget), exact MST last in each instance."""
    if "opt" not in results["variant"].to_list():
        raise ValueError("params.yaml mfc.infer.variants must include 'opt' (the optimal completion the bound is checked against)")
    reference, table = {}, []
    for name, rows in track(_instances(points), description="mfc evaluate: exact MST"):
        space, counter = _space(rows).counting()
        n = len(space)
        with threadpool_limits(limits=BLAS_THREADS):
            start = time.perf_counter()
            mst_edges, mst_weights = exact_mst(space)
            runtime = time.perf_counter() - start
        labels = forest.filter(pl.col("instance") == name).sort("point")["component"].to_numpy()
        gamma = gamma_overlap(labels, mst_edges)
        mst_cost = float(mst_weights.sum())
        stats = forest_stats[name]
        reference[name] = {"n": n, "mst_cost": mst_cost, "calls": counter.calls, "runtime_s": runtime, "gamma": gamma, "noise": stats["noise"]}
        mine = results.filter(pl.col("instance") == name)
        optimal = mine.filter(pl.col("variant") == "opt")["tree_cost"][0]
        instance = {"instance": name, "metric": rows["metric"][0], "n": n, "t": stats["t"], "noise": stats["noise"], "gamma": gamma}
        for row in mine.iter_rows(named=True):
            cost = row["tree_cost"]
            within = bool(row["spanning"]) and cost <= 2.0 * optimal * (1 + 1e-9) and cost <= mst_bound(gamma) * mst_cost * (1 + 1e-9)
            setting = Setting(r=row["r"], extra_reps_per_cluster=row["extra_reps_per_cluster"], default=row["default_budget"])
            table.append(
                {
                    **instance,
                    "variant": row["variant"],
                    "budget": setting.label,
                    "default_budget": setting.default,
                    "reps": row["reps"],
                    "cost_ratio_mst": cost / mst_cost,
                    "cost_ratio_opt_completion": cost / optimal,
                    "distance_call_fraction": row["calls"] / n**2,
                    "forest_distance_call_fraction": stats["calls"] / n**2,
                    "runtime_s": row["runtime_s"],
                    "speedup_vs_exact_completion_only": runtime / row["runtime_s"],
                    "speedup_vs_exact_with_forest": runtime / (row["runtime_s"] + stats["runtime_s"]),
                    "within_bound": within,
                }
            )
        table.append(
            {
                **instance,
                "variant": "exact-mst",
                "budget": "",
                "default_budget": True,
                "reps": n,
                "cost_ratio_mst": 1.0,
                "cost_ratio_opt_completion": mst_cost / optimal,
                "distance_call_fraction": counter.calls / n**2,
                "runtime_s": runtime,
                "within_bound": True,
            }
        )
    metrics = {"headline": _headline(params, table), "table": table, "reference": reference}
    return {"metrics": metrics, "tradeoff": _tradeoff_plot(table)}


def _headline(params: EvaluateParams, table: list[dict]) -> dict[str, object]:
    """The best budgeted variant (lowest cost ratio, then fewest calls) on the headline instance, at the default budget."""
    rows = [r for r in table if r["instance"] == params.headline_instance and r["variant"] in BUDGETED and r["default_budget"]]
    if not rows:
        raise ValueError(
            f"params.yaml mfc.evaluate.headline_instance: no {BUDGETED} rows for {params.headline_instance!r}; "
            "is it in mfc.synthesize.instances and are the budgeted variants in mfc.infer.variants?"
        )
    best = min(rows, key=lambda r: (round(r["cost_ratio_mst"], 12), r["distance_call_fraction"]))
    simple = next((r for r in table if r["instance"] == params.headline_instance and r["variant"] == "simple"), None)
    if simple is None:
        raise ValueError("params.yaml mfc.infer.variants: `simple` (the one-representative baseline) is required")
    return {
        "instance": params.headline_instance,
        "n": best["n"],
        "variant": best["variant"],
        "budget": best["budget"],
        "cost_ratio_mst": best["cost_ratio_mst"],
        "cost_ratio_simple": simple["cost_ratio_mst"],
        "cost_ratio_minus_simple": best["cost_ratio_mst"] - simple["cost_ratio_mst"],
        "cost_ratio_opt_completion": best["cost_ratio_opt_completion"],
        "distance_call_fraction": best["distance_call_fraction"],
        "forest_distance_call_fraction": best["forest_distance_call_fraction"],
        "speedup_vs_exact": best["speedup_vs_exact_completion_only"],
        "speedup_vs_exact_with_forest": best["speedup_vs_exact_with_forest"],
        "speedup_note": (
            "exact Prim wall time (evaluate stage) / completion wall time (infer stage), same pipeline run, one BLAS thread each; "
            "speedup_vs_exact counts the completion only (the forest is the learned input), "
            "speedup_vs_exact_with_forest adds the learned forest's own wall time (train stage)"
        ),
        "bound_violations": sum(not r["within_bound"] for r in table),
        "gamma": best["gamma"],
    }


_CURVES = {"fixed-r": ("tab:green", "s"), "greedy-B": ("tab:blue", "^"), "dp-B": ("tab:orange", "v")}
_REFERENCES = {"simple": ("black", "o"), "opt": ("tab:red", "D"), "exact-mst": ("tab:purple", "*")}


def _tradeoff_plot(table: list[dict]) -> Figure:
    """The trade-off curve per instance: tree cost / MST (left) and / optimal completion (right) against distance
    calls / n^2, one line per swept variant; simple, opt and exact MST as reference markers; default budgets ringed."""
    names = list(dict.fromkeys(r["instance"] for r in table))
    fig = Figure(figsize=(10, 2.7 * len(names) + 0.6), layout="constrained")
    axes = fig.subplots(len(names), 2, squeeze=False)
    ratios = (("cost_ratio_mst", "cost / MST"), ("cost_ratio_opt_completion", "cost / opt. completion"))
    for (left, right), name in zip(axes, names, strict=True):
        mine = [r for r in table if r["instance"] == name]
        first = mine[0]
        for ax, (key, ylabel) in zip((left, right), ratios, strict=True):
            for variant, (color, marker) in _CURVES.items():
                curve = sorted((r for r in mine if r["variant"] == variant), key=lambda r: r["distance_call_fraction"])
                if not curve:
                    continue
                xs, ys = [r["distance_call_fraction"] for r in curve], [r[key] for r in curve]
                ax.plot(xs, ys, color=color, marker=marker, markersize=4, linewidth=1.2, label=variant)
                for r in curve:
                    if r["default_budget"]:
                        ax.scatter(r["distance_call_fraction"], r[key], s=90, facecolors="none", edgecolors=color, linewidths=1.2)
            for variant, (color, marker) in _REFERENCES.items():
                for r in (r for r in mine if r["variant"] == variant):
                    ax.scatter(r["distance_call_fraction"], r[key], color=color, marker=marker, s=60 if marker == "*" else 30,
                               zorder=3, label=variant)
            ax.set_xscale("log")
            ax.set_ylabel(ylabel)
            ax.ticklabel_format(axis="y", useOffset=False)  # ratios read as 1.0008, not "+1" and 0.0008
            ax.grid(alpha=0.3, which="both")
        _zoom_past_exact(right, mine)
        noise = f", noise={first['noise']:g}" if first["noise"] else ""
        left.set_title(f"{name} (n={first['n']}, t={first['t']}, gamma={first['gamma']}{noise})", fontsize=10, loc="left")
    for ax in axes[-1]:
        ax.set_xlabel("distance calls / n^2")
    handles, labels = axes[0][0].get_legend_handles_labels()
    ring = Line2D([], [], linestyle="none", marker="o", markersize=9, markerfacecolor="none", markeredgecolor="gray")
    fig.legend([*handles, ring], [*labels, "default budget (headline)"], loc="outside upper center", ncols=7, fontsize=8)
    return fig


def _zoom_past_exact(ax: Axes, rows: list[dict]) -> None:
    """Fit the y axis to the completions (the exact MST is cheaper than any completion of a poor forest and would
    flatten the curves), pointing at the exact MST with an arrow when it falls below."""
    ys = [r["cost_ratio_opt_completion"] for r in rows if r["variant"] != "exact-mst"]
    exact = next(r for r in rows if r["variant"] == "exact-mst")
    low, high = min(ys), max(ys)
    pad = 0.08 * max(high - low, 1e-4)
    if exact["cost_ratio_opt_completion"] >= low - pad:
        return
    ax.set_ylim(low - 2 * pad, high + pad)
    x = exact["distance_call_fraction"]
    ax.annotate(
        f"exact MST {exact['cost_ratio_opt_completion']:.3f}",
        xy=(x, low - 2 * pad),
        xytext=(x, low + 0.25 * (high - low)),
        ha="right",
        fontsize=8,
        color=_REFERENCES["exact-mst"][0],
        arrowprops={"arrowstyle": "->", "color": _REFERENCES["exact-mst"][0]},
    )

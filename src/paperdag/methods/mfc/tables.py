"""The points table (one row per point, a column per kind of point) and the learned forest's tables, to metric
spaces and back."""

from __future__ import annotations

import numpy as np
import polars as pl

from paperdag.methods.mfc.forest import LearnedForest
from paperdag.methods.mfc.metrics import (
    EditSpace,
    EuclideanSpace,
    HammingSpace,
    JaccardSpace,
    MetricSpace,
)

POINT_SCHEMA = {
    "instance": pl.String,
    "metric": pl.String,
    "vector": pl.List(pl.Float64),  # euclidean points
    "items": pl.List(pl.Int64),  # hamming bits (0/1) or jaccard set items
    "text": pl.String,  # edit-distance strings
}


def vectors(instance: str, points: np.ndarray) -> pl.DataFrame:
    return pl.DataFrame({"instance": instance, "metric": "euclidean", "vector": points.tolist()})


def items(instance: str, metric: str, items: list[list[int]]) -> pl.DataFrame:
    return pl.DataFrame({"instance": instance, "metric": metric, "items": items}, schema_overrides={"items": pl.List(pl.Int64)})


def strings(instance: str, texts: list[str]) -> pl.DataFrame:
    return pl.DataFrame({"instance": instance, "metric": "edit", "text": texts})


def file_table(points: np.ndarray, metric: str) -> pl.DataFrame:
    """A user's points (points_file) as instance "file": hamming bits, or euclidean vectors."""
    if metric == "hamming":
        return items("file", "hamming", points.astype(np.int64).tolist())
    return vectors("file", points.astype(np.float64))


def points_table(frames: list[pl.DataFrame]) -> pl.DataFrame:
    """The instances' frames as one table of POINT_SCHEMA (null where a column is not the instance's kind)."""
    def missing(frame: pl.DataFrame) -> list[pl.Expr]:
        return [pl.lit(None, dtype=dtype).alias(name) for name, dtype in POINT_SCHEMA.items() if name not in frame.columns]

    table = pl.concat([f.with_columns(missing(f)).select(POINT_SCHEMA.keys()) for f in frames], how="vertical")
    return table.cast(POINT_SCHEMA)


def space(points: pl.DataFrame) -> MetricSpace:
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


def instances(points: pl.DataFrame) -> list[tuple[str, pl.DataFrame]]:
    """(name, rows) per instance, in table order."""
    names = points["instance"].unique(maintain_order=True).to_list()
    return [(name, points.filter(pl.col("instance") == name)) for name in names]


def forest_tables(name: str, forest: LearnedForest) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(labels, edges) rows of one instance's learned forest."""
    labels = pl.DataFrame({"instance": name, "point": np.arange(len(forest.labels)), "component": forest.labels})
    edges = pl.DataFrame({"instance": name, "u": forest.edges[:, 0], "v": forest.edges[:, 1], "weight": forest.weights})
    return labels, edges


def labels_of(name: str, forest: pl.DataFrame) -> np.ndarray:
    return forest.filter(pl.col("instance") == name).sort("point")["component"].to_numpy()


def read_forest(name: str, forest: pl.DataFrame, forest_edges: pl.DataFrame) -> LearnedForest:
    e = forest_edges.filter(pl.col("instance") == name)
    return LearnedForest(
        labels=labels_of(name, forest).astype(np.int64),
        edges=np.stack([e["u"].to_numpy(), e["v"].to_numpy()], axis=1).astype(np.int64),
        weights=e["weight"].to_numpy().astype(np.float64),
    )

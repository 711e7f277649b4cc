"""Point sets shared by the metric-space methods (mfc, welfare_nns): a Gaussian mixture, and a user's points file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

POINTS_SUFFIXES = (".npy", ".parquet")


def gaussian_mixture(n: int, dim: int, components: int, separation: float, seed: int) -> np.ndarray:
    """(n, dim) float64 points: k = `components` centres ~ N(0, separation^2 I), each point its centre + N(0, I)."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=separation, size=(components, dim))
    which = rng.integers(components, size=n)
    return centres[which] + rng.normal(size=(n, dim))


def points_path(path: str) -> str:
    """A points_file setting: "" (none) or a path ending in one of POINTS_SUFFIXES (a params field validator)."""
    if path and not path.endswith(POINTS_SUFFIXES):
        raise ValueError(f"{path} must end in {' or '.join(POINTS_SUFFIXES)} (or be \"\" for none)")
    return path


def read_points(path: str, key: str, min_points: int = 1) -> tuple[np.ndarray, np.ndarray | None]:
    """A user's points (n, d): .npy, or Parquet with a list column `vector` (or only numeric columns) and an optional
    integer column `attribute` (returned second, None when absent). `key` names the setting the path came from."""
    source = Path(path)
    if not source.exists():
        raise FileNotFoundError(f"{key}: {path} does not exist (use \"\" for none)")
    if source.suffix == ".npy":
        points, labels = np.load(source, allow_pickle=False), None
    elif source.suffix == ".parquet":
        table = pl.read_parquet(source)
        labels = table["attribute"].to_numpy().astype(np.int64) if "attribute" in table.columns else None
        table = table.drop("attribute", strict=False)
        points = np.array(table["vector"].to_list()) if "vector" in table.columns else table.to_numpy()
    else:
        raise ValueError(f"{key}: {path} must end in {' or '.join(POINTS_SUFFIXES)}")
    if points.ndim != 2 or len(points) < min_points:
        raise ValueError(f"{path}: expected a 2-D array of at least {min_points} points, got shape {points.shape}")
    if labels is not None and len(labels) and labels.min() < 0:
        raise ValueError(f"{path}: column `attribute` must hold non-negative integers")
    return points, labels

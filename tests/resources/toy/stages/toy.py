"""Glue of the toy pipeline: a diamond make -> (left, right) -> combine."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
from pydantic import PositiveInt

from toy_method import spin


@dataclass(frozen=True)
class MakeParams:
    n: PositiveInt
    extra_rows: str
    seed: int


@dataclass(frozen=True)
class WorkParams:
    seconds: float
    wait: float


@dataclass(frozen=True)
class CombineParams:
    scale: float
    fail: bool


def make(params: MakeParams) -> dict:
    rng = np.random.default_rng(params.seed)
    table = pl.DataFrame({"x": rng.normal(size=params.n)})
    if params.extra_rows:
        table = pl.concat([table, pl.read_parquet(params.extra_rows).select(pl.col("x").cast(pl.Float64))])
    return {"table": table}


def square(params: WorkParams, table: pl.DataFrame) -> dict:
    spin(params.seconds)
    time.sleep(params.wait)
    return {"values": table["x"].to_numpy() ** 2}


def cube(params: WorkParams, table: pl.DataFrame) -> dict:
    spin(params.seconds)
    time.sleep(params.wait)
    return {"values": {"cube": table["x"].to_numpy() ** 3}}


def combine(params: CombineParams, left: np.ndarray, right: dict) -> dict:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if params.fail:
        raise RuntimeError("combine was told to fail")
    total = float(params.scale * (left.sum() + right["cube"].sum()))

    def write_model(path: Path) -> None:
        (path / "weights.txt").write_text(f"{total:.6f}\n")
        if os.environ.get("TOY_SLOW_WRITE"):  # lets a test kill the stage mid-write
            (path / "config.txt").write_text("to")
            time.sleep(60)
        (path / "config.txt").write_text("toy\n")

    fig, ax = plt.subplots()
    ax.plot(np.sort(left))
    return {
        "model": write_model,
        "metrics": {"headline": {"total": total, "seconds": time.perf_counter() % 1}, "n": int(left.size)},
        "curve": fig,
    }

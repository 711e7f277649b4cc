"""Params are checked when the project loads, not when a stage runs: a value a stage's params type refuses (a
choice not in its Literal, a bound, a check across fields) is an error naming its params.yaml key from
paperdag.engine.runner.check_params, as `paperdag render --check` and every command acting on params call it."""

from __future__ import annotations

import re

import pytest
from support import REPO

from paperdag.engine.errors import SpecError
from paperdag.engine.params import load_params, lookup
from paperdag.engine.runner import check_params
from paperdag.engine.spec import load_project

PIPELINES = ["mfc", "welfare_nns", "milco", "rap"]

# (pipeline, params.yaml key, a value its stage refuses, the key the error names)
BAD = [
    ("mfc", "mfc.synthesize.instances", ["gaussian", "gausian"], "mfc.synthesize.instances"),
    ("mfc", "mfc.synthesize.points_metric", "cosine", "mfc.synthesize.points_metric"),
    ("mfc", "mfc.synthesize.points_file", "points.csv", "mfc.synthesize.points_file"),
    ("mfc", "mfc.train.noise_per_instance", {"gausian": 0.1}, "mfc.train.noise_per_instance"),
    ("mfc", "mfc.infer.variants", ["simple", "greedy-B"], "mfc.infer.variants"),  # no opt: the bound's reference
    ("mfc", "mfc.infer.variants", ["simple", "opt", "greedy"], "mfc.infer.variants"),
    ("mfc", "mfc.evaluate.headline_instance", "gausian", "mfc.evaluate.headline_instance"),
    ("mfc", "mfc.compare.r_max", 4, "mfc.compare.r_max"),  # below the largest R / t multiplier (8)
    ("mfc", "mfc.compare.replicates", 1, "mfc.compare.replicates"),  # no interval from one seed
    ("welfare_nns", "welfare_nns.synthesize.datasets", ["gauss", "sift"], "welfare_nns.synthesize.datasets"),
    ("welfare_nns", "welfare_nns.synthesize.points_file", "points.csv", "welfare_nns.synthesize.points_file"),
    ("welfare_nns", "welfare_nns.infer.eta", 0.123, "welfare_nns.infer.eta"),  # not in eta_sweep
    ("milco", "milco.index.rhos", [0.5, 0.25], "milco.index.rhos"),  # 1.0 (no pruning) missing
    ("milco", "milco.index.rhos", [1.0, 1.5], "milco.index.rhos"),
    ("rap", "rap.synthesize.waypoint_interval", 0.55, "rap.synthesize.waypoint_interval"),  # not a multiple of dt
    ("rap", "rap.augment.dt", 0.3, "rap.augment.waypoint_interval"),
    ("rap", "rap.arms.raster.sources", ["real_log", "lidar"], "rap.arms.raster.sources"),
    ("rap", "rap.arms.raster.sources", [], "rap.arms.raster.sources"),
]


def test_the_project_params_pass() -> None:
    """params.yaml as committed passes every check of these pipelines (so each refusal below is the bad value's)."""
    params = load_params(REPO)
    check_params(load_project(REPO, params), params, PIPELINES)


@pytest.mark.parametrize(("pipeline", "key", "value", "named"), BAD, ids=[f"{k}={v}" for _, k, v, _ in BAD])
def test_a_refused_value_names_its_key(pipeline: str, key: str, value: object, named: str) -> None:
    """The bad value is refused at load, by a SpecError on params.yaml naming the key at fault."""
    params = load_params(REPO)
    parent, _, last = key.rpartition(".")
    lookup(params, parent)[last] = value
    with pytest.raises(SpecError, match=rf"params\.yaml: {re.escape(named)}\b"):
        check_params(load_project(REPO, params), params, [pipeline])

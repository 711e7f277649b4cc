"""Portable numerics: the same training stage gives the same bits whatever kernel level or thread count the caller's
environment asks for; native numerics let the machine decide, and the bits follow it."""

from __future__ import annotations

from pathlib import Path

import pytest

from paperdag.engine import numerics
from paperdag.engine.errors import SpecError
from paperdag.engine.fsutil import dvc_md5
from paperdag.engine.params import set_params
from support import cli, make_repo

WEIGHTS = "data/fit/weights.safetensors"


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_repo(tmp_path_factory.mktemp("numerics") / "repo", "fit")


def _train(repo: Path, **env: str) -> str:
    """md5 of the weights one `paperdag stage fit:train` writes under the caller's environment `env`."""
    cli(repo, "stage", "fit:train", env={"PAPERDAG_QUIET": "1", **env})
    return dvc_md5(repo / WEIGHTS)


# the caller's environment of two machines that differ in CPU kernel level and thread count
MACHINE_A = {"ATEN_CPU_CAPABILITY": "avx2", "OMP_NUM_THREADS": "2", "MKL_CBWR": "AUTO"}
MACHINE_B = {"ATEN_CPU_CAPABILITY": "default", "OMP_NUM_THREADS": "1"}


@pytest.fixture(scope="module")
def weights(repo: Path) -> dict[str, str]:
    """md5 of the weights trained under each (numerics setting, caller's environment); the last run is portable
    with 2 threads."""
    out = {}
    set_params(repo, ["base.numerics.mode=native"])
    out["native A"], out["native B"] = _train(repo, **MACHINE_A), _train(repo, **MACHINE_B)
    set_params(repo, ["base.numerics.mode=portable"])
    out["portable A"], out["portable B"] = _train(repo, **MACHINE_A), _train(repo, **MACHINE_B)
    set_params(repo, ["base.numerics.threads=2"])
    out["portable, 2 threads"] = _train(repo, OMP_NUM_THREADS="1")
    return out


def test_native_bits_follow_the_machine_portable_bits_do_not(weights: dict[str, str]) -> None:
    """Under `native`, two runs that differ only in the caller's kernel level and thread count give different
    weights; under `portable` the same two runs give identical weights (the engine forces both)."""
    assert weights["native A"] != weights["native B"], "native numerics did not follow the caller's environment"
    assert weights["portable A"] == weights["portable B"]
    assert weights["portable A"] not in (weights["native A"], weights["native B"])  # its own kernel level


def test_thread_count_is_a_param_and_changes_the_bits(weights: dict[str, str]) -> None:
    """threads decides the bits too: 2 threads train other weights than 1, whatever OMP_NUM_THREADS the caller
    exported (the portable runs above exported 2 and 1 and got the 1-thread weights)."""
    assert weights["portable, 2 threads"] != weights["portable A"]


def test_the_run_records_the_numerics(repo: Path, weights: dict[str, str]) -> None:
    """The MLflow run carries the mode, every variable set, and the kernel level and threads torch actually used."""
    from paperdag.engine.tracking import client as mlflow_client

    client = mlflow_client(repo)  # after the stages' run records are in MLflow
    run = client.search_runs([client.get_experiment_by_name("fit").experiment_id], order_by=["start_time DESC"])[0]
    tags = run.data.tags
    assert tags["numerics.mode"] == "portable"
    assert tags["numerics.env.ATEN_CPU_CAPABILITY"] == "default"
    assert tags["numerics.torch_cpu_capability"] == "DEFAULT"
    assert tags["numerics.env.MKL_CBWR"] == "COMPATIBLE"
    assert tags["numerics.torch_threads"] == "2"


def test_dvc_yaml_tracks_the_numerics_for_every_stage(repo: Path) -> None:
    import yaml

    from paperdag.engine.render import generated_files

    stages = {n: s for f in generated_files(repo) for n, s in yaml.safe_load((repo / f).read_text())["stages"].items()}
    assert stages and all(numerics.KEY in s["params"] for s in stages.values())


@pytest.mark.parametrize(
    ("doc", "key"),
    [
        ({"mode": "fast"}, "base.numerics.mode"),
        ({"threads": 0}, "base.numerics.threads"),
        ({"threads": "2"}, "base.numerics.threads"),
        ({"isa": "avx"}, "base.numerics.isa"),
    ],
)
def test_bad_numerics_name_the_key(doc: dict, key: str) -> None:
    good = {"mode": "portable", "threads": 1, "aten_cpu_capability": "default", "mkl_cbwr": "COMPATIBLE",
            "onednn_max_cpu_isa": "SSE41", "openblas_coretype": "Prescott", "numpy_simd": "baseline"}
    with pytest.raises(SpecError, match=key.replace(".", r"\.")):
        numerics.from_params({"base": {"seed": 1, "numerics": {**good, **doc}}})


def test_missing_numerics_is_a_spec_error() -> None:
    with pytest.raises(SpecError, match=r"base\.numerics"):
        numerics.from_params({"base": {"seed": 1}})

"""`paperdag verify --against-lock`: what a fresh clone on another machine checks. It holds no data and no DVC cache,
only dvc.lock's md5s and paperdag.lock's md5s of outputs without their volatile values."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from paperdag.engine import stable
from support import cli, git, lock_file_of


@pytest.fixture
def clone(built_toy: Path, tmp_path: Path) -> Path:
    """A fresh `git clone` of the built toy repo after its dvc.lock and paperdag.lock were committed."""
    git(built_toy, "add", "dvc.lock", "pipelines/toy/dvc.lock", stable.LOCK_FILE)
    git(built_toy, "commit", "-qm", "lock")
    dest = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(built_toy), str(dest)], check=True)
    assert not (dest / "data").exists()
    return dest


def test_a_fresh_clone_reproduces_the_lock_and_reports_what_differs(clone: Path) -> None:
    """Every output is rebuilt from nothing and equals dvc.lock's md5, except the metrics file whose wall time is
    declared volatile: it equals the locked version without it (paperdag.lock). An output whose locked md5 was
    tampered with (dvc.lock's md5 of right.safetensors) is reported and verify exits 1. (One rerun of the 4
    stages serves both checks.)"""
    lock = lock_file_of(clone, "toy-right")
    doc = yaml.safe_load(lock.read_text())
    doc["stages"]["toy-right"]["outs"][0]["md5"] = "0" * 32
    lock.write_text(yaml.safe_dump(doc, sort_keys=False))
    r = cli(clone, "verify", "--against-lock", "toy", "--json", check=False)
    assert r.returncode == 1
    how = {x["path"]: (x["reproduced"], x["how"]) for x in json.loads(r.stdout)}
    assert len(how) == 6
    assert how["data/toy/right.safetensors"] == (False, "differs from dvc.lock")
    assert how["data/toy/metrics.json"] == (True, "identical to dvc.lock's version except its volatile values")
    untouched = {p: h for p, h in how.items() if p not in ("data/toy/right.safetensors", "data/toy/metrics.json")}
    assert set(untouched.values()) == {(True, "bit-identical to dvc.lock")}


def test_the_stable_md5_leaves_out_exactly_the_volatile_values(clone: Path) -> None:
    """Two metrics files that differ only in the declared-volatile wall time have one stable md5 (what
    paperdag.lock records, and how an untampered rerun of the metrics matches the lock); any other difference
    changes it."""
    from paperdag.engine.spec import load_project

    stage = load_project(clone).stage("toy:combine")
    a = stage.outputs["metrics"]
    first, second = clone / "m1.json", clone / "m2.json"
    first.write_text(json.dumps({"headline": {"total": 1.5, "seconds": 0.1}, "n": 50}))
    second.write_text(json.dumps({"headline": {"total": 1.5, "seconds": 0.7}, "n": 50}))
    assert stable.digest(a, first, stage.volatile) == stable.digest(a, second, stage.volatile)
    second.write_text(json.dumps({"headline": {"total": 1.6, "seconds": 0.7}, "n": 50}))
    assert stable.digest(a, first, stage.volatile) != stable.digest(a, second, stage.volatile)


def test_a_stale_lock_is_refused_naming_the_stage_and_param(clone: Path) -> None:
    p = clone / "params.yaml"
    p.write_text(p.read_text().replace("n: 50", "n: 60"))
    r = cli(clone, "verify", "--against-lock", "toy:left", check=False)
    assert r.returncode == 2 and "toy-make" in r.stderr and "toy.make" in r.stderr


def test_one_stage_reuses_inputs_held_at_their_locked_md5(built_toy: Path) -> None:
    """In the built workspace the inputs are there at their locked md5: only the stage itself reruns."""
    results = json.loads(cli(built_toy, "verify", "--against-lock", "toy:combine", "--json").stdout)
    assert {r["stage"] for r in results} == {"toy:combine"} and all(r["reproduced"] for r in results)


def test_it_says_on_which_machine_each_output_was_recorded(clone: Path) -> None:
    """paperdag.lock names the machine every stage execution ran on (keyed by the outputs it wrote); verify
    --against-lock reports, per output, whether it was recorded here or on another CPU. The lock is edited so that
    toy:combine's outputs were made on another machine: those rows say so and name it, the rest say this one."""
    doc = yaml.safe_load((clone / stable.LOCK_FILE).read_text())
    assert set(doc["made_on"]) == {"toy:make", "toy:left", "toy:right", "toy:combine"}
    here = next(iter(doc["machines"]))
    assert set(doc["machines"]) == {here} and doc["machines"][here]["cpu"]
    [key] = doc["made_on"]["toy:combine"]
    doc["made_on"]["toy:combine"][key] = "0123456789ab"
    doc["machines"]["0123456789ab"] = {"cpu": "Intel Xeon Gold", "vendor": "GenuineIntel", "family_model_stepping": "6/143/8",
                                       "isa": ["avx2", "avx512f", "amx_tile"], "flags_md5": "x", "libc": "glibc 2.36"}
    (clone / stable.LOCK_FILE).write_text(yaml.safe_dump(doc, sort_keys=False))
    out = cli(clone, "verify", "--against-lock", "toy").stdout
    assert "recorded on this machine: 3/3 reproduced" in out
    assert "recorded on another machine: 3/3 reproduced (Intel Xeon Gold (GenuineIntel 6/143/8, amx_tile, glibc 2.36); here: " in out


def test_machine_records_keep_dvc_locks_version(tmp_path: Path) -> None:
    """A stage rerun by hand more often than paperdag.lock remembers versions never evicts the execution dvc.lock
    records; the machine is described once, however many executions name it."""
    (tmp_path / "dvc.lock").write_text(yaml.safe_dump({"schema": "2.0", "stages": {"p-s": {
        "cmd": "paperdag stage p:s", "outs": [{"path": "data/o.json", "hash": "md5", "md5": "a" * 32, "size": 1}]}}}))
    for md5 in ["a" * 32, *(str(i) * 32 for i in range(1, 7))]:
        stable.record(tmp_path, {}, "p:s", {"data/o.json": md5})
    doc = yaml.safe_load((tmp_path / stable.LOCK_FILE).read_text())
    keys = doc["made_on"]["p:s"]
    assert len(keys) == 5 and stable.outputs_key({"data/o.json": "a" * 32}) in keys
    assert len(doc["machines"]) == 1
    assert stable.made_on(tmp_path, "p:s", {"data/o.json": "a" * 32})["cpu"] == doc["machines"][next(iter(doc["machines"]))]["cpu"]
    assert stable.made_on(tmp_path, "p:s", {"data/o.json": "f" * 32}) is None

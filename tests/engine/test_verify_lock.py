"""`paperdag verify --against-lock`: what a fresh clone on another machine checks. It holds no data and no DVC cache,
only dvc.lock's md5s and paperdag.lock's md5s of outputs without their volatile values."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from paperdag.engine import stable
from support import cli, git


@pytest.fixture
def clone(built_toy: Path, tmp_path: Path) -> Path:
    """A fresh `git clone` of the built toy repo after its dvc.lock and paperdag.lock were committed."""
    git(built_toy, "add", "dvc.lock", stable.LOCK_FILE)
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
    lock = clone / "dvc.lock"
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

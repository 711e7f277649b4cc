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


def test_a_fresh_clone_reproduces_every_locked_output(clone: Path) -> None:
    """Every output is rebuilt from nothing and equals dvc.lock's md5, except the metrics file whose wall time is
    declared volatile: that one equals the locked version once the volatile value is left out."""
    results = json.loads(cli(clone, "verify", "--against-lock", "toy", "--json").stdout)
    how = {r["path"]: r["how"] for r in results}
    assert all(r["reproduced"] for r in results) and len(results) == 6
    assert how["data/toy/metrics.json"] == "identical to dvc.lock's version except its volatile values"
    assert {h for p, h in how.items() if p != "data/toy/metrics.json"} == {"bit-identical to dvc.lock"}


def test_an_output_that_differs_from_the_lock_is_reported(clone: Path) -> None:
    """A locked md5 the rerun does not reproduce (here: dvc.lock edited) and a stable md5 that does not match are
    both listed, and verify exits 1."""
    lock = clone / "dvc.lock"
    doc = yaml.safe_load(lock.read_text())
    doc["stages"]["toy-left"]["outs"][0]["md5"] = "0" * 32
    lock.write_text(yaml.safe_dump(doc, sort_keys=False))
    plock = clone / stable.LOCK_FILE
    plock.write_text(_tamper_stable(plock.read_text()))
    r = cli(clone, "verify", "--against-lock", "toy", "--json", check=False)
    assert r.returncode == 1
    bad = {x["path"]: x["how"] for x in json.loads(r.stdout) if not x["reproduced"]}
    assert bad == {"data/toy/left.npy": "differs from dvc.lock",
                   "data/toy/metrics.json": "differs from dvc.lock beyond its volatile values"}


def _tamper_stable(text: str) -> str:
    doc = yaml.safe_load(text)
    versions = doc["outputs"]["data/toy/metrics.json"]
    doc["outputs"]["data/toy/metrics.json"] = {k: "f" * 32 for k in versions}
    return yaml.safe_dump(doc)


def test_a_stale_lock_is_refused_naming_the_stage_and_param(clone: Path) -> None:
    p = clone / "params.yaml"
    p.write_text(p.read_text().replace("n: 50", "n: 60"))
    r = cli(clone, "verify", "--against-lock", "toy:left", check=False)
    assert r.returncode == 2 and "toy-make" in r.stderr and "toy.make" in r.stderr


def test_one_stage_reuses_inputs_held_at_their_locked_md5(built_toy: Path) -> None:
    """In the built workspace the inputs are there at their locked md5: only the stage itself reruns."""
    results = json.loads(cli(built_toy, "verify", "--against-lock", "toy:combine", "--json").stdout)
    assert {r["stage"] for r in results} == {"toy:combine"} and all(r["reproduced"] for r in results)

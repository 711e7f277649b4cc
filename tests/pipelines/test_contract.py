"""What every pipeline under pipelines/ must satisfy end to end, each run once at the smoke scale its declaration
gives (`smoke:`; conftest.py `smoke_build`): `dvc repro` runs every declared stage, every declared output reads back
by its type, a second `dvc repro` runs nothing, and every declared claim is judged. What is particular to a method
is asserted on the same built repo in tests/methods/<m>/test_<m>_pipeline.py."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from support import REPO, SmokeBuild, chromium_page, cli, dvc, smoke_group, stages_run
from paperdag.engine.artifacts import read
from paperdag.engine.claims import STATUSES
from paperdag.engine.spec import Artifact, load_project

PIPELINES = sorted(p.stem for p in (REPO / "pipelines").glob("*.yaml"))
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module", params=[pytest.param(m, marks=smoke_group(m)) for m in PIPELINES])
def pipeline(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(scope="module")
def built(pipeline: str, smoke_build) -> SmokeBuild:
    return smoke_build(pipeline)


def test_declares_its_smoke_scale(pipeline: str) -> None:
    """The pipeline file has a `smoke:` section: without one its tests would run it at its default scale (minutes)."""
    assert load_project(REPO).pipeline(pipeline).smoke, f"pipelines/{pipeline}.yaml declares no smoke: section"


def test_stage_module_imports(pipeline: str) -> None:
    """stages/<m>.py imports: a module that cannot is a failure here, not a skip anywhere."""
    importlib.import_module(f"stages.{pipeline}")


def test_repro_runs_every_declared_stage(built: SmokeBuild, pipeline: str) -> None:
    """One `dvc repro` runs each declared stage once: every matrix element and the engine's claims stage included."""
    expected = sorted(s.dvc_name for s in load_project(built.repo).order(pipeline))
    assert sorted(stages_run(built.output)) == expected


def _unreadable(repo: Path, a: Artifact) -> str | None:
    """Why a declared output does not read back as its type, or None when it does."""
    path = repo / a.path
    if a.type == "dir":
        return None if path.is_dir() and any(path.iterdir()) else "not a non-empty directory"
    if not path.is_file() or path.stat().st_size == 0:
        return "missing or empty"
    value = read(a.type, path)
    expected = {"parquet": pl.DataFrame, "json": dict, "safetensors": dict, "npy": np.ndarray}.get(a.type)
    if expected is not None and not isinstance(value, expected):
        return f"read back as {type(value).__name__}, not {expected.__name__}"
    if a.type == "png" and path.read_bytes()[:8] != PNG:
        return "not a PNG"
    return None


def test_every_declared_output_reads_back_by_type(built: SmokeBuild, pipeline: str) -> None:
    """Every declared output (outs, metrics, plots, each matrix element's) exists and reads back by the type its path
    declares (paperdag.engine.artifacts.read): Parquet as a DataFrame, JSON as a mapping, safetensors as a mapping of
    arrays, .npy as an array, PNG as a PNG, a directory non-empty."""
    bad = {f"{s.address} {a.name} ({a.path})": why for s in load_project(built.repo).order(pipeline)
           for a in s.outputs.values() if (why := _unreadable(built.repo, a))}
    assert bad == {}


def test_second_repro_runs_nothing(built: SmokeBuild) -> None:
    """A second `dvc repro` with nothing changed reruns no stage: every output is a deterministic function of what
    the stage declares."""
    assert stages_run(dvc(built.repo, "repro").stdout) == []


def test_every_declared_claim_is_judged(built: SmokeBuild, pipeline: str) -> None:
    """The pipeline declares claims; data/<m>/claims.json gives each a status from its metrics (none missing after the
    run), and `paperdag claims <m> --json` judges them the same."""
    declared = load_project(built.repo).pipeline(pipeline).claims
    assert declared, f"pipelines/{pipeline}.yaml declares no claims"
    written = json.loads((built.repo / f"data/{pipeline}/claims.json").read_text())["claims"]
    assert set(written) == set(declared)
    assert {n: c["status"] for n, c in written.items() if c["status"] not in STATUSES or c["status"] == "missing"} == {}
    assert json.loads(cli(built.repo, "claims", pipeline, "--json").stdout)[pipeline] == written


CARD_JS = """(name) => {
  const card = document.getElementById(name);
  if (!card) return null;
  const claims = [...card.querySelectorAll('h3 + .scroll tr')].slice(1);
  return {
    claims: claims.map(r => r.querySelector('.badge') ? r.querySelector('.badge').textContent : null),
    images: [...card.querySelectorAll('img')].map(i => i.complete && i.naturalWidth > 0),
    provenance: card.querySelector('details summary').textContent,
    text: card.innerText,
    summaryLink: !!document.querySelector(`a[href="#${name}"]`),
  };
}"""


def test_audit_and_report(built: SmokeBuild, pipeline: str, tmp_path: Path) -> None:
    """`paperdag audit` finds every link of every artifact whole; the report's card for the pipeline loads in headless
    Chromium with no console error: every declared claim with a status badge, every plot drawn, the provenance of
    every artifact, no raw JSON."""
    r = cli(built.repo, "audit", pipeline, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    cli(built.repo, "report", "--out", str(tmp_path / "report"))
    card, errors = chromium_page(tmp_path / "report" / "index.html", f"({CARD_JS})({json.dumps(pipeline)})")
    assert errors == []
    assert card is not None and card["summaryLink"], f"no card for {pipeline}"
    declared = load_project(built.repo).pipeline(pipeline).claims
    assert len(card["claims"]) == len(declared) and None not in card["claims"]
    plots = [a for s in load_project(built.repo).order(pipeline) for a in s.outputs.values() if a.kind == "plot"]
    assert len(card["images"]) == len(plots) and all(card["images"])
    assert "every link holds" in card["provenance"], card["provenance"]
    assert '{"' not in card["text"] and "{'" not in card["text"]

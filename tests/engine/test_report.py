"""`paperdag report` as a reviewer first sees it: a summary row and a card per pipeline, in headless Chromium. The
cards of a pipeline with results are checked on its smoke build (tests/pipelines/test_contract.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from support import REPO, chromium_page, cli, commit_project
from paperdag.engine.report import _fmt

PAGE_JS = """() => ({
  cards: [...document.querySelectorAll('section.card')].map(c => c.id),
  links: [...document.querySelectorAll('table a[href^="#"]')].map(a => a.getAttribute('href').slice(1)),
  empty: [...document.querySelectorAll('section.card')].filter(c => c.innerText.includes('no results yet')).map(c => c.id),
  text: document.body.innerText,
})"""


def test_every_pipeline_has_a_card_before_anything_ran(tmp_path: Path) -> None:
    """This repository's declarations (a fresh clone before `make repro`): one card per pipeline, each linked from the
    summary, each saying it has no results yet, and the audit reporting what it cannot find; no console error; no
    MLflow store created to find no run in."""
    dest = tmp_path / "clone"
    dest.mkdir()
    for name in ("pipelines", "stages"):
        shutil.copytree(REPO / name, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("params.yaml", "dvc.yaml", "dvc.lock", ".dvcignore"):
        shutil.copyfile(REPO / name, dest / name)
    commit_project(dest, "declarations", render=False)
    cli(dest, "report", "--out", str(tmp_path / "report"))
    assert not (dest / "mlflow.db").exists(), "no run anywhere: the report needs no MLflow store, and made none"
    page, errors = chromium_page(tmp_path / "report" / "index.html", f"({PAGE_JS})()")
    pipelines = sorted(p.stem for p in (REPO / "pipelines").glob("*.yaml"))
    assert errors == []
    assert sorted(page["cards"]) == pipelines and sorted(page["links"]) == pipelines
    assert sorted(page["empty"]) == pipelines
    assert "artifacts broken" in page["text"]  # dvc.lock names outputs this copy does not have
    assert '{"' not in page["text"]


def test_values_read_as_text_not_json() -> None:
    assert _fmt({"mean": 0.5, "ci95_low": 0.25, "ci95_high": 0.75, "n": 3}) == "0.5 [0.25, 0.75] (n=3)"
    assert _fmt({"a": 1, "b": [0.5, 2]}) == "a: 1, b: 0.5, 2"
    assert _fmt(list(range(100)), limit=20).endswith("…") and len(_fmt(list(range(100)), limit=20)) == 20
    assert json.dumps(_fmt({"k": {"x": 1.23456}})) == '"k: x: 1.235"'

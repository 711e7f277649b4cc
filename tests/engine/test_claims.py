"""Claims: declared in the pipeline file, judged on metrics (numbers and intervals), a DVC stage of their own,
`paperdag claims [--check]`, errors that name file and key."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from paperdag.engine import claims
from paperdag.engine.errors import SpecError
from paperdag.engine.spec import load_project
from support import RESOURCES, cli, commit_project, dvc, stages_run

CLAIMS = {
    "enough_rows": {"paper": "the table has all its rows", "metric": "data/toy/metrics.json:n", "test": ">= 50",
                    "baseline": "none"},
    "total_positive": {"paper": "the combination is positive", "metric": "data/toy/metrics.json:headline.total",
                       "test": "value > 0", "baseline": "zero"},
}


def _project(dest: Path, claims_doc: object) -> Path:
    shutil.copytree(RESOURCES / "toy", dest)
    f = dest / "pipelines/toy.yaml"
    doc = yaml.safe_load(f.read_text())
    doc["claims"] = claims_doc
    f.write_text(yaml.safe_dump(doc, sort_keys=False))
    return dest


def _claim(**kw: str) -> claims.Claim:
    doc = {"paper": "p", "metric": "data/m/metrics.json:headline.x", "test": "> 0", "baseline": "b", **kw}
    return claims.parse("pipelines/m.yaml", {"c": doc})["c"]


@pytest.mark.parametrize(
    ("value", "test", "status"),
    [
        (0.3, "> 0", "held"),
        (-0.1, "> 0", "not_held"),
        (0.0, "> 0", "not_held"),
        (0.0, ">= 0", "held"),
        (True, "== 1", "held"),
        (float("inf"), ">= 5", "held"),
        ({"mean": 2.0, "ci95_low": 0.5, "ci95_high": 3.5, "n": 3}, "> 0", "held"),
        ({"mean": 2.0, "ci95_low": -0.5, "ci95_high": 4.5, "n": 3}, "> 0", "within_noise"),
        ({"mean": -1.0, "ci95_low": -3.0, "ci95_high": 1.0, "n": 3}, "> 0", "not_held"),
        ({"mean": 1.02, "ci95_low": 1.0, "ci95_high": 1.07, "n": 5}, "<= 1.05", "within_noise"),
        ({"mean": 1.02, "ci95_low": 1.0, "ci95_high": 1.04, "n": 5}, "<= 1.05", "held"),
        ({"value": 7.0, "ci95_low": None, "ci95_high": None, "n": 1}, "< 8", "within_noise"),  # one replicate
    ],
)
def test_judged_on_the_conservative_end_of_an_interval(value: object, test: str, status: str) -> None:
    entry = claims.judge(_claim(test=test), {"headline": {"x": value}}, "pipelines/m.yaml")
    assert entry["status"] == status
    if isinstance(value, dict):
        assert (entry["ci95_low"], entry["ci95_high"], entry["n"]) == (value["ci95_low"], value["ci95_high"], value["n"])


def test_a_claim_without_its_metrics_file_is_missing() -> None:
    assert claims.judge(_claim(), None, "pipelines/m.yaml")["status"] == "missing"


def test_a_null_metric_is_not_held_not_an_error() -> None:
    """A metric the pipeline wrote as null (it could not measure it: lookaheadkv's overhead ratio when an overhead is
    lost in timing noise) is not held, with no value; before, the claims stage failed on it and stopped the run."""
    entry = claims.judge(_claim(), {"headline": {"x": None}}, "pipelines/m.yaml")
    assert entry["status"] == "not_held" and entry["value"] is None


@pytest.mark.parametrize(
    ("metrics", "match"),
    [
        ({"headline": {}}, r"claims\.c\.metric.*has no key 'headline\.x'"),
        ({"headline": {"x": "big"}}, r"claims\.c\.metric.*expected a number"),
        ({"headline": {"x": float("nan")}}, r"claims\.c\.metric.*expected a number"),
    ],
)
def test_bad_metric_values_name_the_claim(metrics: dict, match: str) -> None:
    with pytest.raises(SpecError, match=match):
        claims.judge(_claim(), metrics, "pipelines/m.yaml")


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"test": "bigger than 0"}, "claims.total_positive.test"),
        ({"test": "ci95_high > 0"}, "claims.total_positive.test"),
        ({"metric": "data/toy/metrics.json"}, "claims.total_positive.metric"),
        ({"metric": "data/toy/table.parquet:x"}, "claims.total_positive.metric"),
        ({"metric": "data/other/metrics.json:x"}, "claims.total_positive.metric"),
        ({"paper": ""}, "claims.total_positive.paper"),
        ({"baselines": "x"}, "claims.total_positive.baselines"),
    ],
)
def test_malformed_claims_are_spec_errors_naming_file_and_key(tmp_path: Path, change: dict, key: str) -> None:
    doc = {**CLAIMS, "total_positive": {**CLAIMS["total_positive"], **change}}
    root = _project(tmp_path / "p", doc)
    with pytest.raises(SpecError) as e:
        load_project(root)
    assert "pipelines/toy.yaml" in str(e.value) and key in str(e.value)


def test_the_claims_stage_reads_the_metrics_it_names(tmp_path: Path) -> None:
    p = load_project(_project(tmp_path / "p", CLAIMS)).pipeline("toy")
    stage = p.stages["claims"]
    assert stage.builtin and list(stage.deps.values()) == ["data/toy/metrics.json"]
    assert stage.outputs["claims"].path == "data/toy/claims.json" and stage.outputs["claims"].kind == "metric"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    root = commit_project(_project(tmp_path_factory.mktemp("claims") / "repo", CLAIMS), "toy with claims")
    return root, dvc(root, "repro").stdout


def test_dvc_repro_judges_the_claims_into_a_dvc_metric(built: tuple[Path, str]) -> None:
    root, out = built
    assert "toy-claims" in stages_run(out)
    doc = json.loads((root / "data/toy/claims.json").read_text())
    assert {n: c["status"] for n, c in doc["claims"].items()} == {"enough_rows": "held", "total_positive": "held"}
    assert doc["summary"]["held"] == 2
    assert set(doc["claims"]["enough_rows"]) == {"paper", "metric", "test", "baseline", "value", "ci95_low",
                                                 "ci95_high", "n", "status"}
    shown = json.loads(dvc(root, "metrics", "show", "--json").stdout)
    assert "data/toy/claims.json" in json.dumps(shown)


def test_the_claims_run_records_each_status(built: tuple[Path, str]) -> None:
    from paperdag.engine.tracking import client as mlflow_client

    client = mlflow_client(built[0])  # after the stages' run records are in MLflow (a drainer may be creating it)
    runs = client.search_runs([client.get_experiment_by_name("toy").experiment_id], "tags.`paperdag.stage` = 'claims'")
    assert runs[0].data.tags["claim.total_positive.status"] == "held"
    assert runs[0].data.metrics["claims.enough_rows.value"] == 50.0


def test_paperdag_claims_prints_a_table_and_check_fails_on_a_claim_not_held(built: tuple[Path, str], tmp_path: Path) -> None:
    root = built[0]
    r = cli(root, "claims", "toy", "--check")
    assert "enough_rows" in r.stdout and "held" in r.stdout and ">= 50" in r.stdout
    pipeline = root / "pipelines/toy.yaml"
    saved = pipeline.read_text()
    try:
        doc = yaml.safe_load(saved)
        doc["claims"]["enough_rows"]["test"] = "> 50"
        pipeline.write_text(yaml.safe_dump(doc, sort_keys=False))
        r = cli(root, "claims", "toy", "--check", check=False)
        assert r.returncode == 1 and "toy.enough_rows" in r.stderr
        assert json.loads(cli(root, "claims", "--json").stdout)["toy"]["enough_rows"]["status"] == "not_held"
        assert "toy-claims" in dvc(root, "status").stdout  # the claims declared are the claims stage's params
        assert "claims declared in `pipelines/toy.yaml` changed: enough_rows changed" in cli(root, "why", "toy").stdout
        # what else the pipeline file holds (here a comment and the smoke scale) is not the claims stage's business
        pipeline.write_text(saved + "# the tests' scale\nsmoke:\n  toy.make.n: 40\n")
        assert "toy-claims" not in dvc(root, "status").stdout
    finally:
        pipeline.write_text(saved)


def test_readme_blocks_are_written_from_the_claims(built: tuple[Path, str]) -> None:
    root = built[0]
    readme = root / "README.md"
    readme.write_text("# toy\n\n" + claims.README_START.format(pipeline="toy") + "\nold\n" + claims.README_END + "\nafter\n")
    cli(root, "claims", "--readme")
    text = readme.read_text()
    assert "old" not in text and "| enough_rows | 50 |" in text and text.endswith("after\n")


def test_readme_keeps_the_table_of_a_pipeline_whose_metrics_are_not_in_the_workspace(built: tuple[Path, str]) -> None:
    """A workspace without a pipeline's outputs (never run here, not checked out) judges all its claims `missing`;
    `--readme` leaves that pipeline's table as it is and says why, instead of writing a column of `missing` over the
    figures of the run dvc.lock records."""
    root = built[0]
    readme, metrics = root / "README.md", root / "data/toy/metrics.json"
    block = claims.README_START.format(pipeline="toy") + "\n| enough_rows | 50 | recorded |\n" + claims.README_END + "\n"
    readme.write_text("# toy\n\n" + block)
    saved = metrics.read_bytes()
    metrics.unlink()
    try:
        r = cli(root, "claims", "--readme")
    finally:
        metrics.write_bytes(saved)
    assert readme.read_text() == "# toy\n\n" + block
    assert "toy left as they are" in r.stdout and "dvc checkout" in r.stdout, r.stdout

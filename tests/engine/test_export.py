"""Lineage for other tools (records.py, export.py): each stage's MLflow run lists its inputs and outputs as MLflow
datasets (digest = DVC's md5), and `paperdag export --ro-crate` writes dvc.lock's build as a Workflow Run RO-Crate."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from support import cli
from paperdag.engine import dvc, records
from paperdag.engine.export import CODE_DIRS
from paperdag.engine.tracking import DEP_TAG, client

OFF = {records.DRAIN_ENV: "off"}


def latest_runs(repo: Path) -> dict[str, object]:
    """pipeline:stage -> its latest MLflow run (with inputs)."""
    c = client(repo)
    exp = c.get_experiment_by_name("toy")
    latest: dict[str, object] = {}
    for r in c.search_runs([exp.experiment_id], max_results=1000):
        address = f"toy:{r.data.tags['paperdag.stage']}"
        if address not in latest or r.info.start_time > latest[address].info.start_time:
            latest[address] = r
    return {a: c.get_run(r.info.run_id) for a, r in latest.items()}


def datasets(run) -> list[tuple[str, str, str]]:
    return sorted((i.dataset.name, i.dataset.digest, {t.key: t.value for t in i.tags}["mlflow.data.context"])
                  for i in run.inputs.dataset_inputs)


def lock_entry(repo: Path, address: str) -> dict:
    return next(e for e in dvc.lock(repo)["stages"].values() if e["cmd"] == f"paperdag stage {address}")


def expected_datasets(entry: dict) -> list[tuple[str, str, str]]:
    return sorted([(d["path"], d["md5"], "input") for d in entry["deps"] if not d["path"].startswith(CODE_DIRS)]
                  + [(o["path"], o["md5"], "output") for o in entry["outs"]])


def test_each_run_lists_its_data_deps_and_outs_as_mlflow_datasets_and_its_code_as_tags(built_toy: Path) -> None:
    """After a build is drained, every stage's run holds each data dep (context input) and each out (context output)
    as an MLflow dataset whose digest is the md5 dvc.lock records, a table with its schema; its code deps are
    paperdag.code.<path> tags with dvc.lock's md5 (bytecode left out, as DVC leaves it out), not datasets."""
    runs = latest_runs(built_toy)
    assert set(runs) == {"toy:make", "toy:left", "toy:right", "toy:combine"}
    for address, run in runs.items():
        entry = lock_entry(built_toy, address)
        assert datasets(run) == expected_datasets(entry), address
        code = {d["path"]: d["md5"] for d in entry["deps"] if d["path"].startswith(CODE_DIRS)}
        assert code and {k[len(DEP_TAG):]: v for k, v in run.data.tags.items() if k.startswith(DEP_TAG) and k[len(DEP_TAG):].startswith(CODE_DIRS)} == code
    table = next(i.dataset for i in runs["toy:left"].inputs.dataset_inputs if i.dataset.name == "data/toy/table.parquet")
    assert json.loads(table.schema)["mlflow_colspec"] == [{"type": "double", "name": "x", "required": True}]
    assert json.loads(table.profile)["num_rows"] == 50


def test_a_resumed_record_logs_each_dataset_once_and_a_path_param_file_as_a_source(
        built_toy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A drainer killed after logging a run's datasets (before ending the run) leaves the record; the next drain
    completes the same run without a second copy of any dataset. A file a path param names is a "source" dataset."""
    import polars as pl
    from mlflow.tracking import MlflowClient

    pl.DataFrame({"x": [1.0, 2.0]}).write_parquet(built_toy / "extra.parquet")
    p = built_toy / "params.yaml"
    p.write_text(p.read_text().replace('extra_rows: ""', "extra_rows: extra.parquet"))
    cli(built_toy, "stage", "toy:make", env=OFF)
    real = MlflowClient.set_terminated
    monkeypatch.setattr(MlflowClient, "set_terminated", lambda self, *a, **k: (_ for _ in ()).throw(RuntimeError("died")))
    with pytest.raises(RuntimeError, match="died"):
        records.drain(built_toy)
    assert len(records.pending(built_toy)) == 1
    monkeypatch.setattr(MlflowClient, "set_terminated", real)
    run = latest_runs(built_toy)["toy:make"]
    assert run.info.status == "FINISHED" and records.pending(built_toy) == []
    table = hashlib.md5((built_toy / "data/toy/table.parquet").read_bytes()).hexdigest()
    extra = hashlib.md5((built_toy / "extra.parquet").read_bytes()).hexdigest()
    assert datasets(run) == [("data/toy/table.parquet", table, "output"), ("extra.parquet", extra, "source")]


def crate_entities(crate_dir: Path) -> dict[str, dict]:
    from rocrate.rocrate import ROCrate

    crate = ROCrate(crate_dir)  # rocrate's reader: the check that it is a crate at all
    return {e.id: e.properties() for e in crate.get_entities()}


def ids(value) -> list[str]:
    return [v["@id"] for v in (value if isinstance(value, list) else [value] if value else [])]


def test_ro_crate_holds_every_locked_artifact_and_each_stage_run(built_toy: Path, tmp_path: Path) -> None:
    """The crate loads with rocrate's reader and conforms to the Workflow Run Crate profiles; each dvc.lock out is in
    it with DVC's md5 and sha256 (a directory as a Dataset of files), byte for byte; each stage execution is a
    CreateAction whose instrument, object (data deps, params) and result are entities of the crate, with the MLflow run
    that wrote those outs; a second export replaces the first."""
    dest = tmp_path / "crate"
    runs = latest_runs(built_toy)
    records.indexed_runs(built_toy)  # the run index written here, where MLflow is imported already (saves seconds)
    cli(built_toy, "export", "--ro-crate", str(dest))
    cli(built_toy, "export", "--ro-crate", str(dest))  # over an earlier crate
    e = crate_entities(dest)
    assert "https://w3id.org/ro/wfrun/workflow/0.5" in ids(e["./"]["conformsTo"])
    assert ids(e["./"]["mainEntity"]) == ["dvc.yaml"] and "ComputationalWorkflow" in e["dvc.yaml"]["@type"]
    for o in (o for s in dvc.lock(built_toy)["stages"].values() for o in s["outs"]):
        entity = e.get(o["path"]) or e[o["path"] + "/"]
        assert e[ids(entity["identifier"])[0]]["value"] == o["md5"]
        files = ids(entity["hasPart"]) if entity["@type"] == "Dataset" else [o["path"]]
        for f in files:
            assert e[f]["sha256"] == hashlib.sha256((dest / f).read_bytes()).hexdigest()
    assert e["data/toy/left.npy"]["sha256"] == hashlib.sha256((built_toy / "data/toy/left.npy").read_bytes()).hexdigest()
    actions = {k: v for k, v in e.items() if v["@type"] == "CreateAction" and k != "#workflow-run"}
    assert len(actions) == len(dvc.lock(built_toy)["stages"]) == 4
    for a in actions.values():
        linked = ids(a["instrument"]) + ids(a["object"]) + ids(a["result"]) + ids(a.get("identifier"))
        assert linked and all(i in e for i in linked), a["@id"]
        address = a["name"].removeprefix("paperdag stage ")
        assert [e[i]["value"] for i in ids(a["identifier"])] == [runs[address].info.run_id]
        assert a["startTime"] < a["endTime"]
        entry = lock_entry(built_toy, address)
        assert {i.rstrip("/") for i in ids(a["result"])} == {o["path"] for o in entry["outs"]}
    combine = actions["#run-toy-combine"]
    assert {e[i]["name"]: e[i]["value"] for i in ids(combine["object"]) if e[i]["@type"] == "PropertyValue"}[
        "toy.combine.scale"] == 2.0
    workflow_run = e["#workflow-run"]
    assert ids(workflow_run["instrument"]) == ["dvc.yaml"] and len(ids(workflow_run["result"])) == 6


def test_a_code_dep_edited_since_its_run_is_not_passed_off_as_the_version_that_ran(built_toy: Path, tmp_path: Path) -> None:
    """A version dvc.lock records that neither the workspace nor DVC's cache holds (stages/toy.py edited after the
    build) is a stand-in entity with dvc.lock's md5, not the edited file; `--pipeline` of a pipeline dvc.lock does not
    record is an error; DIR that holds something other than a crate is refused and left alone."""
    stage_file = built_toy / "stages/toy.py"
    locked = next(d["md5"] for d in lock_entry(built_toy, "toy:make")["deps"] if d["path"] == "stages/toy.py")
    stage_file.write_text(stage_file.read_text() + "\n# edited\n")
    dest = tmp_path / "crate"
    records.indexed_runs(built_toy)
    cli(built_toy, "export", "--ro-crate", str(dest), "--pipeline", "toy")
    e = crate_entities(dest)
    tool = e["#stage-toy-make"]
    code = {e[i]["name"]: e[i] for i in ids(tool["hasPart"])}
    assert "stages/toy.py" not in e and not (dest / "stages/toy.py").exists()
    assert e[ids(code["stages/toy.py"]["identifier"])[0]]["value"] == locked
    r = cli(built_toy, "export", "--ro-crate", str(dest), "--pipeline", "nope", check=False)
    assert r.returncode == 2 and "no stage of pipeline nope" in r.stderr
    other = tmp_path / "notes"
    other.mkdir()
    (other / "keep.txt").write_text("mine")
    r = cli(built_toy, "export", "--ro-crate", str(other), check=False)
    assert r.returncode == 2 and "is not an RO-Crate" in r.stderr and (other / "keep.txt").read_text() == "mine"


def test_the_run_index_keeps_run_times_also_when_rebuilt(built_toy: Path) -> None:
    """The crate's actions take their times from the run index: the drainer's entries and those rebuilt from MLflow
    (an index lost, or one an older paperdag wrote under another name) both hold them."""
    index = built_toy / records.INDEX
    written = records.indexed_runs(built_toy)
    index.unlink()
    rebuilt = records.indexed_runs(built_toy)
    assert index.exists() and len(rebuilt) == len(written)
    for entries in (written, rebuilt):
        assert all(e["start_ms"] and e["end_ms"] >= e["start_ms"] for e in entries)


def test_openlineage_events_name_each_stage_run_its_datasets_and_md5s(built_toy: Path, tmp_path: Path) -> None:
    """`--openlineage FILE` writes a START and a COMPLETE RunEvent per dvc.lock stage, in that order, with the MLflow
    run's id and times; inputs are the data deps, outputs the outs, each with dvc.lock's md5 as its version facet."""
    runs = latest_runs(built_toy)
    records.indexed_runs(built_toy)
    dest = tmp_path / "lineage.jsonl"
    cli(built_toy, "export", "--openlineage", str(dest))
    events = [json.loads(line) for line in dest.read_text().splitlines()]
    assert [e["eventType"] for e in events] == ["START", "COMPLETE"] * 4
    for start, complete in zip(events[::2], events[1::2]):
        address = start["job"]["name"]
        assert complete["job"]["name"] == address and start["run"]["runId"] == complete["run"]["runId"]
        assert start["run"]["runId"].replace("-", "") == runs[address].info.run_id
        assert start["eventTime"] < complete["eventTime"]
        versions = sorted([(d["name"], d["facets"]["version"]["datasetVersion"], "input") for d in start["inputs"]]
                          + [(d["name"], d["facets"]["version"]["datasetVersion"], "output") for d in start["outputs"]])
        assert versions == [(str(built_toy.resolve() / p), m, c) for p, m, c in expected_datasets(lock_entry(built_toy, address))]

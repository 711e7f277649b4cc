"""`paperdag audit` (src/paperdag/engine/audit.py): every link from a dvc.lock output back to its file, run, params,
commit, dep chain, environment and verify; a clean build audits ok, and each link broken on purpose is named on the
output it breaks. Also: lineage lists only the runs whose params are dvc.lock's, and dvc_md5 leaves out what
.dvcignore ignores, as DVC does."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from paperdag.engine import tracking
from paperdag.engine.audit import LINKS, NOT_VERIFIED, audit
from paperdag.engine.fsutil import dvc_md5
from paperdag.engine.verify import VERIFY_EXPERIMENT
from support import cli, dvc, git, lock_file_of

OUTPUTS = {"data/toy/table.parquet", "data/toy/left.npy", "data/toy/right.safetensors", "data/toy/model",
           "data/toy/metrics.json", "data/toy/curve.png"}
COMBINE = {"data/toy/model", "data/toy/metrics.json", "data/toy/curve.png"}


def outputs(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {o["path"]: o for p in result["pipelines"].values() for o in p["outputs"]}


def broken(result: dict[str, Any]) -> dict[tuple[str, str], str]:
    """(output path, link) -> detail, for every link not ok."""
    return {(o["path"], x["link"]): x["detail"] for o in outputs(result).values() for x in o["links"] if not x["ok"]}


def edit_lock(repo: Path, stage: str, change) -> None:
    path = lock_file_of(repo, stage)
    doc = yaml.safe_load(path.read_text())
    change(doc["stages"][stage])
    path.write_text(yaml.safe_dump(doc, sort_keys=False))


def run_of(result: dict[str, Any], path: str) -> str:
    return outputs(result)[path]["run_id"]


def test_a_built_project_audits_ok_from_the_run_index(built_toy: Path, monkeypatch, capsys) -> None:
    """After `dvc repro`, every output of dvc.lock has all seven links ok (verify: not verified yet, informational):
    `paperdag audit` exits 0, its JSON has the documented shape, and it imports no MLflow while the index is
    current. An unknown pipeline is a usage error (exit 2)."""
    r = cli(built_toy, "audit", "--json")
    result = json.loads(r.stdout)
    assert result["ok"] and set(result["pipelines"]) == {"toy"}
    assert result["head"] == git(built_toy, "rev-parse", "HEAD").strip()
    outs = outputs(result)
    assert set(outs) == OUTPUTS
    for o in outs.values():
        assert [x["link"] for x in o["links"]] == list(LINKS)
        statuses = {x["link"]: x["status"] for x in o["links"]}
        assert statuses == {**dict.fromkeys(LINKS, "ok"), "verify": "info"}, (o["path"], o["links"])
        assert o["ok"] and o["verify"] == NOT_VERIFIED and o["run_id"] in o["runs"]
    assert outs["data/toy/left.npy"]["stage"] == "toy:left" and outs["data/toy/left.npy"]["dvc_stage"] == "toy-left"
    code = ("import sys; from paperdag.engine.audit import audit, format_audit; r = audit('.'); "
            "print(format_audit(r)); print(r['ok'], 'mlflow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=built_toy, capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[-1].split() == ["True", "False"]
    assert "toy: 6/6 outputs with every link ok" in out and "BAD" not in out
    from paperdag.engine.cli import main

    monkeypatch.setenv("PAPERDAG_ROOT", str(built_toy))
    assert main(["audit", "nosuch"]) == 2 and "no pipeline nosuch" in capsys.readouterr().err


def test_an_edited_output_breaks_its_file_link_and_a_cached_one_does_not(built_toy: Path) -> None:
    """An output edited in the workspace is broken (file), naming both md5s, and `paperdag audit` exits 1 naming it;
    outputs absent from the workspace are ok while DVC's cache holds them whole (a directory: its manifest and
    files), broken once the cache lacks one of a directory's files."""
    with open(built_toy / "data/toy/left.npy", "ab") as f:
        f.write(b"\0")
    (built_toy / "data/toy/right.safetensors").unlink()
    model = built_toy / "data/toy/model"
    listed = sorted(p for p in model.rglob("*") if p.is_file())
    subprocess.run(["rm", "-r", str(model)], check=True)
    result = audit(built_toy)
    assert set(broken(result)) == {("data/toy/left.npy", "file")}
    assert "dvc.lock" in broken(result)[("data/toy/left.npy", "file")] and "cache" in broken(result)[("data/toy/left.npy", "file")]
    assert "DVC's cache holds" in {x["link"]: x["detail"] for x in outputs(result)["data/toy/model"]["links"]}["file"]
    r = cli(built_toy, "audit", check=False)
    assert r.returncode == 1 and "BAD  data/toy/left.npy" in r.stdout and "file BROKEN" in r.stdout
    manifest = json.loads((built_toy / ".dvc/cache/files/md5" / outputs(result)["data/toy/model"]["md5"][:2]
                           / outputs(result)["data/toy/model"]["md5"][2:]).read_text())
    assert len(manifest) == len(listed) > 0
    first = manifest[0]["md5"]
    (built_toy / ".dvc/cache/files/md5" / first[:2] / first[2:]).unlink()
    assert ("data/toy/model", "file") in broken(audit(built_toy))


def test_a_deleted_run_breaks_the_run_link(built_toy: Path) -> None:
    """Deleting the MLflow run that wrote combine's outputs (in MLflow, not through paperdag) breaks their run link
    at the next audit (the run index is rebuilt), and the links that need a run are unchecked, not ok."""
    from paperdag.engine.tracking import client

    before = audit(built_toy)
    client(built_toy).delete_run(run_of(before, "data/toy/model"))
    result = audit(built_toy)
    assert {path for path, link in broken(result) if link == "run"} == COMBINE
    assert {link for (path, link) in broken(result) if path == "data/toy/model"} == {
        "run", "params", "commit", "chain", "environment"}
    assert {x["status"] for x in outputs(result)["data/toy/model"]["links"] if x["link"] == "environment"} == {"unchecked"}
    assert all(outputs(result)[p]["ok"] for p in OUTPUTS - COMBINE)


def test_a_param_changed_in_dvc_lock_breaks_the_params_link(built_toy: Path) -> None:
    """A value edited in dvc.lock's params of combine breaks the params link of combine's outputs only, naming the
    key and both values."""
    edit_lock(built_toy, "toy-combine", lambda e: e["params"]["params.yaml"]["toy.combine"].update(scale=3.0))
    result = audit(built_toy)
    assert set(broken(result)) == {(p, "params") for p in COMBINE}
    assert "toy.combine.scale 2.0 != dvc.lock 3.0" in broken(result)[("data/toy/metrics.json", "params")]


def test_a_run_off_the_history_of_head_breaks_the_commit_link(built_toy: Path) -> None:
    """After the commit the runs ran at is amended, they are not ancestors of HEAD (commit broken on every output);
    a run whose recorded commit does not exist is named as such; a dirty run is a warning, not broken."""
    from paperdag.engine.tracking import client

    ran_at = {o["run_id"] for o in outputs(audit(built_toy)).values()}
    git(built_toy, "commit", "-q", "--amend", "-m", "fixture, amended")
    result = audit(built_toy)
    assert set(broken(result)) == {(p, "commit") for p in OUTPUTS}
    assert "not an ancestor of HEAD" in broken(result)[("data/toy/left.npy", "commit")]
    c = client(built_toy)
    c.set_tag(run_of(result, "data/toy/table.parquet"), "git.commit", "0123456789" * 4)
    c.set_tag(run_of(result, "data/toy/left.npy"), "git.commit", git(built_toy, "rev-parse", "HEAD").strip())
    c.set_tag(run_of(result, "data/toy/left.npy"), "git.dirty", "true")
    result = audit(built_toy)
    assert {o["run_id"] for o in outputs(result).values()} == ran_at
    assert "not a commit of this repository" in broken(result)[("data/toy/table.parquet", "commit")]
    left = {x["link"]: x for x in outputs(result)["data/toy/left.npy"]["links"]}
    assert left["commit"]["status"] == "warning" and "uncommitted" in left["commit"]["detail"]
    assert outputs(result)["data/toy/left.npy"]["ok"]


def test_a_dep_md5_that_does_not_close_the_chain_breaks_the_chain_link(built_toy: Path) -> None:
    """combine's dvc.lock entry naming an md5 of left.npy that is not left's out md5 breaks the chain link of
    combine's outputs (the run read another md5 too); its upstream outputs are untouched."""

    def tamper(entry: dict[str, Any]) -> None:
        next(d for d in entry["deps"] if d["path"] == "data/toy/left.npy")["md5"] = "0" * 32

    edit_lock(built_toy, "toy-combine", tamper)
    result = audit(built_toy)
    assert set(broken(result)) == {(p, "chain") for p in COMBINE}
    detail = broken(result)[("data/toy/model", "chain")]
    assert "data/toy/left.npy is 000000000000 in this stage's entry" in detail and "toy-left's out" in detail
    assert "run " in detail and "read data/toy/left.npy at" in detail


def test_a_run_without_numerics_tags_breaks_the_environment_link(built_toy: Path) -> None:
    """Removing the numerics mode from make's run breaks the environment link of its output only."""
    from paperdag.engine.tracking import client

    client(built_toy).delete_tag(run_of(audit(built_toy), "data/toy/table.parquet"), "numerics.mode")
    result = audit(built_toy)
    assert set(broken(result)) == {("data/toy/table.parquet", "environment")}
    assert "numerics.mode" in broken(result)[("data/toy/table.parquet", "environment")]


def test_each_verify_is_an_mlflow_run_and_a_verify_that_differs_breaks_the_verify_link(built_toy: Path) -> None:
    """`paperdag verify toy:left` logs one run in the paperdag.verify experiment (status and checked md5 per
    output): audit shows left.npy bit-identical. A verify of make under another n finds the table differs: its
    verify link is broken, at the md5 it checked."""
    from paperdag.engine.tracking import client

    from paperdag.engine.verify import verify_recorded

    cli(built_toy, "verify", "toy:left")
    lock_md5 = outputs(audit(built_toy))["data/toy/table.parquet"]["md5"]
    params = built_toy / "params.yaml"
    params.write_text(params.read_text().replace("n: 50", "n: 60"))
    assert [r["status"] for r in verify_recorded(built_toy, "toy:make")] == ["differs"]
    result = audit(built_toy)
    assert outputs(result)["data/toy/left.npy"]["verify"] == "bit-identical"
    assert set(broken(result)) == {("data/toy/table.parquet", "verify")}
    assert outputs(result)["data/toy/table.parquet"]["verify"] == "differs"
    c = client(built_toy)
    runs = c.search_runs([c.get_experiment_by_name(VERIFY_EXPERIMENT).experiment_id])
    assert len(runs) == 2 and {r.info.status for r in runs} == {"FINISHED"}
    tags = next(r.data.tags for r in runs if r.data.tags["paperdag.verify_target"] == "toy:make")
    assert tags["paperdag.verify.data/toy/table.parquet"] == "differs"
    assert tags["paperdag.verify_md5.data/toy/table.parquet"] == lock_md5


def test_lineage_lists_only_the_run_whose_params_are_dvc_locks(built_toy: Path) -> None:
    """Two runs of left write the same bytes under different toy.work.seconds: lineage lists only the one whose
    params dvc.lock records (audit's run link says the runs disagree); a run that recorded no params is listed by
    md5 alone, marked so."""
    from paperdag.engine.lineage import trace
    from paperdag.engine.tracking import client

    first = run_of(audit(built_toy), "data/toy/left.npy")
    before = dvc_md5(built_toy / "data/toy/left.npy")
    params = built_toy / "params.yaml"
    params.write_text(params.read_text().replace("seconds: 0.0", "seconds: 0.01"))
    dvc(built_toy, "repro", "-s", "pipelines/toy/dvc.yaml:toy-left")
    assert dvc_md5(built_toy / "data/toy/left.npy") == before
    graph = trace(built_toy, "data/toy/left.npy")
    runs = graph["nodes"]["data/toy/left.npy"]["runs"]
    assert len(runs) == 1 and runs[0]["run_id"] != first and runs[0]["matched"] == "md5 and params"
    assert '"seconds":0.01' in runs[0]["params"]
    result = audit(built_toy)
    run_link = next(x for x in outputs(result)["data/toy/left.npy"]["links"] if x["link"] == "run")
    assert run_link["status"] == "warning" and "toy.work.seconds" in run_link["detail"]
    client(built_toy).delete_tag(first, tracking.PARAMS_TAG)
    graph = trace(built_toy, "data/toy/left.npy")
    matched = {r["run_id"]: r["matched"] for r in graph["nodes"]["data/toy/left.npy"]["runs"]}
    assert matched == {runs[0]["run_id"]: "md5 and params", first: "md5 only"}


def test_dvc_md5_leaves_out_what_dvcignore_ignores_as_dvc_does(toy: Path) -> None:
    """A directory holding bytecode that .dvcignore ignores hashes to the md5 `dvc add` records for it."""
    (toy / ".dvcignore").write_text("__pycache__/\n*.pyc\n")
    d = toy / "pkg"
    (d / "__pycache__").mkdir(parents=True)
    (d / "a.py").write_text("x = 1\n")
    (d / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0bytecode")
    (d / "b.pyc").write_bytes(b"\1")
    dvc(toy, "add", "pkg")
    recorded = yaml.safe_load((toy / "pkg.dvc").read_text())["outs"][0]["md5"]
    assert dvc_md5(d) == recorded
    assert recorded != dvc_md5_without_ignore(d)


def dvc_md5_without_ignore(d: Path) -> str:
    import hashlib

    from paperdag.engine.fsutil import file_md5

    entries = sorted(({"md5": file_md5(p), "relpath": p.relative_to(d).as_posix()} for p in d.rglob("*") if p.is_file()),
                     key=lambda e: e["relpath"])
    return hashlib.md5(json.dumps(entries, sort_keys=True).encode()).hexdigest() + ".dir"


def test_runs_that_wrote_the_same_bytes_disagree_on_code_only_where_both_read_a_file() -> None:
    """Two runs that wrote one md5: a code file both read at different md5s is a warning on the run link (the same
    bytes from other code); a file only one of them recorded (an older run, tagged before every code dep was) is not."""
    from paperdag.engine.audit import _run_link

    def run(rid: str, **code: str) -> dict:
        return {"run_id": rid, "tags": {f"paperdag.dep.src/paperdag/methods/m/{k}.py": v for k, v in code.items()}}

    assert _run_link([run("new", a="1", b="2"), run("old", a="1")], "f" * 32, {})["status"] == "ok"
    differs = _run_link([run("new", a="1", b="2"), run("old", a="1", b="3")], "f" * 32, {})
    assert differs["status"] == "warning" and "src/paperdag/methods/m/b.py" in differs["detail"]


def test_a_float_reads_back_from_dvc_lock_as_params_yaml_gives_it() -> None:
    """DVC (ruamel.yaml) writes 0.00001 into dvc.lock as `1e-05`, which YAML 1.1 (PyYAML) reads as a string: the
    engine reads YAML 1.2 floats, so a run's params equal dvc.lock's (milco's lambda_d broke the params link)."""
    import io

    from ruamel.yaml import YAML

    from paperdag.engine.fsutil import load_yaml

    buf = io.StringIO()
    YAML().dump({"lambda_d": 0.00001, "lr": 1.0e-3, "n": 7, "name": "1e-05 as text"}, buf)
    assert "1e-05" in buf.getvalue()
    assert load_yaml(buf.getvalue()) == {"lambda_d": 0.00001, "lr": 0.001, "n": 7, "name": "1e-05 as text"}

"""`dvc repro` drives `paperdag stage`: incremental reruns, MLflow lineage, failures, kills, lineage, verify, report."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from support import cli, dvc, git, lock_texts, stages_run
from paperdag.engine import dvc as engine_dvc
from paperdag.engine.fsutil import TMP_MARK, dvc_md5
from paperdag.engine.tracking import client


def ran(output: str) -> list[str]:
    return stages_run(output)


def changed(repo: Path) -> set[str]:
    """The stages `dvc status --json` lists, by name (one of pipelines/<p>/dvc.yaml comes as `<file>:<name>`)."""
    return {name.split(":")[-1] for name in json.loads(dvc(repo, "status", "--json").stdout)}


def lock_outs(repo: Path) -> dict[str, str]:
    return {o["path"]: o["md5"] for e in engine_dvc.lock(repo)["stages"].values() for o in e["outs"]}


def runs(repo: Path, status: str | None = None):
    c = client(repo)
    exp = c.get_experiment_by_name("toy")
    found = c.search_runs([exp.experiment_id], max_results=1000)
    return [r for r in found if status is None or r.info.status == status]


def test_second_repro_is_a_noop(built_toy: Path) -> None:
    """After a full `dvc repro`, a second one runs nothing and `dvc status` is clean."""
    r = dvc(built_toy, "repro")
    assert ran(r.stdout) == []
    assert "up to date" in dvc(built_toy, "status").stdout


def test_param_change_reruns_only_downstream(built_toy: Path) -> None:
    """Changing toy.combine.scale reruns only combine; changing toy.work reruns left, right and combine."""
    cli(built_toy, "run", "--help")  # argparse sanity without Prefect
    p = built_toy / "params.yaml"
    p.write_text(p.read_text().replace("scale: 2.0", "scale: 3.0"))
    assert ran(dvc(built_toy, "repro").stdout) == ["toy-combine"]
    p.write_text(p.read_text().replace("seconds: 0.0", "seconds: 0.01"))
    assert changed(built_toy) == {"toy-left", "toy-right"}  # combine follows once they rerun


def test_code_change_marks_only_stages_that_import_it(built_toy: Path) -> None:
    """Editing the method package makes the stages whose functions use it stale (left and right call spin; make and
    combine do not); an unrelated file does not."""
    (built_toy / "README.txt").write_text("unrelated\n")
    assert "up to date" in dvc(built_toy, "status").stdout
    f = built_toy / "src" / "toy_method" / "__init__.py"
    f.write_text(f.read_text() + "\n# edited\n")
    assert changed(built_toy) == {"toy-left", "toy-right"}


def test_mlflow_runs_carry_dvc_md5s_params_and_commit(built_toy: Path) -> None:
    """Each stage execution is one FINISHED MLflow run whose out-md5 tags equal dvc.lock's, with params and commit."""
    head = git(built_toy, "rev-parse", "HEAD").strip()
    finished = runs(built_toy, "FINISHED")
    assert sorted(r.data.tags["paperdag.stage"] for r in finished) == ["combine", "left", "make", "right"]
    outs = lock_outs(built_toy)
    for r in finished:
        tagged = {k.removeprefix("paperdag.out."): v for k, v in r.data.tags.items() if k.startswith("paperdag.out.")}
        assert tagged and all(outs[path] == md5 for path, md5 in tagged.items())
        assert r.data.tags["git.commit"] == head
        assert "env.python" in r.data.tags and "env.dvc" in r.data.tags
    make = next(r for r in finished if r.data.tags["paperdag.stage"] == "make")
    assert make.data.params["n"] == "50"
    combine = next(r for r in finished if r.data.tags["paperdag.stage"] == "combine")
    assert combine.data.metrics["headline.total"] > 0
    assert combine.data.tags["paperdag.dep.data/toy/left.npy"] == outs["data/toy/left.npy"]


def test_failing_stage_keeps_outputs_marks_run_failed_and_resumes(built_toy: Path) -> None:
    """A stage that raises leaves outputs and dvc.lock as they were, its MLflow run FAILED with the traceback;
    fixing the cause and rerunning resumes at that stage."""
    before = {p: dvc_md5(built_toy / p) for p in ("data/toy/metrics.json", "data/toy/model", "data/toy/curve.png")}
    lock_before = lock_texts(built_toy)
    p = built_toy / "params.yaml"
    p.write_text(p.read_text().replace("fail: false", "fail: true").replace("scale: 2.0", "scale: 5.0"))
    r = dvc(built_toy, "repro", check=False)
    assert r.returncode != 0 and "combine was told to fail" in r.stderr + r.stdout
    assert {q: dvc_md5(built_toy / q) for q in before} == before
    assert lock_texts(built_toy) == lock_before
    failed = runs(built_toy, "FAILED")
    assert len(failed) == 1 and failed[0].data.tags["paperdag.error"].startswith("RuntimeError")
    tb = client(built_toy).download_artifacts(failed[0].info.run_id, "traceback.txt")
    assert "combine was told to fail" in Path(tb).read_text()
    p.write_text(p.read_text().replace("fail: true", "fail: false"))
    assert ran(dvc(built_toy, "repro").stdout) == ["toy-combine"]
    assert dvc_md5(built_toy / "data/toy/metrics.json") != before["data/toy/metrics.json"]


def test_sigkill_mid_write_leaves_no_half_written_output(built_toy: Path) -> None:
    """Killing a stage while it writes leaves the previous output whole; the next run clears the temporaries."""
    model = built_toy / "data" / "toy" / "model"
    before = dvc_md5(model)
    p = built_toy / "params.yaml"
    p.write_text(p.read_text().replace("scale: 2.0", "scale: 7.0"))
    proc = subprocess.Popen([sys.executable, "-m", "paperdag", "stage", "toy:combine"], cwd=built_toy,
                            env={**os.environ, "TOY_SLOW_WRITE": "1"}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while not any(x.name.startswith(TMP_MARK) for x in model.parent.iterdir()):
        assert time.time() < deadline and proc.poll() is None, "the stage never started writing"
        time.sleep(0.1)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert dvc_md5(model) == before and (model / "config.txt").read_text() == "toy\n"
    cli(built_toy, "stage", "toy:combine")
    assert not any(x.name.startswith(TMP_MARK) for x in model.parent.iterdir())
    assert (model / "weights.txt").read_text() != "" and dvc_md5(model) != before


def test_a_stage_clears_only_its_own_temporaries(built_toy: Path) -> None:
    """left and right write into one directory and may run at once (`paperdag run`, `paperdag verify`): a starting
    left removes what a killed left left behind, never right's output being written (it did, and right failed)."""
    out = built_toy / "data" / "toy"
    theirs = out / f"{TMP_MARK}{os.getpid()}-right.safetensors"
    theirs_old = out / f"{TMP_MARK}old-{os.getpid()}-right.safetensors"
    stale = out / f"{TMP_MARK}999999-left.npy"
    for p in (theirs, theirs_old, stale):
        p.write_bytes(b"partial")
    cli(built_toy, "stage", "toy:left")
    assert theirs.read_bytes() == b"partial" and theirs_old.exists()
    assert not stale.exists()


def test_lineage_walks_to_sources_with_runs(built_toy: Path) -> None:
    """lineage of the metrics file reaches table.parquet (by path or md5 prefix) with stage, md5, params and run ids."""
    graph = json.loads(cli(built_toy, "lineage", "data/toy/metrics.json", "--json").stdout)
    nodes = graph["nodes"]
    outs = lock_outs(built_toy)
    table = nodes["data/toy/table.parquet"]
    assert table["stage"] == "toy:make" and table["md5"] == outs["data/toy/table.parquet"]
    assert table["params"]["toy.make"] == {"n": 50, "extra_rows": ""} and len(table["runs"]) == 1
    assert table["runs"][0]["git_commit"] == git(built_toy, "rev-parse", "HEAD").strip()
    assert nodes["stages/toy.py"]["kind"] == "source"
    assert ["data/toy/left.npy", "data/toy/metrics.json"] in graph["edges"]
    by_md5 = json.loads(cli(built_toy, "lineage", outs["data/toy/left.npy"][:10], "--json").stdout)
    assert by_md5["target"] == "data/toy/left.npy"
    assert cli(built_toy, "lineage", "data/toy/metrics.json", "--mermaid").stdout.startswith("graph BT")
    r = cli(built_toy, "lineage", "data/nothing.json", check=False)
    assert r.returncode == 2 and "no stage output" in r.stderr


def test_verify_reproduces_and_detects_tampering(built_toy: Path) -> None:
    """verify reruns in a scratch copy: every toy output reproduces; a tampered workspace output is reported."""
    r = cli(built_toy, "verify", "toy", "--json")
    results = json.loads(r.stdout)
    assert len(results) == 6 and all(x["reproduced"] for x in results)
    assert {x["how"] for x in results if x["path"] != "data/toy/metrics.json"} == {"bit-identical"}
    import numpy as np

    np.save(built_toy / "data/toy/left.npy", np.load(built_toy / "data/toy/left.npy") * 1.01)
    r = cli(built_toy, "verify", "toy:left", "--json", check=False)
    assert r.returncode == 1 and "differ" in json.loads(r.stdout)[0]["how"]


def test_list_and_report(built_toy: Path) -> None:
    """list shows stale stages; report writes HTML with the headline table and the plot embedded, and Markdown."""
    assert "toy  (4/4 up to date)" in cli(built_toy, "list").stdout
    p = built_toy / "params.yaml"
    p.write_text(p.read_text().replace("n: 50", "n: 60"))
    listing = cli(built_toy, "list").stdout
    assert "make                     changed" in listing and "combine                  stale (upstream changed)" in listing
    r = cli(built_toy, "report")
    assert "total" in r.stdout
    html = (built_toy / "report" / "index.html").read_text()
    assert "data/toy/metrics.json: headline" in html and "data:image/png;base64," in html
    assert "<section class=card id='toy'>" in html and "provenance: 6 artifacts" in html
    md = (built_toy / "report" / "README.md").read_text()
    assert "| total |" in md and (built_toy / "report" / "plots" / "data__toy__curve.png").exists()


def test_bytecode_is_not_part_of_any_code_dependency() -> None:
    """`make` compiles bytecode into src/ and stages/, which are code dependencies of every stage: DVC must ignore it,
    or every stage of a fresh clone is stale once installed (this repository's .dvcignore)."""
    from support import REPO

    for path in ("src/paperdag/lm/__pycache__/causal.cpython-311.pyc", "stages/__pycache__/mfc.cpython-311.pyc"):
        r = dvc(REPO, "check-ignore", path, check=False)
        assert r.returncode == 0, f"DVC does not ignore {path}: {r.stdout}{r.stderr}"


def test_in_process_commit_records_a_stage_and_names_a_bad_one(built_toy: Path) -> None:
    """`paperdag run` records each finished stage with DVC's commit in its own process (imported once, dvcmain):
    an output changed by hand is recorded in dvc.lock as `dvc commit --force` would, the caller's working directory
    is left where it was, and a stage DVC does not know is an error naming the command and the stage."""
    from paperdag.engine.errors import PaperdagError

    out = built_toy / "data/toy/left.npy"
    out.write_bytes(out.read_bytes() + b"\0")
    assert "toy-left" in engine_dvc.changed_stages(built_toy, ["toy-left"])
    cwd = os.getcwd()
    engine_dvc.commit(built_toy, "pipelines/toy/dvc.yaml:toy-left")
    assert os.getcwd() == cwd
    assert engine_dvc.locked_outputs(built_toy)["data/toy/left.npy"] == dvc_md5(out)
    assert not engine_dvc.changed_stages(built_toy, ["toy-left"])
    with pytest.raises(PaperdagError, match=r"`dvc commit --force toy-nothing` failed"):
        engine_dvc.commit(built_toy, "toy-nothing")


def test_in_process_status_is_dvc_status(built_toy: Path) -> None:
    """Where DVC's API is imported already (a `paperdag run` a warm server's child runs), the engine asks DVC's
    status in its own process: the same document as `dvc status --json` for a changed param, a changed output and
    a changed stage module, of every dvc.yaml or of one, and the caller's working directory is left where it was."""
    from paperdag.engine import dvcmain

    p = built_toy / "params.yaml"
    p.write_text(p.read_text().replace("scale: 2.0", "scale: 3.0"))
    out = built_toy / "data/toy/left.npy"
    out.write_bytes(out.read_bytes() + b"\0")
    module = built_toy / "src/toy_method/__init__.py"
    module.write_text(module.read_text() + "\n# changed\n")
    cli_doc = json.loads(dvc(built_toy, "status", "--json").stdout)
    cwd = os.getcwd()
    assert dvcmain.status(str(built_toy)) == cli_doc
    assert os.getcwd() == cwd
    assert {"toy-combine", "pipelines/toy/dvc.yaml:toy-left"} <= set(cli_doc)
    # one dvc.yaml only (what a run of one pipeline asks): DVC reads that file, in process or not
    own = json.loads(dvc(built_toy, "status", "--json", "pipelines/toy/dvc.yaml").stdout)
    assert dvcmain.status(str(built_toy), ["pipelines/toy/dvc.yaml"]) == own
    assert set(engine_dvc.status(built_toy, ["pipelines/toy/dvc.yaml"])) == {"toy-left", "toy-right"}


def test_a_half_written_dvc_lock_is_read_again_not_taken_for_the_whole(tmp_path: Path) -> None:
    """DVC rewrites dvc.lock in place while a stage is recorded; a stage process reading it at that moment (paperdag
    stable's record, after its work) once failed with "'NoneType' object is not subscriptable" and lost the stage.
    A half-written file (an outs entry cut to `-`) is read again until whole; one that stays broken is an error that
    names the file."""
    import threading

    from paperdag.engine.errors import PaperdagError

    whole = "schema: '2.0'\nstages:\n  a:\n    cmd: x\n    outs:\n    - path: data/a.txt\n      md5: 1234\n      size: 3\n"
    half = whole[: whole.index("- path")] + "    -\n"
    path = tmp_path / "dvc.lock"
    path.write_text(half)
    assert yaml.safe_load(half)["stages"]["a"]["outs"] == [None]  # what the stage read
    writer = threading.Timer(0.1, path.write_text, [whole])
    writer.start()
    try:
        assert engine_dvc.locked_outputs(tmp_path) == {"data/a.txt": 1234}
    finally:
        writer.join()
    path.write_text(half)
    try:
        engine_dvc.lock(tmp_path, attempts=3)
    except PaperdagError as e:
        assert "dvc.lock: not a readable dvc.lock after 3 reads" in str(e)
    else:
        raise AssertionError("a dvc.lock that stays half-written was taken as whole")


def test_render_moves_lock_entries_to_the_dvc_yaml_that_declares_their_stage_and_a_move_hides_no_change(
        built_toy: Path) -> None:
    """A checkout of the layout before one dvc.yaml per pipeline (every stage in the root dvc.yaml, every entry in
    the root dvc.lock): `paperdag render` writes pipelines/toy/dvc.yaml and moves its stages' entries beside it, as
    they are, so nothing reruns; a stage whose param changed before the move is still stale after it (DVC compares
    the moved entry with the stage as it is)."""
    from paperdag.engine.render import render
    from paperdag.engine.spec import load_project

    root_lock, own = built_toy / "dvc.lock", built_toy / "pipelines/toy/dvc.lock"
    entries = engine_dvc.lock(built_toy)["stages"]
    root_lock.write_text(yaml.safe_dump({"schema": "2.0", "stages": entries}, sort_keys=False))
    own.unlink()
    doc = {"stages": {n: e for text in (built_toy / "dvc.yaml", built_toy / "pipelines/toy/dvc.yaml")
                      for n, e in yaml.safe_load(text.read_text())["stages"].items()}}
    for e in doc["stages"].values():
        e.pop("wdir", None)
    (built_toy / "dvc.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    (built_toy / "pipelines/toy/dvc.yaml").unlink()
    assert changed(built_toy) == set()  # the layout before, as DVC sees it: up to date
    p = built_toy / "params.yaml"
    p.write_text(p.read_text().replace("seconds: 0.0", "seconds: 0.01"))
    assert render(load_project(built_toy)) is False
    assert sorted(yaml.safe_load(root_lock.read_text())["stages"]) == ["toy-combine"]
    assert sorted(yaml.safe_load(own.read_text())["stages"]) == ["toy-left", "toy-make", "toy-right"]
    assert engine_dvc.lock(built_toy)["stages"] == entries
    assert changed(built_toy) == {"toy-left", "toy-right"}
    p.write_text(p.read_text().replace("seconds: 0.01", "seconds: 0.0"))
    assert changed(built_toy) == set()
    assert render(load_project(built_toy), check=True) is True


def test_an_interrupted_move_is_finished_by_the_next_render_and_the_moved_entry_wins(built_toy: Path) -> None:
    """The dvc.yaml files are current but an entry is still in the lock of the file that declared its stage before
    (a move that failed or was interrupted, with a stale copy of the entry already in the new lock): the reader, as
    DVC, takes the copy beside the declaring dvc.yaml and not the misplaced entry; `render --check` calls it drift,
    and render moves the entry (replacing the copy), after which DVC and the reader agree that nothing is stale."""
    from paperdag.engine.render import render
    from paperdag.engine.spec import load_project

    root_lock, own = built_toy / "dvc.lock", built_toy / "pipelines/toy/dvc.lock"
    entries = engine_dvc.lock(built_toy)["stages"]
    root = yaml.safe_load(root_lock.read_text())
    root["stages"]["toy-left"] = entries["toy-left"]
    root_lock.write_text(yaml.safe_dump(root, sort_keys=False))
    mine = yaml.safe_load(own.read_text())
    mine["stages"]["toy-left"] = {**entries["toy-left"], "cmd": "stale"}
    own.write_text(yaml.safe_dump(mine, sort_keys=False))
    assert engine_dvc.lock(built_toy)["stages"]["toy-left"]["cmd"] == "stale"  # what DVC reads too
    assert "toy-left" in changed(built_toy)
    project = load_project(built_toy)
    assert render(project, check=True) is False
    assert render(project) is False
    assert sorted(yaml.safe_load(root_lock.read_text())["stages"]) == ["toy-combine"]
    assert engine_dvc.lock(built_toy)["stages"] == entries
    assert changed(built_toy) == set()
    assert render(project, check=True) is True


def test_the_engines_dvc_parses_params_yaml_once_a_version(built_toy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """DVC parses params.yaml for every stage that lists params and for every dvc.yaml that reads it for `${...}`
    (each pipeline's `vars:`, as pipelines/<p>/../../params.yaml); the engine's DVC (dvcmain) parses it once per
    version of the file, and DVC's status is the same."""
    from dvc.utils.serialize import _yaml

    from paperdag.engine import dvcmain

    dvcmain.preload()
    parsed: list[str] = []
    real = _yaml.parse_yaml

    def parse(text: str, path: str, typ: str = "safe") -> Any:
        parsed.append(path)
        return real(text, path, typ)

    monkeypatch.setattr(_yaml, "parse_yaml", parse)
    p = built_toy / "params.yaml"
    p.write_text(p.read_text() + "\n")  # a new version: not parsed in this process yet
    assert dvcmain.status(str(built_toy)) == {}
    assert len([x for x in parsed if x.endswith("params.yaml")]) == 1, parsed

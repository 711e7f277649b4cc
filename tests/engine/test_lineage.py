"""`paperdag lineage` (engine/lineage.py) on a hand-written dvc.lock and run index: the upstream walk, which runs
count as an artifact's (its md5 and dvc.lock's params), md5-prefix targets, and the tree and Mermaid views."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest
import yaml

from paperdag.engine.errors import PaperdagError
from paperdag.engine.tracking import canonical_json

lineage = importlib.import_module("paperdag.engine.lineage")  # the module (paperdag.engine.lineage is its function)

PARAMS_B = {"params.yaml": {"p.b": 2}}
LOCK = {"schema": "2.0", "stages": {
    "p-a": {"cmd": "paperdag stage p:a", "deps": [{"path": "stages/p.py", "md5": "c0de" * 8}],
            "params": {"params.yaml": {"p.a": 1}}, "outs": [{"path": "data/a.json", "md5": "abcdef11" * 4}]},
    "p-b": {"cmd": "paperdag stage p:b", "deps": [{"path": "data/a.json", "md5": "abcdef11" * 4},
                                                  {"path": "stages/p.py", "md5": "c0de" * 8}],
            "params": PARAMS_B, "outs": [{"path": "data/b.json", "md5": "abcdef22" * 4}]},
}}


def _run(run_id: str, params: str, start_ms: int) -> dict[str, str | int]:
    return {"run_id": run_id, "experiment": "p", "git_commit": "abc1234567", "git_dirty": "false", "parent_run_id": "",
            "prefect_flow_run_id": "", "params": params, "start_ms": start_ms}


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "dvc.lock").write_text(yaml.safe_dump(LOCK))
    runs: dict[tuple[str, str], list[Any]] = {
        ("data/b.json", "abcdef22" * 4): [_run("run-new", canonical_json(PARAMS_B), 2), _run("run-other", '{"x":1}', 3),
                                          _run("run-legacy", "", 1)],
    }
    monkeypatch.setattr(lineage, "runs_by_output", lambda root: runs)
    return tmp_path


def test_trace_walks_dvc_lock_upstream_to_the_sources(root: Path) -> None:
    """From b: b <- a <- stages/p.py, b <- stages/p.py; each artifact with its stage, md5 and params; code a leaf."""
    graph = lineage.trace(root, "data/b.json")
    assert graph["target"] == "data/b.json"
    assert {p: n["kind"] for p, n in graph["nodes"].items()} == {
        "data/b.json": "artifact", "data/a.json": "artifact", "stages/p.py": "source"}
    assert graph["nodes"]["data/a.json"]["stage"] == "p:a" and graph["nodes"]["data/a.json"]["params"] == {"p.a": 1}
    assert sorted(map(tuple, graph["edges"])) == [("data/a.json", "data/b.json"), ("stages/p.py", "data/a.json"),
                                                  ("stages/p.py", "data/b.json")]


def test_an_artifacts_runs_are_those_with_its_md5_and_dvc_locks_params(root: Path) -> None:
    """A run that wrote the same bytes under other params is not its lineage; one logged before params were tagged
    is kept, marked md5 only; newest first as the index gives them."""
    runs = lineage.trace(root, "data/b.json")["nodes"]["data/b.json"]["runs"]
    assert [(r["run_id"], r["matched"]) for r in runs] == [("run-new", "md5 and params"), ("run-legacy", "md5 only")]
    assert lineage.trace(root, "data/a.json")["nodes"]["data/a.json"]["runs"] == []


def test_a_target_may_be_an_md5_prefix_and_a_wrong_one_is_named(root: Path) -> None:
    assert lineage.trace(root, "abcdef11")["target"] == "data/a.json"
    with pytest.raises(PaperdagError, match="md5 prefix abcdef matches several artifacts: data/a.json, data/b.json"):
        lineage.trace(root, "abcdef")
    with pytest.raises(PaperdagError, match="data/zzz.json: no stage output in dvc.lock has this path or md5"):
        lineage.trace(root, "data/zzz.json")
    with pytest.raises(PaperdagError, match="is outside the project"):
        lineage.trace(root, "/elsewhere/data/a.json")


def test_tree_and_mermaid_show_every_node_once(root: Path) -> None:
    """The tree names each artifact's stage, params and runs, a node reached twice is '(see above)'; Mermaid has one
    node per path and one arrow per edge."""
    graph = lineage.trace(root, "data/b.json")
    text = lineage.tree(graph)
    first = text.splitlines()[0]
    assert first.startswith("data/b.json  md5 abcdef22abcd  <- p:b  runs: run-new @ abc1234567, run-legacy @ abc1234567")
    assert "(md5 only: no params recorded)" in first and "params: p.b=2" in text
    assert text.count("stages/p.py") == 2 and "(see above)" not in text  # a source is shown under each consumer
    chart = lineage.mermaid(graph).splitlines()
    assert chart[0] == "graph BT" and sum("-->" in line for line in chart) == 3 and len(chart) == 1 + 3 + 3

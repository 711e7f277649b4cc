"""`paperdag lineage`: from an artifact (path or md5) up to its sources, through dvc.lock and MLflow.

For each artifact: the md5 DVC recorded, the stage that wrote it, that stage's params, and the MLflow runs
whose recorded output md5 matches and whose recorded params (tracking.PARAMS_TAG) are dvc.lock's for that stage
(with the git commit each ran at): the same bytes written under other params are not this artifact's lineage. A
run from before the params tag existed is matched by md5 alone and marked so. Code files are leaves.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from paperdag.engine import dvc
from paperdag.engine.errors import PaperdagError
from paperdag.engine.params import PARAMS_FILE
from paperdag.engine.tracking import OUT_TAG, PARAMS_TAG, canonical_json


def _lock_index(root: Path) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """out path -> {dvc_stage, md5, deps, params, locked_params (canonical JSON, as PARAMS_TAG), cmd}; and md5 ->
    out path."""
    lock = dvc.lock(root)
    outs: dict[str, dict[str, Any]] = {}
    for name, entry in (lock.get("stages") or {}).items():
        deps = {d["path"]: d.get("md5", "") for d in entry.get("deps", [])}
        # params.yaml's keys as they are; another file's (a claims stage's pipeline file) as FILE:KEY
        params = {(k if file == PARAMS_FILE else f"{file}:{k}"): v
                  for file, values in (entry.get("params") or {}).items() for k, v in values.items()}
        for o in entry.get("outs", []):
            outs[o["path"]] = {"dvc_stage": name, "md5": o.get("md5", ""), "deps": deps, "params": params,
                               "locked_params": canonical_json(entry.get("params") or {}), "cmd": entry.get("cmd", "")}
    return outs, {v["md5"]: k for k, v in outs.items()}


def _resolve(root: Path, target: str, outs: dict[str, Any], by_md5: dict[str, str]) -> str:
    rel = target
    p = Path(target)
    if p.is_absolute():
        try:
            rel = p.resolve().relative_to(root).as_posix()
        except ValueError:
            raise PaperdagError(f"{target} is outside the project {root}") from None
    rel = rel.rstrip("/")
    if rel in outs:
        return rel
    matches = [path for md5, path in by_md5.items() if len(target) >= 6 and md5.startswith(target)]
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        raise PaperdagError(f"md5 prefix {target} matches several artifacts: {', '.join(sorted(matches))}")
    raise PaperdagError(f"{target}: no stage output in dvc.lock has this path or md5 (run the pipeline first?)")


def runs_by_output(root: Path) -> dict[tuple[str, str], list[dict[str, str]]]:
    """(out path, md5) -> the FINISHED MLflow runs that recorded writing it, newest first (read through the run
    index)."""
    from paperdag.engine.records import indexed_runs

    found: dict[tuple[str, str], list[dict[str, str]]] = {}
    for run in indexed_runs(root):
        if run["status"] != "FINISHED":
            continue
        tags = run["tags"]
        for key, md5 in tags.items():
            if key.startswith(OUT_TAG):
                found.setdefault((key[len(OUT_TAG):], md5), []).append(
                    {
                        "run_id": run["run_id"],
                        "experiment": run["experiment"],
                        "git_commit": tags.get("git.commit", ""),
                        "git_dirty": tags.get("git.dirty", ""),
                        "parent_run_id": tags.get("mlflow.parentRunId", ""),
                        "prefect_flow_run_id": tags.get("prefect.flow_run_id", ""),
                        "params": tags.get(PARAMS_TAG, ""),  # "": logged before the params tag existed
                        "start_ms": run.get("start_ms", 0),
                    }
                )
    for runs in found.values():
        runs.sort(key=lambda r: int(r["start_ms"]), reverse=True)
    return found


def matching_runs(runs: list[dict[str, str]], locked_params: str) -> list[dict[str, Any]]:
    """The runs (of one out md5) whose recorded params are dvc.lock's, each with `matched` "md5 and params"; a run
    that recorded no params is kept, `matched` "md5 only"."""
    return [{**r, "matched": "md5 and params" if r["params"] else "md5 only"}
            for r in runs if r["params"] in ("", locked_params)]


def trace(root: Path, target: str) -> dict[str, Any]:
    """The upstream graph of an artifact: {'target', 'nodes': {path: node}, 'edges': [[upstream, downstream]]}."""
    root = Path(root).resolve()
    outs, by_md5 = _lock_index(root)
    start = _resolve(root, target, outs, by_md5)
    runs = runs_by_output(root)
    nodes: dict[str, Any] = {}
    edges: list[list[str]] = []
    todo = [start]
    while todo:
        path = todo.pop()
        if path in nodes:
            continue
        if path not in outs:
            nodes[path] = {"kind": "source"}
            continue
        info = outs[path]
        stage = info["dvc_stage"]
        address = info["cmd"].removeprefix("paperdag stage ").strip() or stage
        nodes[path] = {
            "kind": "artifact",
            "md5": info["md5"],
            "stage": address,
            "params": info["params"],
            "runs": matching_runs(runs.get((path, info["md5"]), []), info["locked_params"]),
        }
        for dep, md5 in info["deps"].items():
            edges.append([dep, path])
            if dep not in outs:
                nodes.setdefault(dep, {"kind": "source", "md5": md5})
            todo.append(dep)
    return {"target": start, "nodes": nodes, "edges": edges}


lineage = trace  # the name paperdag.engine exports


def tree(graph: dict[str, Any]) -> str:
    nodes, edges = graph["nodes"], graph["edges"]
    parents: dict[str, list[str]] = {}
    for up, down in edges:
        parents.setdefault(down, []).append(up)
    lines: list[str] = []
    shown: set[str] = set()

    def describe(path: str) -> str:
        n = nodes[path]
        md5 = n.get("md5", "")[:12]
        if n["kind"] == "source":
            return f"{path}  [source] md5 {md5}"
        runs = ", ".join(f"{r['run_id'][:12]} @ {r['git_commit'][:10]}{'+dirty' if r['git_dirty'] == 'true' else ''}"
                         f"{' (md5 only: no params recorded)' if r['matched'] == 'md5 only' else ''}" for r in n["runs"])
        return f"{path}  md5 {md5}  <- {n['stage']}  runs: {runs or 'none recorded'}"

    def walk(path: str, prefix: str, last: bool, top: bool) -> None:
        head = prefix + ("" if top else "└─ " if last else "├─ ")
        if path in shown and parents.get(path):
            lines.append(f"{head}{path}  (see above)")
            return
        shown.add(path)
        lines.append(head + describe(path))
        child_prefix = prefix + ("" if top else "   " if last else "│  ")
        n = nodes[path]
        if n["kind"] == "artifact" and n["params"]:
            params = ", ".join(f"{k}={_short(v)}" for k, v in n["params"].items())
            lines.append(child_prefix + f"   params: {params}")
        ups = sorted(parents.get(path, []), key=lambda p: (nodes[p]["kind"] == "source", p))
        for i, up in enumerate(ups):
            walk(up, child_prefix, i == len(ups) - 1, False)

    walk(graph["target"], "", True, True)
    return "\n".join(lines)


def mermaid(graph: dict[str, Any]) -> str:
    ids = {path: f"n{i}" for i, path in enumerate(sorted(graph["nodes"]))}
    lines = ["graph BT"]
    for path, n in sorted(graph["nodes"].items()):
        label = f"{path}<br/>{n.get('md5', '')[:8]}"
        if n["kind"] == "artifact":
            label += f"<br/>{n['stage']}"
            lines.append(f'  {ids[path]}["{label}"]')
        else:
            lines.append(f'  {ids[path]}(["{label}"])')
    for up, down in graph["edges"]:
        lines.append(f"  {ids[up]} --> {ids[down]}")
    return "\n".join(lines)


def _short(value: Any, width: int = 240) -> str:
    """A param's value on the tree's one line, cut at `width` characters (--json has it whole)."""
    text = str(value)
    return text if len(text) <= width else text[:width - 3] + "..."

"""`paperdag audit`: for every output dvc.lock records, check each link from it back to what made it, and name the
broken ones.

Links, in this order (LINKS):

- file: the workspace file has dvc.lock's md5; with no workspace file (a fresh clone), DVC's local cache holds it (a
  directory: its .dir manifest and every file the manifest lists). A workspace file that differs is broken even when
  the cache still holds the locked version (`dvc checkout` restores it).
- run: at least one FINISHED MLflow run recorded writing that md5 (tag paperdag.out.<path>). Where several did and
  they disagree on their params (paperdag.params) or on a code file both read, it is a warning: the run checked
  below is the one with dvc.lock's params, and the other links hold it to dvc.lock; the others are the same bytes
  from other code (a refactor that kept the output) or other params (a param that does not reach it, worth a look).
  Broken would make every behaviour-preserving change fail the audit for as long as MLflow keeps the older runs.
- params: the run's paperdag.params equals the stage's `params:` in dvc.lock. A run logged before runs carried that
  tag is a warning (its params cannot be compared; rerunning the stage records them).
- commit: the run's git.commit exists in the repository and is an ancestor of HEAD. A run made with uncommitted
  changes (git.dirty true) is a warning, not broken: its commit alone does not give its code, but the chain link
  checks the md5 of every code dep it read against dvc.lock.
- chain: every dep md5 the run recorded (paperdag.dep.<path>) is the md5 dvc.lock records for that dep in this
  stage's entry, and no dep is missing on either side; a dep another stage writes has, in this stage's entry, that
  stage's out md5 in dvc.lock; every source dep has an md5 in dvc.lock. A run logged before runs tagged every dep
  (and their params) tagged only its data inputs: the deps it did not record are a warning.
- environment: the run recorded its numerics (numerics.mode) and environment (env.python and a package version).
- verify: the status from the newest verify run (verify.py) that checked this md5: bit-identical, within tolerance
  or volatile (ok), differs (broken), none (info: not verified yet).

"The run" is the newest run that wrote the md5 with dvc.lock's params, else the newest that wrote it.

`audit(root, pipelines=None)` returns (a stable shape: the HTML report builds on it):

    {"ok": bool,                               # no output has a link that is not ok
     "head": str,                              # the commit audited ("" outside git)
     "pipelines": {name: {
         "ok": bool,
         "outputs": [{                         # dvc.lock's order
             "path": str, "md5": str,          # as dvc.lock records them
             "stage": str, "dvc_stage": str,   # "pipeline:stage" and dvc.lock's name of it
             "ok": bool,
             "run_id": str | None,             # the run checked
             "runs": [str],                    # every FINISHED run that wrote this md5, newest first
             "verify": str,                    # verify.STATUSES or "not verified yet"
             "links": [{"link": str,           # every one of LINKS, in that order
                        "ok": bool,            # False: "broken" or "unchecked"
                        "status": str,         # "ok", "warning", "info", "broken", "unchecked" (needs a run: none)
                        "detail": str}]}]}}}

It reads dvc.lock, the run index (records.indexed_runs: no MLflow import unless the index must be rebuilt), hashes
each output once, and calls git once per distinct commit.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

from paperdag.engine import dvc
from paperdag.engine.errors import PaperdagError
from paperdag.engine.fsutil import dvc_cache_file, dvc_md5, file_md5
from paperdag.engine.records import flatten
from paperdag.engine.tracking import CODE_DIRS, DEP_TAG, OUT_TAG, PARAMS_TAG, canonical_json

LINKS = ("file", "run", "params", "commit", "chain", "environment", "verify")
NOT_VERIFIED = "not verified yet"


def audit(root: Path | str, pipelines: list[str] | None = None) -> dict[str, Any]:
    """Every output of dvc.lock (of `pipelines`, default all) with its links; see the module docstring."""
    from paperdag.engine.records import indexed_runs
    from paperdag.engine.verify import VERIFY_MD5_TAG, VERIFY_TAG

    root = Path(root).resolve()
    lock = dvc.lock(root).get("stages") or {}
    address = {name: _address(name, entry) for name, entry in lock.items()}
    known = {p.stem for p in (root / "pipelines").glob("*.yaml")} | {a.partition(":")[0] for a in address.values()}
    unknown = sorted(set(pipelines or ()) - known)
    if unknown:
        raise PaperdagError(f"no pipeline {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    wanted = set(pipelines or known)
    locked_out = {o["path"]: (o.get("md5", ""), name) for name, e in lock.items() for o in e.get("outs") or []}

    by_out: dict[tuple[str, str], list[dict[str, Any]]] = {}
    verified: dict[tuple[str, str], tuple[int, str]] = {}  # (path, md5) -> the newest verify's (start, status)
    for run in indexed_runs(root):
        if run["status"] != "FINISHED":
            continue
        for key, value in run["tags"].items():
            if key.startswith(OUT_TAG):
                by_out.setdefault((key[len(OUT_TAG):], value), []).append(run)
            elif key.startswith(VERIFY_MD5_TAG):
                path = key[len(VERIFY_MD5_TAG):]
                seen = verified.get((path, value))
                if seen is None or run.get("start_ms", 0) >= seen[0]:
                    verified[(path, value)] = (run.get("start_ms", 0), run["tags"].get(VERIFY_TAG + path, "?"))
    for runs in by_out.values():
        runs.sort(key=lambda r: -r.get("start_ms", 0))

    git = _Git(root)
    result: dict[str, Any] = {"ok": True, "head": git.head, "pipelines": {}}
    for p in sorted(wanted):
        result["pipelines"][p] = {"ok": True, "outputs": []}
    for name, entry in lock.items():
        pipeline = address[name].partition(":")[0]
        if pipeline not in wanted:
            continue
        for o in entry.get("outs") or []:
            path, md5 = o["path"], o.get("md5", "")
            runs = by_out.get((path, md5), [])
            out = _audit_output(root, entry, path, md5, runs, locked_out, git, verified.get((path, md5)))
            out = {"path": path, "md5": md5, "stage": address[name], "dvc_stage": name, **out}
            result["pipelines"][pipeline]["outputs"].append(out)
            if not out["ok"]:
                result["pipelines"][pipeline]["ok"] = result["ok"] = False
    return result


def _address(dvc_name: str, entry: dict[str, Any]) -> str:
    """`pipeline:stage` from the stage's command (`paperdag stage P:S`), else from its dvc.yaml name."""
    cmd = str(entry.get("cmd", ""))
    if cmd.startswith("paperdag stage "):
        return cmd.removeprefix("paperdag stage ").strip()
    return dvc_name.replace("-", ":", 1)


def _link(link: str, status: str, detail: str) -> dict[str, Any]:
    return {"link": link, "ok": status in ("ok", "warning", "info"), "status": status, "detail": detail}


def _audit_output(root: Path, entry: dict[str, Any], path: str, md5: str, runs: list[dict[str, Any]],
                  locked_out: dict[str, tuple[str, str]], git: _Git, verified: tuple[int, str] | None) -> dict[str, Any]:
    locked_params = canonical_json(entry.get("params") or {})
    run = next((r for r in runs if r["tags"].get(PARAMS_TAG) == locked_params), runs[0] if runs else None)
    lock_deps = {d["path"]: d.get("md5", "") for d in entry.get("deps") or []}
    links = [_file_link(root, path, md5), _run_link(runs, md5, locked_out)]
    if run is None:
        links += [_link(name, "unchecked", "no run to check") for name in ("params", "commit")]
    else:
        links += [_params_link(run, locked_params), _commit_link(run, git)]
    links.append(_chain_link(run, lock_deps, locked_out))
    links.append(_link("environment", "unchecked", "no run to check") if run is None else _environment_link(run))
    status = verified[1] if verified else NOT_VERIFIED
    links.append(_link("verify", "info" if verified is None else "broken" if status == "differs" else "ok",
                       f"the newest verify of md5 {md5[:12]}: {status}" if verified else NOT_VERIFIED))
    return {"ok": all(x["ok"] for x in links), "run_id": run["run_id"] if run else None,
            "runs": [r["run_id"] for r in runs], "verify": status, "links": links}


def _file_link(root: Path, path: str, md5: str) -> dict[str, Any]:
    if not md5:
        return _link("file", "broken", "dvc.lock records no md5")
    p = root / path
    if p.exists():
        got = dvc_md5(p)
        if got == md5:
            return _link("file", "ok", "the workspace file has dvc.lock's md5")
        cached = " (DVC's cache holds the locked version: `dvc checkout` restores it)" if _cache_problem(root, md5) is None else ""
        return _link("file", "broken", f"the workspace file has md5 {got[:12]}, dvc.lock {md5[:12]}{cached}")
    problem = _cache_problem(root, md5)
    if problem is None:
        return _link("file", "ok", "not in the workspace; DVC's cache holds dvc.lock's md5")
    return _link("file", "broken", f"not in the workspace, and {problem}")


def _cache_problem(root: Path, md5: str) -> str | None:
    """None when DVC's local cache holds `md5` whole (a directory: its manifest and every file it lists)."""
    f = dvc_cache_file(root, md5)
    if not f.is_file():
        return f"DVC's cache has no {md5[:12]} (`dvc pull`?)"
    if not md5.endswith(".dir"):
        return None if file_md5(f) == md5 else f"DVC's cache entry {f.relative_to(root)} is corrupt"
    try:
        entries = json.loads(f.read_text())
    except ValueError:
        return f"DVC's manifest {f.relative_to(root)} is not JSON"
    listing = sorted(({"md5": e["md5"], "relpath": e["relpath"]} for e in entries), key=lambda e: e["relpath"])
    if hashlib.md5(json.dumps(listing, sort_keys=True).encode()).hexdigest() + ".dir" != md5:
        return f"DVC's manifest {f.relative_to(root)} does not hash to {md5[:12]}"
    for e in listing:
        c = dvc_cache_file(root, e["md5"])
        if not c.is_file() or file_md5(c) != e["md5"]:
            return f"DVC's cache lacks {e['relpath']} of it (md5 {e['md5'][:12]})"
    return None


def _code(run: dict[str, Any], locked_out: dict[str, Any]) -> dict[str, str]:
    return {k[len(DEP_TAG):]: v for k, v in run["tags"].items()
            if k.startswith(DEP_TAG) and k[len(DEP_TAG):].startswith(CODE_DIRS) and k[len(DEP_TAG):] not in locked_out}


def _run_link(runs: list[dict[str, Any]], md5: str, locked_out: dict[str, Any]) -> dict[str, Any]:
    if not runs:
        return _link("run", "broken", f"no FINISHED MLflow run recorded writing md5 {md5[:12]} (its run deleted, or "
                                      "written by no paperdag stage)")
    params: dict[str, dict[str, Any]] = {}
    for r in runs:
        if PARAMS_TAG in r["tags"]:
            params.setdefault(r["tags"][PARAMS_TAG], r)
    if len(params) > 1:
        a, b = list(params.values())[:2]
        return _link("run", "warning", f"{len(runs)} runs wrote these bytes with different params (a param that "
                                       f"does not reach this output?): run {a['run_id'][:8]} vs "
                                      f"{b['run_id'][:8]}: {_params_diff(a['tags'][PARAMS_TAG], b['tags'][PARAMS_TAG])}")
    # code: a file both runs read at different md5s (a run logged before runs tagged every code dep, or when code
    # deps were whole packages, recorded other paths: those cannot disagree)
    newest = _code(runs[0], locked_out)
    for r in runs[1:]:
        other = _code(r, locked_out)
        differ = sorted(k for k in set(newest) & set(other) if newest[k] != other[k])
        if differ:
            return _link("run", "warning", f"{len(runs)} runs wrote these bytes with different code (a change that "
                                           f"kept this output): run {runs[0]['run_id'][:8]} vs {r['run_id'][:8]} read "
                                           f"{', '.join(differ[:3])} at other md5s")
    more = f" ({len(runs)} runs agree)" if len(runs) > 1 else ""
    return _link("run", "ok", f"run {runs[0]['run_id'][:12]}{more}")


def _params_diff(ours: str, theirs: str, theirs_name: str = "") -> str:
    """The keys whose values differ, `key ours != [theirs_name ]theirs`, params.yaml's keys without its name."""

    def flat(text: str) -> dict[str, Any]:
        doc = json.loads(text) if text else {}
        return {k.removeprefix("params.yaml."): v for k, v in flatten(doc).items()}

    a, b = flat(ours), flat(theirs)
    keys = sorted(k for k in set(a) | set(b) if a.get(k, "(absent)") != b.get(k, "(absent)"))
    shown = [f"{k} {_show(a.get(k, '(absent)'))} != {theirs_name}{_show(b.get(k, '(absent)'))}" for k in keys[:3]]
    return "; ".join(shown) + (f"; and {len(keys) - 3} more" if len(keys) > 3 else "")


def _show(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v)


def _params_link(run: dict[str, Any], locked_params: str) -> dict[str, Any]:
    recorded = run["tags"].get(PARAMS_TAG)
    rid = run["run_id"][:8]
    if recorded is None:
        return _link("params", "warning", f"run {rid} was logged before runs recorded their params as dvc.lock does "
                                          "(rerun the stage to record them)")
    if recorded == locked_params:
        return _link("params", "ok", "the run's params are dvc.lock's")
    return _link("params", "broken", f"run {rid} params: {_params_diff(recorded, locked_params, 'dvc.lock ')}")


class _Git:
    """HEAD, and whether a commit is an ancestor of it: one `git` call per distinct commit."""

    def __init__(self, root: Path) -> None:
        self.root = root
        r = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True)
        self.head = r.stdout.strip() if r.returncode == 0 else ""
        self._seen: dict[str, str] = {}

    def ancestry(self, commit: str) -> str:
        """"ancestor", "not an ancestor" or "unknown" (not a commit of this repository)."""
        if commit not in self._seen:
            r = subprocess.run(["git", "merge-base", "--is-ancestor", commit, "HEAD"], cwd=self.root,
                               capture_output=True, text=True)
            self._seen[commit] = {0: "ancestor", 1: "not an ancestor"}.get(r.returncode, "unknown")
        return self._seen[commit]


def _commit_link(run: dict[str, Any], git: _Git) -> dict[str, Any]:
    commit, rid = run["tags"].get("git.commit", ""), run["run_id"][:8]
    if commit in ("", "none"):
        return _link("commit", "broken", f"run {rid} recorded no git commit")
    state = git.ancestry(commit) if git.head else "unknown"
    if state == "unknown":
        return _link("commit", "broken", f"run {rid} ran at {commit[:10]}, which is not a commit of this repository")
    if state == "not an ancestor":
        return _link("commit", "broken", f"run {rid} ran at {commit[:10]}, not an ancestor of HEAD {git.head[:10]} "
                                         "(history rewritten, or another branch)")
    if run["tags"].get("git.dirty") == "true":
        return _link("commit", "warning", f"run {rid} ran at {commit[:10]} with uncommitted changes (its code deps' "
                                          "md5s are checked by the chain link)")
    return _link("commit", "ok", f"{commit[:10]}, an ancestor of HEAD")


def _chain_link(run: dict[str, Any] | None, lock_deps: dict[str, str],
                locked_out: dict[str, tuple[str, str]]) -> dict[str, Any]:
    problems = []
    for dep, md5 in lock_deps.items():
        if dep in locked_out and md5 != locked_out[dep][0]:
            problems.append(f"{dep} is {md5[:12]} in this stage's entry but {locked_out[dep][0][:12]} as "
                            f"{locked_out[dep][1]}'s out (rerun this stage)")
        elif not md5:
            problems.append(f"{dep} has no md5 in dvc.lock")
    unrecorded = []
    if run is not None:
        rid = run["run_id"][:8]
        read = {k[len(DEP_TAG):]: v for k, v in run["tags"].items() if k.startswith(DEP_TAG)}
        for dep, md5 in lock_deps.items():
            if dep not in read:
                unrecorded.append(dep)
            elif read[dep] != md5:
                problems.append(f"run {rid} read {dep} at {read[dep][:12]}, dvc.lock {md5[:12]}")
        problems += [f"run {rid} read {dep}, not a dep in dvc.lock" for dep in sorted(set(read) - set(lock_deps))]
    legacy = run is not None and PARAMS_TAG not in run["tags"]
    if run is not None and unrecorded and not legacy:
        problems.append(f"run {run['run_id'][:8]} recorded no md5 of {', '.join(unrecorded)}")
    if problems:
        more = f"; and {len(problems) - 3} more" if len(problems) > 3 else ""
        return _link("chain", "broken", "; ".join(problems[:3]) + more)
    if run is not None and unrecorded:  # runs logged before runs tagged their code deps (and params) tagged only their data inputs
        return _link("chain", "warning", f"run {run['run_id'][:8]} was logged before runs recorded every dep; it did "
                                         f"not record {', '.join(unrecorded)}")
    if run is None:
        return _link("chain", "unchecked", "dvc.lock's deps close the chain; no run to check what it read")
    return _link("chain", "ok", f"the run read every dep at dvc.lock's md5 ({len(lock_deps)} deps)")


def _environment_link(run: dict[str, Any]) -> dict[str, Any]:
    tags = run["tags"]
    missing = [t for t in ("numerics.mode", "env.python") if t not in tags]
    if not any(k.startswith("env.") and k not in ("env.python", "env.platform", "env.cpu_count") for k in tags):
        missing.append("env.<package> versions")
    if missing:
        return _link("environment", "broken", f"run {run['run_id'][:8]} recorded no {', '.join(missing)}")
    return _link("environment", "ok", f"numerics {tags['numerics.mode']}, python {tags['env.python']}")


def format_audit(result: dict[str, Any]) -> str:
    """A table per pipeline: one line per output, its links that are not ok named with why."""
    lines: list[str] = []
    for name, p in result["pipelines"].items():
        outs = p["outputs"]
        bad = sum(not o["ok"] for o in outs)
        lines.append(f"{name}: {len(outs) - bad}/{len(outs)} outputs with every link ok" if outs
                     else f"{name}: no output in dvc.lock")
        width = max((len(o["path"]) for o in outs), default=0)
        for o in outs:
            shown = [x for x in o["links"] if x["status"] in ("broken", "warning")]
            unchecked = [x["link"] for x in o["links"] if x["status"] == "unchecked"]
            mark = "BAD " if not o["ok"] else "WARN" if shown else "OK  "
            notes = "; ".join(f"{x['link']}{'' if x['ok'] else ' BROKEN'}: {x['detail']}" for x in shown)
            if unchecked:
                notes += f" ({', '.join(unchecked)} unchecked)"
            lines.append(f"  {mark} {o['path'].ljust(width)}  {o['md5'][:8]}  verify: {o['verify']}"
                         + (f"  | {notes}" if notes else ""))
    n = sum(len(p["outputs"]) for p in result["pipelines"].values())
    broken = sum(not o["ok"] for p in result["pipelines"].values() for o in p["outputs"])
    lines.append(f"{n - broken}/{n} outputs with every link ok" + ("" if result["ok"] else f"; {broken} broken"))
    return "\n".join(lines)

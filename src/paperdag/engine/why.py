"""`paperdag why`: why a stage is stale, in terms a person acts on.

DVC decides what is stale (`dvc status`, the verdict `dvc repro` acts on); dvc.lock, params.yaml, the stage's deps
and outs as `paperdag render` declares them and the producers of its inputs give the details: a param's old and new
value, the code file that changed, the input that changed and the upstream stage it comes from, the numerics setting,
deps or outs added or removed, outputs missing, a stage never run. Stages stale only because they sit downstream of a
stale stage are kept apart from those with a cause of their own.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from paperdag.engine import dvc
from paperdag.engine.errors import PaperdagError
from paperdag.engine.fsutil import load_yaml
from paperdag.engine.numerics import KEY as NUMERICS_KEY
from paperdag.engine.params import PARAMS_FILE, load_params, lookup
from paperdag.engine.render import CLAIMS_KEY, generated_files, render_files
from paperdag.engine.spec import Project, Stage, load_project, param_paths


class _Missing:
    def __repr__(self) -> str:
        return "(none)"


MISSING = _Missing()  # a params key absent from dvc.lock or params.yaml


@dataclass(frozen=True)
class Reason:
    kind: str  # never_run | param | numerics | code | file | input | dep | out | command | other
    text: str  # the sentence a person reads
    path: str = ""  # the file or params key it is about
    upstream: str = ""  # for an input: the stage that writes it
    old: Any = None  # for a param: the value dvc.lock records, and the one params.yaml has now
    new: Any = None


@dataclass
class Staleness:
    stage: str  # pipeline:stage
    dvc_stage: str  # its name in dvc.yaml
    own_cause: bool  # False: stale only because a stage it reads from is
    reasons: list[Reason] = field(default_factory=list)
    upstream: list[str] = field(default_factory=list)  # the stale stages whose outputs it reads


@dataclass
class Explanation:
    target: str | None
    stages: list[Staleness]  # stale stages in topological order
    checked: list[str]  # every stage looked at
    notes: list[str] = field(default_factory=list)  # what the answer depends on that is not about one stage

    @property
    def stale(self) -> bool:
        return bool(self.stages)


def resolve(project: Project, target: str | None) -> list[Stage]:
    """The stages a target names: all (None), a pipeline's, one stage (pipeline:stage, a matrix stage's every
    element, or a dvc.yaml name), or the stage writing an output path (or the directory output holding it)."""
    if not target:
        return project.order()
    if target in project.pipelines:
        return project.order(target)
    if target in project.stages:
        return [project.stages[target]]
    name = target.rpartition(".yaml:")[2]  # DVC's `pipelines/<p>/dvc.yaml:<name>` too
    by_dvc = [s for s in project.order() if s.dvc_name == name or s.dvc_name.startswith(name + "@")
              or s.address.startswith(target + "@")]
    if by_dvc:
        return by_dvc
    here = (Path.cwd() / target).resolve()  # a path as the shell gives it (absolute, or from the current directory)
    rel = (here.relative_to(project.root) if here.is_relative_to(project.root) else Path(target)).as_posix().rstrip("/")
    for out, stage in project.producers.items():
        if rel == out or rel.startswith(out + "/"):
            return [stage]
    raise PaperdagError(f"why: '{target}' is no pipeline (known: {', '.join(sorted(project.pipelines))}), "
                        "no pipeline:stage or dvc.yaml stage name, and no stage's output path")


def explain(root: Path, target: str | None = None) -> Explanation:
    """Why each stale stage among `target` (and the stages it reads from) is stale."""
    with ThreadPoolExecutor(1) as pool:  # DVC's status runs in its own process meanwhile
        project = load_project(root)
        wanted = resolve(project, target)
        keep = {a for s in wanted for a in project.graph.ancestors(s.address)} | {s.address for s in wanted}
        scope = [s for s in project.order() if s.address in keep]
        # DVC reads only the dvc.yaml files of the stages asked about (a pipeline's and the root's: 1.9 s vs 8-9 s)
        pending = pool.submit(dvc.status, Path(root), None if target is None else [project.dvc_file(s) for s in scope])
        lock = dvc.lock(project.root).get("stages") or {}
        params = load_params(project.root)
        texts = {path: (project.root / path).read_text() for path in generated_files(project.root)}
        declared = {name: entry for text in texts.values() for name, entry in ((load_yaml(text) or {}).get("stages") or {}).items()}
        notes = []
        if render_files(project) != texts:
            notes.append("dvc.yaml is out of date with pipelines/ and the code's imports (DVC judges by the file on disk, "
                         "and so does this answer): run `paperdag render`")
        if (params.get("base", {}).get("numerics") or {}).get("mode") == "native":
            notes.append("numerics is native (params.yaml `base.numerics.mode`): the kernels are the machine's, so the "
                         "bits depend on the CPU, which no stage lists: another machine does not make a stage stale")
        status = pending.result()
    changed = {s.address for s in project.order() if s.dvc_name in status}
    stale = set(changed)
    for a in changed:
        stale |= project.graph.descendants(a)
    out = []
    for s in scope:
        if s.address not in stale:
            continue
        upstream = sorted({project.producers[p].address for p in s.dep_paths} & stale)
        reasons: list[Reason] = []
        if s.dvc_name in status:
            entry = _declared(declared, s)
            if entry is None:
                reasons = [Reason("other", "not in dvc.yaml: run `paperdag render`")]
            else:
                reasons = _own_reasons(project, s, status[s.dvc_name], lock.get(s.dvc_name), entry, params, stale)
        named = {r.path for r in reasons if r.kind == "input"}
        for p in s.dep_paths:
            producer = project.producers[p].address
            if producer in stale and p not in named:
                reasons.append(Reason("input", f"input {p} may change: upstream {producer} is stale", p, producer))
        own = any(not (r.kind == "input" and r.upstream in stale) for r in reasons)
        out.append(Staleness(s.address, s.dvc_name, own, reasons, upstream))
    return Explanation(target, out, [s.address for s in scope], notes)


_ITEM = re.compile(r"\$\{item\.([^}]*)\}")


def _declared(stages: dict[str, Any], s: Stage) -> dict[str, Any] | None:
    """The stage's dvc.yaml entry as DVC reads it, deps, params and outs as plain lists (a matrix element's
    `${item.*}` filled in); None when dvc.yaml lacks it."""
    entry = stages.get(s.dvc_name)
    if entry is None and s.item:
        entry = stages.get(s.dvc_name.partition("@")[0])
        if not isinstance(entry, dict) or "matrix" not in entry:
            return None
        entry = _fill(entry, s.item)
    if not isinstance(entry, dict):
        return None
    keys = [k for p in entry.get("params") or [] for k in ([p] if isinstance(p, str) else p.get(PARAMS_FILE) or [])]
    return {"cmd": entry.get("cmd", ""), "deps": [_path(d) for d in entry.get("deps") or []], "params": keys,
            "outs": [_path(o) for section in ("outs", "metrics", "plots") for o in entry.get(section) or []]}


def _path(item: str | dict[str, Any]) -> str:
    """A dvc.yaml dep or out: a path, or {path: options}."""
    return item if isinstance(item, str) else next(iter(item))


def _fill(doc: Any, item: Mapping[str, Any]) -> Any:
    if isinstance(doc, dict):
        return {_fill(k, item): _fill(v, item) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_fill(v, item) for v in doc]
    return _ITEM.sub(lambda m: str(item.get(m.group(1), m.group(0))), doc) if isinstance(doc, str) else doc


def _own_reasons(project: Project, s: Stage, changes: list, locked: dict | None, entry: dict[str, Any],
                 params: dict[str, Any], stale: set[str]) -> list[Reason]:
    """What DVC found changed in the stage itself, in words, with the details it does not give."""
    if locked is None:
        return [Reason("never_run", "never run: dvc.lock has no record of it")]
    locked_deps = {d["path"]: d for d in locked.get("deps") or []}
    locked_outs = {o["path"] for o in locked.get("outs") or []}
    reasons: list[Reason] = []
    params_changed = False
    for item in changes:
        if isinstance(item, str):
            if item == "changed command":
                reasons.append(Reason("command", f"command changed: `{locked.get('cmd')}` -> `{entry['cmd']}`"))
            else:
                reasons.append(Reason("other", item))
            continue
        for section, paths in item.items():
            if section == "changed deps" and isinstance(paths, dict):
                for path, state in paths.items():
                    if isinstance(state, dict) and path != PARAMS_FILE and s.builtin:
                        reasons.append(_claims_reason(project, s, path, (locked.get("params") or {}).get(path) or {}))
                    elif isinstance(state, dict) or path == PARAMS_FILE:
                        params_changed = True
                    else:
                        reasons.append(_dep_reason(project, s, path, state, path in locked_deps, params, stale))
            elif section == "changed outs" and isinstance(paths, dict):
                for path, state in paths.items():
                    reasons.append(_out_reason(project.dvc_target(s), path, state, path in locked_outs))
            else:
                reasons.append(Reason("other", f"{section}: {json.dumps(paths)}"))
    if params_changed:
        reasons += _param_reasons((locked.get("params") or {}).get(PARAMS_FILE) or {}, entry["params"], params)
    for path in sorted(set(locked_deps) - set(entry["deps"])):
        reasons.append(Reason("dep", f"dep {path} removed (dvc.lock still records it)", path))
    for path in sorted(locked_outs - set(entry["outs"])):
        reasons.append(Reason("out", f"output {path} no longer declared (dvc.lock still records it)", path))
    if not reasons:
        reasons.append(Reason("other", f"dvc status: {json.dumps(changes)}"))
    return reasons


def _dep_reason(project: Project, s: Stage, path: str, state: str, locked: bool, params: dict[str, Any],
                stale: set[str]) -> Reason:
    producer = project.producers.get(path)
    if producer is not None:
        up = producer.address
        if not locked:
            return Reason("dep", f"new input {path} (from {up}; dvc.lock does not record it)", path, up)
        if up in stale:
            verb = "missing" if state == "deleted" else "may change"
            return Reason("input", f"input {path} {verb}: upstream {up} is stale", path, up)
        if state == "deleted":
            return Reason("input", f"input {path} missing though {up} is up to date (`dvc checkout {path}` restores it)",
                          path, up)
        return Reason("input", f"input {path} changed (upstream {up} re-ran)", path, up)
    keys = [k for k in s.path_params if path in param_paths(params, k)]
    if keys:
        what = f"file {path} (param `{keys[0]}`)"
        kind = "file"
    elif path.endswith(".yaml") and path.startswith("pipelines/"):
        what, kind = f"declaration `{path}`", "code"
    else:
        what, kind = f"code `{path}{'/' if (project.root / path).is_dir() else ''}`", "code"
    if not locked:
        return Reason(kind, f"new dep: {what} (dvc.lock does not record it)", path)
    if state == "deleted":
        return Reason(kind, f"{what} deleted", path)
    if (project.root / path).is_dir():
        # DVC keeps the .dir manifest of an output in its cache, but of a dep only the md5: which files changed is lost
        return Reason(kind, f"{what} changed (a directory dep: dvc.lock keeps only its md5, not which of its files changed)",
                      path)
    return Reason(kind, f"{what} changed", path)


def _claims_reason(project: Project, s: Stage, path: str, locked: dict[str, Any]) -> Reason:
    """The claims stage's params dep, its pipeline file's `claims:` section, changed: which claims."""
    old, new = locked.get(CLAIMS_KEY) or {}, project.pipelines[s.pipeline].claims_doc or {}
    if not locked:
        return Reason("code", f"new dep: the claims declared in `{path}` (dvc.lock does not record them)", path)
    changed = [f"{n} {'added' if n not in old else 'removed' if n not in new else 'changed'}"
               for n in sorted(set(old) | set(new), key=str) if old.get(n) != new.get(n)]
    return Reason("code", f"claims declared in `{path}` changed" + (f": {', '.join(changed)}" if changed else ""), path)


def _out_reason(target: str, path: str, state: str, locked: bool) -> Reason:
    if not locked:
        text = f"new output {path} (dvc.lock does not record it)"
    elif state == "deleted":
        text = f"output {path} missing"
    elif state == "not in cache":
        text = f"output {path} is not in DVC's cache (`dvc commit {target}` records it as it is, or rerun the stage)"
    else:
        text = f"output {path} differs from what dvc.lock records (changed since the stage ran)"
    return Reason("out", text, path)


def _param_reasons(locked: dict[str, Any], keys: list[str], params: dict[str, Any]) -> list[Reason]:
    """Each params key whose value differs between dvc.lock and params.yaml, down to the leaves that differ."""
    reasons: list[Reason] = []
    for key in keys:
        try:
            new = lookup(params, key)
        except KeyError:
            new = MISSING
        reasons += _diff(key, locked.get(key, MISSING), new)
    for key in sorted(set(locked) - set(keys)):
        reasons.append(Reason("param", f"param `{key}` no longer read (was {_show(locked[key])})", key, old=locked[key]))
    return reasons


def _diff(key: str, old: Any, new: Any) -> list[Reason]:
    if isinstance(old, dict) and isinstance(new, dict):
        return [r for k in sorted(set(old) | set(new), key=str)
                for r in _diff(f"{key}.{k}", old.get(k, MISSING), new.get(k, MISSING))]
    if old is not MISSING and new is not MISSING and old == new and type(old) is type(new):
        return []
    # base.numerics reaches every stage as a param (render lists it in each): `paperdag stage` sets the kernels and
    # threads from it before numpy or torch loads
    numerics = key == NUMERICS_KEY or key.startswith(NUMERICS_KEY + ".")
    sub = key[len(NUMERICS_KEY) + 1:]
    name = ("numerics" if sub in ("", "mode") else f"numerics {sub}") if numerics else f"param `{key}`"
    if old is MISSING:
        text = f"{name} added: {_show(new)}"
    elif new is MISSING:
        text = f"{name} removed (was {_show(old)})"
    else:
        text = f"{name} {_show(old)} -> {_show(new)}"
    if numerics:
        text += f" (params.yaml `{key}`)"
    return [Reason("numerics" if numerics else "param", text, key,
                   old=None if old is MISSING else old, new=None if new is MISSING else new)]


def _show(value: Any) -> str:
    if isinstance(value, str):
        return value if value and value.strip() == value else json.dumps(value)
    return json.dumps(value, separators=(", ", ": "))


def format_text(e: Explanation) -> str:
    lines = [f"note: {n}" for n in e.notes]
    if not e.stale:
        return "\n".join([*lines, f"{e.target}: up to date, and so is what it reads from" if e.target else
                           "every stage is up to date"])
    own = [s for s in e.stages if s.own_cause]
    downstream = [s for s in e.stages if not s.own_cause]
    lines.append(f"{len(e.stages)} stale stage(s): {len(own)} with a cause of their own, "
                 f"{len(downstream)} only downstream of a stale stage")
    for s in own:
        lines += ["", s.stage] + [f"  {r.text}" for r in s.reasons]
    if downstream:
        lines += ["", "downstream only (rerun once what they read from has):"]
        width = max(len(s.stage) for s in downstream)
        lines += [f"  {s.stage:<{width}}  downstream of {', '.join(s.upstream)} (stale)" for s in downstream]
    return "\n".join(lines)


def as_json(e: Explanation) -> dict[str, Any]:
    return {"target": e.target, "stale": e.stale, "notes": e.notes, "checked": e.checked,
            "stages": [asdict(s) for s in e.stages]}

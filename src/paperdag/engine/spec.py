"""Parse and validate pipelines/*.yaml: the one declaration every engine (DVC, Prefect, MLflow) is derived from.

A pipeline file declares stages; each stage names its inputs (deps: name -> path), the params.yaml keys it
reads, and its outputs (outs / metrics / plots: name -> path, typed by extension). Validation is whole-project:
every input must be some stage's output, no path has two producers, the stage graph has no cycle, every
params key a stage declares exists and every params.yaml key is read, path params stay inside the repository,
every stage function exists in stages/<pipeline>.py. An optional `smoke:` section maps params.yaml keys of the
pipeline's own section to the smaller values its end-to-end tests run it at (paperdag.engine.scratch applies them
to a scratch copy); an optional `paper_scale:` section gives the paper's values of the keys the pipeline runs
smaller (`paperdag report` lists where params.yaml differs from them).
"""

from __future__ import annotations

import ast
import fnmatch
import itertools
import re
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import yaml

from paperdag.engine import artifacts, numerics
from paperdag.engine.claims import Claim, claims_path
from paperdag.engine.claims import parse as parse_claims
from paperdag.engine.dag import Dag
from paperdag.engine.errors import SpecError
from paperdag.engine.fsutil import load_yaml
from paperdag.engine.params import Item, load_params, lookup, same_kind

ArtifactKind = Literal["out", "metric", "plot"]
ROOT_DVC_YAML = "dvc.yaml"


def pipeline_dvc_yaml(pipeline: str) -> str:
    """The dvc.yaml `paperdag render` writes for a pipeline's stages (its dvc.lock lies beside it)."""
    return f"pipelines/{pipeline}/dvc.yaml"


_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_ITEM = re.compile(r"\$\{item\.([^}]*)\}")
_PARAM_REF = re.compile(r"^\$\{([A-Za-z0-9_.]+)\}$")
_VALUE = re.compile(r"^[A-Za-z0-9_.]+$")
_PIPELINE_KEYS = {"description", "stages", "claims", "smoke", "paper_scale"}
_STAGE_KEYS = {"description", "function", "matrix", "deps", "params", "path_params", "outs", "metrics", "plots", "volatile"}
_KIND_OF_SECTION: dict[str, ArtifactKind] = {"outs": "out", "metrics": "metric", "plots": "plot"}


@dataclass(frozen=True)
class Artifact:
    """One declared output of a stage: a file (typed by its extension) or a directory (path ends in '/')."""

    name: str
    path: str  # relative to the repo root, no trailing slash
    kind: ArtifactKind
    type: str  # the name of its artifacts.ArtifactType (artifacts.TYPES)


@dataclass(frozen=True)
class Stage:
    pipeline: str
    name: str
    function: str
    deps: dict[str, str]
    params: tuple[str, ...]
    outputs: dict[str, Artifact]
    volatile: tuple[str, ...] = ()
    path_params: tuple[str, ...] = ()  # params.yaml keys whose values are files the stage reads ("" = none)
    description: str = ""
    item: Item = field(default_factory=Item)  # a matrix element's values (empty outside a matrix)
    gathers: dict[str, dict[Item, str]] = field(default_factory=dict)  # input name -> {element's item: path}
    builtin: bool = False  # the engine's own claims stage (paperdag.engine.claims), not a function in stages/


    @property
    def dep_paths(self) -> list[str]:
        """Every input path: single inputs and each gathered element."""
        return [*self.deps.values(), *(p for g in self.gathers.values() for p in g.values())]

    @property
    def address(self) -> str:
        """`pipeline:stage`, the argument of `paperdag stage`."""
        return f"{self.pipeline}:{self.name}"

    @property
    def dvc_name(self) -> str:
        """The stage's name in dvc.yaml (DVC names allow no ':')."""
        return f"{self.pipeline}-{self.name}"

    @property
    def module(self) -> str:
        return "paperdag.engine.claims" if self.builtin else f"stages.{self.pipeline}"

    def output_at(self, path: str) -> Artifact:
        return next(a for a in self.outputs.values() if a.path == path)


@dataclass(frozen=True)
class Matrix:
    """A declared matrix stage before expansion: what dvc.yaml's `matrix:` entry is rendered from."""

    template: Stage  # paths and params keys still hold `${item.<name>}`
    values: dict[str, list[str | int] | str]  # as declared: a list, or a `${params.key}` reference
    elements: dict[str, Stage]  # element key ("a-0", str(its item)) -> expanded stage


@dataclass(frozen=True)
class Pipeline:
    name: str
    file: str
    description: str
    stages: dict[str, Stage]
    matrices: dict[str, Matrix] = field(default_factory=dict)
    claims: dict[str, Claim] = field(default_factory=dict)
    claims_doc: Any = None  # the `claims:` section as written: the claims stage's params in dvc.yaml / dvc.lock
    smoke: dict[str, Any] = field(default_factory=dict)  # dotted params.yaml key -> its value at smoke scale
    paper_scale: dict[str, Any] = field(default_factory=dict)  # dotted params.yaml key -> the paper's value

    @property
    def module_file(self) -> str:
        return f"stages/{self.name}.py"


@dataclass
class Project:
    """All pipelines of a repository, validated together."""

    root: Path
    pipelines: dict[str, Pipeline] = field(default_factory=dict)

    @cached_property
    def stages(self) -> dict[str, Stage]:
        """Every stage by address (`pipeline:stage`)."""
        return {s.address: s for p in self.pipelines.values() for s in p.stages.values()}

    @cached_property
    def producers(self) -> dict[str, Stage]:
        """Path -> the stage that writes it."""
        return {a.path: s for s in self.stages.values() for a in s.outputs.values()}

    @cached_property
    def graph(self) -> Dag:
        """Stage addresses, with an edge from producer to consumer."""
        edges = [(self.producers[path].address, s.address) for s in self.stages.values() for path in s.dep_paths]
        return Dag(self.stages, edges)

    def pipeline(self, name: str) -> Pipeline:
        if name not in self.pipelines:
            known = ", ".join(sorted(self.pipelines)) or "none"
            raise SpecError("pipelines/", name, f"no pipeline of that name (known: {known})")
        return self.pipelines[name]

    def stage(self, address: str) -> Stage:
        if address not in self.stages:
            pipeline, _, name = address.partition(":")
            p = self.pipeline(pipeline)
            raise SpecError(p.file, f"stages.{name}", f"no such stage (known: {', '.join(p.stages)})")
        return self.stages[address]

    def order(self, pipeline: str | None = None) -> list[Stage]:
        """Stages in a stable topological order, optionally only one pipeline's."""
        stages = [self.stages[a] for a in self.graph.order()]
        return [s for s in stages if pipeline is None or s.pipeline == pipeline]

    def dvc_file(self, stage: Stage) -> str:
        """The dvc.yaml that declares the stage. One per pipeline, pipelines/<p>/dvc.yaml, so that DVC's rewrite of
        the lock beside it after each stage is of that pipeline's entries only; the root dvc.yaml holds the stages
        no other stage reads (each pipeline's claims stage), so a bare `dvc repro` there reproduces them and,
        upstream of them, every other stage. A matrix's elements share one file."""
        m = self.pipelines[stage.pipeline].matrices.get(stage.name.partition("@")[0]) if stage.item else None
        group = list(m.elements.values()) if m else [stage]
        if any(not self.graph.successors(s.address) for s in group):
            return ROOT_DVC_YAML
        return pipeline_dvc_yaml(stage.pipeline)

    def dvc_target(self, stage: Stage) -> str:
        """`<its dvc.yaml>:<its name>`, how DVC's commands address the stage from the repository root."""
        return f"{self.dvc_file(stage)}:{stage.dvc_name}"

    def upstream(self, address: str) -> list[Stage]:
        """The stage and every stage it depends on, in topological order."""
        keep = self.graph.ancestors(address) | {address}
        return [s for s in self.order() if s.address in keep]


def load_project(root: Path | str, params: dict[str, Any] | None = None) -> Project:
    """Read and validate every pipelines/*.yaml under root against root/params.yaml."""
    root = Path(root).resolve()
    if params is None:
        params = load_params(root)
    project = Project(root=root)
    files = sorted((root / "pipelines").glob("*.yaml"))
    for f in files:
        p = _parse_pipeline(f.relative_to(root).as_posix(), _read_yaml(f, root), params)
        project.pipelines[p.name] = p
    _resolve_gathers(project)
    _validate(project, params)
    _claims_volatile(project)
    return project


def _claims_volatile(project: Project) -> None:
    """A claim on a volatile value (a timing) is volatile in claims.json too, and so are the status counts."""
    for p in project.pipelines.values():
        stage = p.stages.get(CLAIMS_STAGE)
        if stage is None or not stage.builtin:
            continue
        patterns = []
        for c in p.claims.values():
            producer = project.producers[c.metric_path]
            parts = [producer.output_at(c.metric_path).name, *c.metric_key.split("."), "mean"]
            keys = [".".join(parts[:i]) for i in range(1, len(parts) + 1)]  # the value, or a key above it
            if any(fnmatch.fnmatchcase(k, v) for k in keys for v in producer.volatile):
                patterns.append(f"claims.claims.{c.name}")
        if patterns:
            patterns.append("claims.summary")
            p.stages[CLAIMS_STAGE] = replace(stage, volatile=tuple(patterns))
            project.__dict__.pop("stages", None)  # cached views are rebuilt with the new stage
            project.__dict__.pop("producers", None)
            project.__dict__.pop("graph", None)


def _read_yaml(path: Path, root: Path) -> Any:
    rel = path.relative_to(root).as_posix()
    try:
        return load_yaml(path.read_text())
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else "?"
        raise SpecError(rel, where, f"not valid YAML ({getattr(e, 'problem', e)})") from None


def _parse_pipeline(file: str, doc: Any, params: dict[str, Any]) -> Pipeline:
    name = Path(file).stem
    if not _NAME.match(name):
        raise SpecError(file, "(file name)", "pipeline names are lower-case letters, digits and '_'")
    if not isinstance(doc, dict):
        raise SpecError(file, "(top level)", "expected a mapping with a `stages` key")
    for key in doc:
        if key not in _PIPELINE_KEYS:
            raise SpecError(file, str(key), f"unknown key (allowed: {', '.join(sorted(_PIPELINE_KEYS))})")
    stages_doc = doc.get("stages")
    if not isinstance(stages_doc, dict) or not stages_doc:
        raise SpecError(file, "stages", "expected a non-empty mapping of stage name -> stage")
    stages: dict[str, Stage] = {}
    matrices: dict[str, Matrix] = {}
    for sname, sdoc in stages_doc.items():
        if isinstance(sdoc, dict) and "matrix" in sdoc:
            m = _parse_matrix(file, name, str(sname), sdoc, params)
            matrices[str(sname)] = m
            stages.update({s.name: s for s in m.elements.values()})
        else:
            stages[sname] = _parse_stage(file, name, str(sname), sdoc)
    claims = parse_claims(file, doc.get("claims"))
    if claims:
        if CLAIMS_STAGE in stages:
            raise SpecError(file, f"stages.{CLAIMS_STAGE}", "this name is the engine's stage for the pipeline's claims")
        stages[CLAIMS_STAGE] = _claims_stage(name, claims)
    return Pipeline(name=name, file=file, description=str(doc.get("description", "")), stages=stages, matrices=matrices,
                    claims=claims, claims_doc=doc.get("claims") if claims else None,
                    smoke=_parse_scale(file, name, doc.get("smoke"), params),
                    paper_scale=_parse_scale(file, name, doc.get("paper_scale"), params, "paper_scale"))


def _parse_scale(file: str, pipeline: str, doc: Any, params: dict[str, Any], section: str = "smoke") -> dict[str, Any]:
    """A `smoke:` or `paper_scale:` section: each key a value of the pipeline's own params.yaml section, each value
    of its type."""
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise SpecError(file, section, f"expected a mapping of dotted params.yaml key -> value ({section})")
    for key, value in doc.items():
        where = f"{section}.{key}"
        if not isinstance(key, str) or not key.startswith(f"{pipeline}."):
            raise SpecError(file, where, f"expected a key of the pipeline's own params.yaml section ({pipeline}.<key>)")
        try:
            old = lookup(params, key)
        except KeyError:
            raise SpecError(file, where, f"'{key}' is not in params.yaml") from None
        if isinstance(old, dict):
            raise SpecError(file, where, f"'{key}' is a section of params.yaml: give each of its keys instead")
        if not same_kind(old, value):
            raise SpecError(file, where, f"params.yaml has {old!r} there: expected a value of that type, got {value!r}")
    return dict(doc)


CLAIMS_STAGE = "claims"


def _claims_stage(pipeline: str, claims: dict[str, Claim]) -> Stage:
    """The engine's stage judging a pipeline's claims: reads the metric files they name, writes claims.json."""
    paths = sorted({c.metric_path for c in claims.values()})
    out = Artifact(name="claims", path=claims_path(pipeline), kind="metric", type="json")
    return Stage(pipeline=pipeline, name=CLAIMS_STAGE, function="judge", deps={f"metrics_{i}": p for i, p in enumerate(paths)},
                 params=(), outputs={"claims": out}, builtin=True,
                 description="judge the claims declared in the pipeline file on its metrics")


def _parse_matrix(file: str, pipeline: str, name: str, doc: dict[str, Any], params: dict[str, Any]) -> Matrix:
    """Expand a matrix stage into one stage per combination of its values, named as DVC names them."""
    where = f"stages.{name}.matrix"
    declared = doc["matrix"]
    if not isinstance(declared, dict) or not declared:
        raise SpecError(file, where, "expected a mapping of name -> list of values (or a ${params.key} naming a list, or a "
                        "mapping whose keys are the values)")
    values: dict[str, list[str | int]] = {}
    for key, raw in declared.items():
        if not isinstance(key, str) or not _NAME.match(key):
            raise SpecError(file, f"{where}.{key}", "matrix names are lower-case letters, digits and '_'")
        if hasattr(Item, key):
            raise SpecError(file, f"{where}.{key}", f"'{key}' is a method of the stage's matrix item: choose another name")
        ref = _PARAM_REF.match(raw) if isinstance(raw, str) else None
        source = (file, f"{where}.{key}")  # where the values are written: the pipeline file or params.yaml
        if ref:
            try:
                raw = lookup(params, ref.group(1))
            except KeyError:
                raise SpecError(file, f"{where}.{key}", f"'{ref.group(1)}' is not in params.yaml") from None
            source = ("params.yaml", ref.group(1))
            if isinstance(raw, dict):  # a mapping's keys, in order, as DVC iterates a mapping named in `matrix:`
                raw = list(raw)
        ok = isinstance(raw, list) and raw and all(
            isinstance(v, (str, int)) and not isinstance(v, bool) and _VALUE.match(str(v)) for v in raw)
        if not ok or len(set(map(str, raw))) != len(raw):
            raise SpecError(*source, "expected a non-empty list of distinct names or integers "
                            f"(letters, digits, '_', '.'), got {raw!r}")
        values[key] = list(raw)
    body = {k: v for k, v in doc.items() if k != "matrix"}
    template = _parse_stage(file, pipeline, name, body)
    elements: dict[str, Stage] = {}
    for combo in itertools.product(*values.values()):
        item = Item(dict(zip(values, combo, strict=True)))
        key = str(item)
        stage = _parse_stage(file, pipeline, name, _substitute(file, f"stages.{name}", body, item))
        elements[key] = replace(stage, name=f"{name}@{key}", item=item)
    return Matrix(template=template, values=dict(declared), elements=elements)


def _substitute(file: str, where: str, doc: Any, item: Item) -> Any:
    """doc with every `${item.<name>}` replaced by the element's value."""
    if isinstance(doc, dict):
        return {k: _substitute(file, f"{where}.{k}", v, item) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_substitute(file, f"{where}[{i}]", v, item) for i, v in enumerate(doc)]
    if not isinstance(doc, str):
        return doc

    def value(m: re.Match[str]) -> str:
        if m.group(1) not in item:
            raise SpecError(file, where, f"${{item.{m.group(1)}}} is not in the stage's matrix ({', '.join(item)})")
        return str(item[m.group(1)])

    return _ITEM.sub(value, doc)


def _resolve_gathers(project: Project) -> None:
    """A non-matrix stage's input that names a matrix stage's templated output gathers every element's output."""
    templates = {a.path: m for p in project.pipelines.values() for m in p.matrices.values()
                 for a in m.template.outputs.values()}
    for p in project.pipelines.values():
        for sname, s in list(p.stages.items()):
            templated = {d: path for d, path in s.deps.items() if _ITEM.search(path)}
            if not templated:
                continue
            gathers = {}
            for dname, path in templated.items():
                m = templates.get(path)
                if m is None:
                    raise SpecError(p.file, f"stages.{sname}.deps.{dname}", f"no matrix stage produces {path}")
                aname = m.template.output_at(path).name
                gathers[dname] = {e.item: e.outputs[aname].path for e in m.elements.values()}
            deps = {d: path for d, path in s.deps.items() if d not in templated}
            p.stages[sname] = replace(s, deps=deps, gathers=gathers)


def _parse_stage(file: str, pipeline: str, name: str, doc: Any) -> Stage:
    where = f"stages.{name}"
    if not _NAME.match(name):
        raise SpecError(file, where, "stage names are lower-case letters, digits and '_'")
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise SpecError(file, where, "expected a mapping")
    for key in doc:
        if key not in _STAGE_KEYS:
            raise SpecError(file, f"{where}.{key}", f"unknown key (allowed: {', '.join(sorted(_STAGE_KEYS))})")
    deps = _name_to_path(file, f"{where}.deps", doc.get("deps"))
    outputs: dict[str, Artifact] = {}
    for section, kind in _KIND_OF_SECTION.items():
        for oname, raw in _name_to_path(file, f"{where}.{section}", doc.get(section)).items():
            key = f"{where}.{section}.{oname}"
            if oname in outputs or oname in deps:
                raise SpecError(file, key, "name used twice in this stage")
            outputs[oname] = _artifact(file, key, oname, raw, kind)
    if not outputs:
        raise SpecError(file, where, "a stage must declare at least one output (outs, metrics or plots)")
    params = doc.get("params", [])
    if not isinstance(params, list) or not all(isinstance(p, str) and p for p in params):
        raise SpecError(file, f"{where}.params", "expected a list of dotted params.yaml keys")
    volatile = doc.get("volatile", [])
    if not isinstance(volatile, list) or not all(isinstance(v, str) for v in volatile):
        raise SpecError(file, f"{where}.volatile", "expected a list of '<output>.<key>' patterns")
    path_params = doc.get("path_params", [])
    if not isinstance(path_params, list) or not all(isinstance(k, str) for k in path_params):
        raise SpecError(file, f"{where}.path_params", "expected a list of dotted params.yaml keys")
    function = doc.get("function", name)
    if not isinstance(function, str) or not function.isidentifier():
        raise SpecError(file, f"{where}.function", "expected a Python function name")
    return Stage(
        pipeline=pipeline,
        name=name,
        function=function,
        deps={k: v.rstrip("/") for k, v in deps.items()},
        params=tuple(params),
        outputs=outputs,
        volatile=tuple(volatile),
        path_params=tuple(path_params),
        description=str(doc.get("description", "")),
    )


def _name_to_path(file: str, key: str, doc: Any) -> dict[str, str]:
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise SpecError(file, key, "expected a mapping of name -> path")
    out = {}
    for name, path in doc.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise SpecError(file, f"{key}.{name}", "names must be Python identifiers")
        if not isinstance(path, str) or not path or path.startswith(("/", "..")) or "/../" in path:
            raise SpecError(file, f"{key}.{name}", "expected a relative path inside the repository")
        out[name] = path
    return out


def _artifact(file: str, key: str, name: str, raw: str, kind: ArtifactKind) -> Artifact:
    atype = artifacts.for_path(raw)
    if atype is None:
        known = ", ".join(artifacts.known_suffixes())
        raise SpecError(file, key, f"unknown type '{Path(raw).suffix}' (known: {known}, or a trailing '/' for a directory)")
    if kind == "metric" and atype.name != "json":
        raise SpecError(file, key, "metrics must be .json files")
    if kind == "plot" and atype.name != "png":
        raise SpecError(file, key, "plots must be .png files")
    return Artifact(name=name, path=raw.rstrip("/"), kind=kind, type=atype.name)


def _validate(project: Project, params: dict[str, Any]) -> None:
    numerics.from_params(params)  # base.numerics must be complete before any stage can run under it
    _every_key_is_read(project, params)
    allowed_outside = _allowed_outside(project, params)
    producers: dict[str, tuple[Pipeline, Stage, str]] = {}
    for p in project.pipelines.values():
        for s in p.stages.values():
            for a in s.outputs.values():
                section = {"out": "outs", "metric": "metrics", "plot": "plots"}[a.kind]
                key = f"stages.{s.name}.{section}.{a.name}"
                if a.path in producers:
                    other = producers[a.path]
                    raise SpecError(p.file, key, f"{a.path} is also written by {other[0].file} stages.{other[1].name}")
                for path in producers:
                    if path.startswith(a.path + "/") or a.path.startswith(path + "/"):
                        raise SpecError(p.file, key, f"{a.path} overlaps {path}, an output of another stage")
                producers[a.path] = (p, s, key)
    for p in project.pipelines.values():
        for c in p.claims.values():
            producer = producers.get(c.metric_path)
            if producer is None or producer[0] is not p or producer[1].output_at(c.metric_path).kind != "metric":
                raise SpecError(p.file, f"claims.{c.name}.metric",
                                f"{c.metric_path} is not a metrics file declared by a stage of this pipeline")
        for s in p.stages.values():
            for dname, path in s.deps.items():
                if path not in producers:
                    raise SpecError(p.file, f"stages.{s.name}.deps.{dname}", f"no stage produces {path}")
            for i, key in enumerate(s.params):
                try:
                    lookup(params, key)
                except KeyError:
                    raise SpecError(p.file, f"stages.{s.name}.params[{i}]", f"'{key}' is not in params.yaml") from None
            for i, key in enumerate(s.path_params):
                where = f"stages.{s.name}.path_params[{i}]"
                if not any(key == k or key.startswith(k + ".") for k in s.params):
                    raise SpecError(p.file, where, f"'{key}' is not among the stage's params")
                for path in param_paths(params, key):
                    _inside_repository(project.root, key, path, allowed_outside)
                    if not (project.root / path).is_file():
                        raise SpecError("params.yaml", key, f"{path} does not exist (\"\" for none)")
    cycle = project.graph.cycle()
    if cycle:
        first = project.stages[cycle[0]]
        loop = " -> ".join(cycle)
        raise SpecError(project.pipelines[first.pipeline].file, f"stages.{first.name}", f"dependency cycle: {loop}")
    for p in project.pipelines.values():
        module = project.root / p.module_file
        defined = _top_level_functions(module)
        for s in p.stages.values():
            if not s.builtin and s.function not in defined:
                why = "does not exist" if module.exists() else f"{p.module_file} does not exist"
                raise SpecError(p.file, f"stages.{s.name}", f"stage function {p.module_file}:{s.function} {why}")


ALLOW_OUTSIDE_KEY = "base.allow_outside_paths"
ENGINE_KEYS = ("base.seed", numerics.KEY, ALLOW_OUTSIDE_KEY)  # params.yaml keys the engine reads itself


def _allowed_outside(project: Project, params: dict[str, Any]) -> set[str]:
    """base.allow_outside_paths: the path params the user lets name files outside the repository."""
    allowed = params["base"].get("allow_outside_paths", [])
    if not isinstance(allowed, list) or not all(isinstance(k, str) for k in allowed):
        raise SpecError("params.yaml", ALLOW_OUTSIDE_KEY, "expected a list of path params keys")
    path_params = {k for s in project.stages.values() for k in s.path_params}
    for key in allowed:
        if key not in path_params:
            raise SpecError("params.yaml", ALLOW_OUTSIDE_KEY,
                            f"'{key}' is not a path param of any stage (known: {', '.join(sorted(path_params)) or 'none'})")
    return set(allowed)


def _inside_repository(root: Path, key: str, path: str, allowed_outside: set[str]) -> None:
    """A path param must resolve (symlinks and `..` followed) inside the repository: a file outside it would become a
    dep of the committed dvc.yaml that no other clone has, unless the user allows it for this key."""
    resolved = (root / path).resolve()
    if not resolved.is_relative_to(root) and key not in allowed_outside:
        raise SpecError("params.yaml", key, f"{path} resolves to {resolved}, outside the repository; name a file inside it, "
                        f"or list '{key}' in {ALLOW_OUTSIDE_KEY} to allow it")


def _every_key_is_read(project: Project, params: dict[str, Any]) -> None:
    """Every params.yaml key is read by some stage (declared, or under a declared mapping), is a matrix axis (`${key}`)
    or is the engine's own: any other key is a typo or a leftover that would otherwise be found only when a stage runs."""
    read = set(ENGINE_KEYS) | {k for s in project.stages.values() for k in s.params}
    read |= {ref.group(1) for p in project.pipelines.values() for m in p.matrices.values() for v in m.values.values()
             if isinstance(v, str) and (ref := _PARAM_REF.match(v))}
    unread = _unread(params, "", read)
    if unread:
        more = f" (nor {', '.join(unread[1:])})" if len(unread) > 1 else ""
        raise SpecError("params.yaml", unread[0], f"no stage reads it{more}: add it to a stage's params in pipelines/, or remove it")


def _unread(node: dict[str, Any], prefix: str, read: set[str]) -> list[str]:
    unread = []
    for name, value in node.items():
        key = f"{prefix}{name}"
        if key in read:
            continue
        if isinstance(value, dict) and any(k.startswith(key + ".") for k in read):
            unread += _unread(value, key + ".", read)
        else:
            unread.append(key)
    return unread


def param_paths(params: dict[str, Any], key: str) -> list[str]:
    """The files a path param names: a string ("" = none) or a list of strings."""
    value = lookup(params, key)
    values = value if isinstance(value, list) else [value]
    if not all(isinstance(v, str) for v in values):
        raise SpecError("params.yaml", key, "a path param must be a string or a list of strings")
    return [v for v in values if v]


def _top_level_functions(path: Path) -> set[str]:
    if not path.exists():
        return set()
    tree = ast.parse(path.read_text(), filename=str(path))
    return {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}

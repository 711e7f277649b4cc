"""`paperdag export --ro-crate DIR`: what dvc.lock records of the project's build, as a Workflow Run RO-Crate.

The crate follows the Provenance Run Crate profile 0.5 (with the Workflow Run and Process Run Crate profiles it
extends, on RO-Crate 1.1): the workflow is dvc.yaml, based on the pipelines/*.yaml it is rendered from; each stage
execution dvc.lock records is a CreateAction whose object is its data deps and its params (PropertyValues), whose
result is its outs and whose instrument is the stage (a SoftwareApplication made of its code deps), with the start and
end time, MLflow run id and git commit of the MLflow run that recorded writing those outs; a HowToStep and a
ControlAction per stage, one CreateAction for the workflow as a whole and an OrganizeAction for paperdag link them
as the profile asks. Every artifact is copied into the crate under its repository path, with its sha256 and DVC's
md5 (a PropertyValue as its identifier); a version dvc.lock names that neither the workspace nor DVC's cache holds
(a code dep edited since its stage ran, data never built here), or a second version of one path (a stage stale in
dvc.lock read an earlier version), is a contextual entity with the md5 only. Everything is written into a
temporary directory beside DIR and renamed into place.
"""

from __future__ import annotations

import json
import shutil
from datetime import UTC
from importlib import metadata
from pathlib import Path
from typing import Any

from paperdag.engine import artifacts, dvc
from paperdag.engine.errors import PaperdagError
from paperdag.engine.fsutil import dvc_cache_file, dvc_files, dvc_md5, file_hash, replace_into_place, tmp_sibling
from paperdag.engine.records import flatten
from paperdag.engine.spec import pipeline_dvc_yaml
from paperdag.engine.tracking import CODE_DIRS, OUT_TAG, git_info

PROFILES = {  # the root's conformsTo: permalink -> name
    "https://w3id.org/ro/wfrun/process/0.5": "Process Run Crate",
    "https://w3id.org/ro/wfrun/workflow/0.5": "Workflow Run Crate",
    "https://w3id.org/ro/wfrun/provenance/0.5": "Provenance Run Crate",
    "https://w3id.org/workflowhub/workflow-ro-crate/1.0": "Workflow RO-Crate",
}
_FORMATS = {".yaml": "application/yaml", ".py": "text/x-python", ".txt": "text/plain"}  # besides artifacts' types


def _content(root: Path, path: str, md5: str) -> dict[str, Path] | None:
    """The files holding the version of `path` whose DVC md5 is `md5` (relative path inside it -> file; "" for a
    file): the workspace's when it is that version, else DVC's cache; None when neither has it."""
    here = root / path
    if here.exists() and dvc_md5(here) == md5:
        if not here.is_dir():
            return {"": here}
        return {p.relative_to(here).as_posix(): p for p in dvc_files(here)}
    cached = dvc_cache_file(root, md5)
    if not cached.is_file():
        return None
    if not md5.endswith(".dir"):
        return {"": cached}
    files = {e["relpath"]: dvc_cache_file(root, e["md5"]) for e in json.loads(cached.read_text())}
    return files if all(f.is_file() for f in files.values()) else None


def _lock_stages(root: Path, pipeline: str | None) -> dict[str, dict[str, Any]]:
    """dvc.lock's stages (of `pipeline`), by DVC name, each with its paperdag address."""
    if not dvc.lock_files(root):
        raise PaperdagError(f"{root}: no dvc.lock exists: build the project first (dvc repro / paperdag run)")
    stages = {}
    for name, entry in (dvc.lock(root).get("stages") or {}).items():
        address = entry.get("cmd", "").removeprefix("paperdag stage ").strip()
        if pipeline is None or address.partition(":")[0] == pipeline:
            stages[name] = {**entry, "address": address}
        for item in (*entry.get("deps", []), *entry.get("outs", [])):
            try:
                (root / item["path"]).resolve().relative_to(root)
            except ValueError:
                raise PaperdagError(f"dvc.lock stage {name}: {item['path']} is outside the project {root}") from None
    if not stages:
        raise PaperdagError(f"dvc.lock records no stage of pipeline {pipeline}" if pipeline else "dvc.lock records no stage")
    return stages


def _producing_runs(root: Path, stages: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """DVC stage name -> the latest FINISHED MLflow run of that stage whose recorded outs are dvc.lock's."""
    from paperdag.engine.records import indexed_runs

    found: dict[str, dict[str, Any]] = {}
    runs = [r for r in indexed_runs(root) if r["status"] == "FINISHED"]
    for name, entry in stages.items():
        outs = {o["path"]: o.get("md5") for o in entry.get("outs", [])}
        for run in runs:
            tags = run["tags"]
            if (f"{tags.get('paperdag.pipeline')}:{tags.get('paperdag.stage')}" == entry["address"]
                    and all(tags.get(OUT_TAG + p) == m for p, m in outs.items())
                    and (name not in found or (run.get("end_ms") or 0) > (found[name].get("end_ms") or 0))):
                found[name] = run
    return found


def _iso(ms: int | None) -> str | None:
    if not ms:
        return None
    from datetime import datetime

    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")


class _Builder:
    """One crate being built: data entities by repository path, each at the md5 it was first seen with."""

    def __init__(self, root: Path) -> None:
        from rocrate.rocrate import ROCrate

        self.root = root
        self.crate = ROCrate(version="1.1")
        self.by_path: dict[str, tuple[str, Any]] = {}

    def context(self, id_: str, properties: dict[str, Any]) -> Any:
        from rocrate.model import ContextEntity

        return self.crate.get(id_) or self.crate.add(ContextEntity(self.crate, id_, properties=properties))

    def md5_value(self, md5: str) -> Any:
        return self.context(f"#dvc-md5-{md5}", {"@type": "PropertyValue", "propertyID": "dvc-md5", "name": "DVC md5",
                                                "value": md5})

    def artifact(self, path: str, md5: str) -> Any:
        """The entity of `path` at `md5`: a File or Dataset copied into the crate, or a stand-in for a version that is
        gone or that is not the one the crate holds under that path (a crate holds one file per path)."""
        if path in self.by_path:
            held, entity = self.by_path[path]
            if held == md5:
                return entity
            why = f"the crate holds {path} at md5 {held}, the version another stage of dvc.lock records"
        else:
            files = _content(self.root, path, md5)
            why = "neither the workspace nor DVC's cache holds it"
        if path in self.by_path or files is None:
            return self.context(f"#dvc-md5-{md5}-of-{path}", {
                "@type": "CreativeWork", "name": path, "identifier": self.md5_value(md5),
                "description": f"a version of {path} that dvc.lock records, not in this crate: {why}"})
        types = ["File", "SoftwareSourceCode"] if path.startswith(CODE_DIRS) else "File"
        if "" in files:
            entity = self._file(files[""], path, types, {"identifier": self.md5_value(md5)})
        else:
            parts = [self._file(f, f"{path}/{rel}", types, {}) for rel, f in files.items()]
            entity = self.crate.add_dataset(None, path, properties={
                "name": path, "identifier": self.md5_value(md5), "hasPart": parts})
        self.by_path[path] = (md5, entity)
        return entity

    def _file(self, source: Path, path: str, types: Any, extra: dict[str, Any]) -> Any:
        props = {"@type": types, "name": path, "sha256": file_hash(source, "sha256"),
                 "contentSize": str(source.stat().st_size), **extra}
        atype = artifacts.for_path(path)
        media_type = atype.media_type if atype is not None else _FORMATS.get(Path(path).suffix, "")
        if media_type:
            props["encodingFormat"] = media_type
        return self.crate.add_file(source, path, properties=props)


def ro_crate(root: Path, dest: Path, pipeline: str | None = None) -> dict[str, int]:
    """Write the crate to `dest` (replacing a crate there, never another directory); return its entity counts by
    type."""
    root = Path(root).resolve()
    dest = Path(dest).resolve()
    if dest.exists() and (not dest.is_dir() or (any(dest.iterdir()) and not (dest / "ro-crate-metadata.json").exists())):
        raise PaperdagError(f"{dest} exists and is not an RO-Crate: give a new directory (or an earlier export)")
    stages = _lock_stages(root, pipeline)
    runs = _producing_runs(root, stages)
    b = _Builder(root)
    crate = b.crate
    commit = git_info(root)
    crate.metadata.extra_contexts.append("https://w3id.org/ro/terms/workflow-run/context")
    crate.metadata.extra_terms["sha256"] = "http://schema.org/sha256"  # a schema.org term newer than RO-Crate 1.1's context
    for url, name in PROFILES.items():
        b.context(url, {"@type": "CreativeWork", "name": name, "version": url.rsplit("/", 1)[1]})
    crate.root_dataset["conformsTo"] = [{"@id": url} for url in PROFILES]
    crate.root_dataset["name"] = f"{root.name}: the build dvc.lock records" + (f" (pipeline {pipeline})" if pipeline else "")
    crate.root_dataset["description"] = (f"Written by `paperdag export --ro-crate` at git commit {commit['git.commit']}"
                                         f"{' (uncommitted changes)' if commit['git.dirty'] == 'true' else ''}.")
    workflow = _workflow(b, sorted({s["address"].partition(":")[0] for s in stages.values()}), commit["git.commit"])
    tools, steps, controls = [], [], []
    sources: dict[str, Any] = {}  # data deps by path; those no exported stage writes are the workflow's inputs
    outs: dict[str, Any] = {}
    for i, (name, entry) in enumerate(stages.items()):
        tool, step, control, inputs, outputs = _stage(b, i, name, entry, runs.get(name))
        tools.append(tool)
        steps.append(step)
        controls.append(control)
        sources.update(inputs)
        outs.update(outputs)
    workflow["hasPart"], workflow["step"] = tools, steps
    props: dict[str, Any] = {"@type": "CreateAction", "name": "the build dvc.lock records",
                             "description": "the union of the stage executions dvc.lock records (they may have run at "
                                            "different times, each at the commit its own action names)"}
    if runs:
        props["startTime"] = _iso(min(r.get("start_ms") or 0 for r in runs.values()) or None)
        props["endTime"] = _iso(max(r.get("end_ms") or 0 for r in runs.values()) or None)
    run_all = crate.add_action(workflow, identifier="#workflow-run",
                               object=[e for p, e in sources.items() if p not in outs], result=list(outs.values()),
                               properties={k: v for k, v in props.items() if v is not None})
    engine = b.context("#paperdag", {"@type": "SoftwareApplication", "name": "paperdag", "version": _version("paperdag")})
    b.context("#organize", {"@type": "OrganizeAction", "name": "paperdag (under dvc repro or paperdag run)",
                            "instrument": engine, "object": controls, "result": run_all})
    crate.root_dataset["mentions"] = [run_all]
    tmp = tmp_sibling(dest)
    try:
        crate.write(tmp)
        replace_into_place(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    counts: dict[str, int] = {}
    for e in crate.get_entities():
        for t in [e.type] if isinstance(e.type, str) else e.type:
            counts[t] = counts.get(t, 0) + 1
    return dict(sorted(counts.items()))


def _workflow(b: _Builder, pipelines: list[str], commit: str) -> Any:
    """dvc.yaml as the main workflow (in DVC's language), based on the declarations it is rendered from."""
    from rocrate.model import ComputerLanguage

    crate = b.crate
    lang = crate.add(ComputerLanguage(crate, "#dvc", properties={
        "name": "DVC pipeline (dvc.yaml)", "url": {"@id": "https://dvc.org/doc/user-guide/project-structure/dvcyaml-files"}}))
    declarations = []
    for p in pipelines:
        path = f"pipelines/{p}.yaml"
        if (b.root / path).exists():
            declarations.append(b._file(b.root / path, path, ["File", "SoftwareSourceCode"], {
                "description": f"pipeline {p}'s declaration, which `paperdag render` writes into {pipeline_dvc_yaml(p)} and dvc.yaml"}))
            b.by_path[path] = (dvc_md5(b.root / path), declarations[-1])
    parts = [b._file(b.root / path, path, ["File", "SoftwareSourceCode"], {
                 "description": f"pipeline {p}'s stages in DVC's language (all but those no other stage reads, which "
                                "the root dvc.yaml holds)", "programmingLanguage": lang})
             for p in pipelines if (b.root / (path := pipeline_dvc_yaml(p))).exists()]
    return crate.add_workflow(b.root / "dvc.yaml", "dvc.yaml", main=True, lang=lang, properties={
        "@type": ["File", "SoftwareSourceCode", "ComputationalWorkflow", "HowTo"], "name": "dvc.yaml",
        "version": commit, "isBasedOn": declarations, **({"hasPart": parts} if parts else {})})


def _stage(b: _Builder, position: int, name: str, entry: dict[str, Any], run: dict[str, Any] | None
           ) -> tuple[Any, Any, Any, dict[str, Any], dict[str, Any]]:
    """One dvc.lock stage: its tool (made of its code deps), HowToStep, CreateAction and ControlAction; return the
    tool, step and control, and its data inputs and outputs by path."""
    address = entry["address"]
    code = [b.artifact(d["path"], d.get("md5", "")) for d in entry.get("deps", []) if d["path"].startswith(CODE_DIRS)]
    tool = b.context(f"#stage-{name}", {"@type": "SoftwareApplication", "name": address,
                                        "description": entry.get("desc") or entry.get("cmd", ""), "hasPart": code})
    step = b.context(f"#step-{name}", {"@type": "HowToStep", "name": address, "position": str(position),
                                       "workExample": tool})
    params = {k: v for values in (entry.get("params") or {}).values() for k, v in flatten(values).items()}
    values = [b.context(f"#param-{name}-{k}", {"@type": "PropertyValue", "name": k,
                                               "value": v if isinstance(v, (str, int, float, bool)) else json.dumps(v)})
              for k, v in sorted(params.items())]
    inputs = {d["path"]: b.artifact(d["path"], d.get("md5", "")) for d in entry.get("deps", [])
              if not d["path"].startswith(CODE_DIRS)}
    outputs = {o["path"]: b.artifact(o["path"], o.get("md5", "")) for o in entry.get("outs", [])}
    props: dict[str, Any] = {"@type": "CreateAction", "name": f"paperdag stage {address}",
                             "actionStatus": {"@id": "http://schema.org/CompletedActionStatus"},
                             "description": "no MLflow run in this project's store recorded writing these outputs"}
    if run is not None:
        props["startTime"], props["endTime"] = _iso(run.get("start_ms")), _iso(run.get("end_ms"))
        props["identifier"] = [b.context(f"#mlflow-{run['run_id']}", {
            "@type": "PropertyValue", "propertyID": "mlflow-run-id", "name": "MLflow run", "value": run["run_id"]})]
        props["description"] = (f"MLflow run {run['run_id']} (experiment {run['experiment']}) at git commit "
                                f"{run['tags'].get('git.commit', 'unknown')}"
                                f"{' with uncommitted changes' if run['tags'].get('git.dirty') == 'true' else ''}")
    action = b.crate.add_action(tool, identifier=f"#run-{name}", object=[*inputs.values(), *values],
                                result=list(outputs.values()), properties={k: v for k, v in props.items() if v is not None})
    control = b.context(f"#control-{name}", {"@type": "ControlAction", "name": f"orchestrate {address}",
                                             "instrument": step, "object": action})
    return tool, step, control, inputs, outputs


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "unknown"


def openlineage(root: Path, dest: Path, pipeline: str | None = None) -> int:
    """Write a START and a COMPLETE OpenLineage RunEvent per stage execution dvc.lock records (of `pipeline`) to
    `dest`, one JSON per line, through openlineage-python's FileTransport; return how many events.

    Job: namespace `paperdag:<project directory>`, name `pipeline:stage`. Run id: the MLflow run's (an MLflow run id is
    a UUID's hex), else one derived from the stage and its out md5s. Datasets: namespace `file`, name the absolute
    path (OpenLineage's naming for local files), version facet = DVC's md5; code deps are not datasets. Times are the
    MLflow run's; a stage no MLflow run recorded gets dvc.lock's modification time for both events."""
    import uuid

    from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
    from openlineage.client.facet_v2 import dataset_version_dataset, job_type_job, processing_engine_run, tags_run
    from openlineage.client.transport.file import FileConfig, FileTransport

    root = Path(root).resolve()
    dest = Path(dest).resolve()
    stages = _lock_stages(root, pipeline)
    runs = _producing_runs(root, stages)
    version = _version("paperdag")
    producer = f"urn:paperdag:{version}"
    locked_at = _iso(int(max(p.stat().st_mtime for p in dvc.lock_files(root)) * 1000))
    engine = processing_engine_run.ProcessingEngineRunFacet(version=version, name="paperdag", producer=producer)
    job_type = job_type_job.JobTypeJobFacet("BATCH", "PAPERDAG", "STAGE", producer=producer)

    def dataset(cls: Any, item: dict[str, str]) -> Any:
        facet = dataset_version_dataset.DatasetVersionDatasetFacet(item.get("md5", ""), producer=producer)
        return cls(namespace="file", name=str(root / item["path"]), facets={"version": facet})

    tmp = tmp_sibling(dest)
    transport = FileTransport(FileConfig(log_file_path=str(tmp), append=True))
    events = 0
    try:
        for name, entry in stages.items():
            run = runs.get(name)
            outs = entry.get("outs", [])
            if run is not None:
                run_id = str(uuid.UUID(run["run_id"]))
                tags = [tags_run.TagsRunFacetFields("mlflow.run_id", run["run_id"], "MLFLOW")]
                tags += [tags_run.TagsRunFacetFields(k, run["tags"][k], "PAPERDAG") for k in ("git.commit", "git.dirty")
                         if k in run["tags"]]
                facets = {"processing_engine": engine, "tags": tags_run.TagsRunFacet(tags, producer=producer)}
                start, end = _iso(run.get("start_ms")) or locked_at, _iso(run.get("end_ms")) or locked_at
            else:
                run_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"paperdag:{root}:{name}:{[o.get('md5') for o in outs]}"))
                facets, start, end = {"processing_engine": engine}, locked_at, locked_at
            job = Job(namespace=f"paperdag:{root.name}", name=entry["address"], facets={"jobType": job_type})
            inputs = [dataset(InputDataset, d) for d in entry.get("deps", []) if not d["path"].startswith(CODE_DIRS)]
            outputs = [dataset(OutputDataset, o) for o in outs]
            for state, when in ((RunState.START, start), (RunState.COMPLETE, end)):
                transport.emit(RunEvent(eventType=state, eventTime=when, run=Run(run_id, facets), job=job,
                                        inputs=inputs, outputs=outputs, producer=producer))
                events += 1
        if not tmp.exists():
            tmp.write_text("")
        replace_into_place(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return events

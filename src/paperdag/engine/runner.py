"""`paperdag stage PIPELINE:STAGE`: the single entry point DVC (and every Prefect task) runs.

Load the declaration, build the typed params, seed every RNG, read inputs by type, call the stage function
inside an MLflow run, write every output to a temporary path and move them into place only after all
succeeded. A stage that raises (or is killed) leaves the previous outputs untouched.
"""

from __future__ import annotations

import importlib
import inspect
import os
import random
import shutil
import signal
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from types import ModuleType
from typing import Any, get_type_hints

from paperdag._lazy import when_imported
from paperdag.engine import artifacts, stable
from paperdag.engine.dvc import lock_of
from paperdag.engine.errors import StageError
from paperdag.engine.failures import failure_path, failure_text, record_failure
from paperdag.engine.fsutil import dvc_md5, remove_stale_tmp, replace_into_place, tmp_sibling
from paperdag.engine.numerics import Numerics, apply_in_process, from_params
from paperdag.engine.numerics import tags as numerics_tags
from paperdag.engine.params import build, collect, load_params, stage_seed
from paperdag.engine.render import dvc_deps, locked_params
from paperdag.engine.spec import Project, Stage, load_project


def seed_everything(seed: int, numerics: Numerics) -> None:
    """Seed random and numpy; seed torch and apply the numerics' in-process settings to it the moment it is imported
    (now if the stage module imported it; else when the stage function does: importing torch costs seconds, so a
    stage that never touches a tensor does not)."""
    random.seed(seed)
    try:
        import numpy as np

        np.random.seed(seed % 2**32)
    except ImportError:
        pass

    def set_up(torch: ModuleType) -> None:
        torch.manual_seed(seed)
        apply_in_process(numerics)

    when_imported("torch", set_up)


def _importable(root: Path) -> None:
    """Make the project's stage modules (root/stages) and its own packages (root/src: a project need not be the
    checkout paperdag was installed from; a test fixture keeps its method in src/<its package>) importable, in that
    order before the installed ones. paperdag itself is already imported: a scratch copy's src/paperdag is the
    installed code's copy (scratch.copy_pipeline), so it runs as installed."""
    for d in (root / "src", root):
        if d.is_dir() and str(d) not in sys.path:
            sys.path.insert(0, str(d))


def stage_function(project: Project, stage: Stage) -> Callable[..., dict[str, Any]]:
    _importable(project.root)
    module = importlib.import_module(stage.module)
    fn = getattr(module, stage.function, None)
    if fn is None:
        raise StageError(f"{stage.module}.{stage.function} does not exist (stage {stage.address})")
    return fn


def prepare(project: Project, params: dict[str, Any], stage: Stage) -> tuple[Callable[..., Any], dict[str, Any], int]:
    """The stage function, its keyword arguments except inputs' values (typed params), and its seed."""
    if stage.builtin:
        return _claims_function(project, stage), {}, stage_seed(params, stage.address)
    fn = stage_function(project, stage)
    sig = inspect.signature(fn)
    expected = set(stage.deps) | set(stage.gathers) | {"params"}
    accepted = set(sig.parameters)
    if accepted != expected:
        raise StageError(
            f"{stage.module}.{stage.function} takes ({', '.join(sorted(accepted))}) but "
            f"{project.pipelines[stage.pipeline].file} stages.{stage.name} gives ({', '.join(sorted(expected))})"
        )
    cls = get_type_hints(fn).get("params")
    if cls is None:
        raise StageError(f"{stage.module}.{stage.function}: annotate its `params` argument with the stage's params dataclass")
    seed = stage_seed(params, stage.address)
    typed = build(cls, collect(params, stage.params), seed, stage.address, stage.item)
    return fn, {"params": typed}, seed


def read_inputs(root: Path, project: Project, stage: Stage) -> dict[str, Any]:
    """The stage function's input arguments: each dep read as its producer declares its type, each gathered dep as
    {item: value}."""
    def read(path: str) -> Any:
        return artifacts.read(project.producers[path].output_at(path).type, root / path)

    return ({name: read(path) for name, path in stage.deps.items()}
            | {name: {key: read(path) for key, path in paths.items()} for name, paths in stage.gathers.items()})


def validated_project(root: Path, pipelines: list[str] | None = None, params: dict[str, Any] | None = None) -> Project:
    """The project, with the typed params of every stage (of `pipelines`) built: a wrong type, an impossible value or
    a key no stage reads is an error naming its params.yaml key before any stage work (imports the stage modules)."""
    params = load_params(root) if params is None else params
    project = load_project(root, params)
    check_params(project, params, pipelines)
    return project


def check_params(project: Project, params: dict[str, Any], pipelines: Iterable[str] | None = None) -> None:
    """Build the typed params of every stage (of `pipelines`) as `prepare` does: a wrong type, an impossible value
    or an unknown key is an error naming its params.yaml key before any stage work. It imports every stage module,
    so only the commands that act on params call it (render, run, claims), not `paperdag list`."""
    wanted = set(project.pipelines if pipelines is None else pipelines)
    for stage in project.stages.values():
        if stage.pipeline in wanted and not stage.builtin:
            prepare(project, params, stage)


def _claims_function(project: Project, stage: Stage) -> Callable[..., dict[str, Any]]:
    """The engine's claims stage: judge the pipeline's declared claims on the metric files it reads."""
    from paperdag.engine import claims

    p = project.pipelines[stage.pipeline]

    def judge(**metrics: Any) -> dict[str, Any]:
        judged = claims.judge_all(p.file, p.claims, {stage.deps[name]: data for name, data in metrics.items()})
        return {"claims": claims.document(judged)}

    return judge


class Terminated(BaseException):
    """The stage process got SIGTERM: unwind like an exception, so that its run record ends KILLED."""


def _on_sigterm(signum: int, frame: Any) -> None:
    raise Terminated(f"terminated by signal {signum}")


def run_stage(root: Path | str, address: str) -> dict[str, str]:
    """Run one stage; return the md5 of each output path."""
    from paperdag.engine import records, tracking

    root = Path(root).resolve()
    params = load_params(root)
    project = load_project(root, params)
    stage = project.stage(address)
    _refuse_beside_a_run(root)
    t0 = time.perf_counter()
    _say(f"{address}: start")
    signal.signal(signal.SIGTERM, _on_sigterm)
    record = tracking.stage_record(root, stage.pipeline, stage.name, {
        "paperdag.seed": str(stage_seed(params, address)),
        tracking.PARAMS_TAG: tracking.canonical_json(locked_params(project, params, stage))})
    kwargs: dict[str, Any] = {}
    try:
        try:
            fn, kwargs, seed = prepare(project, params, stage)
            for a in stage.outputs.values():
                remove_stale_tmp(root / a.path)
            dep_md5 = _dep_md5s(root, project, params, stage, record)
            numerics = from_params(params)
            seed_everything(seed, numerics)

            kwargs.update(read_inputs(root, project, stage))
            _log_inputs(record, project, stage, kwargs, dep_md5)
            t_call = time.perf_counter()
            result = fn(**kwargs)
            out_md5 = _write_outputs(root, stage, result)
            stable.record(root, {a.path: (out_md5[a.path], d) for a in stage.outputs.values()
                                 if (d := stable.digest(a, root / a.path, stage.volatile)) is not None},
                          stage.address, out_md5, lock_file=lock_of(project.dvc_file(stage)))
        except BaseException as e:
            record_failure(root, address, e)
            _say(f"{address}: FAILED after {time.perf_counter() - t0:.1f} s: {type(e).__name__}: {e} "
                 f"(traceback: {failure_path(root, address).relative_to(root)})")
            if "params" in kwargs:
                record.log_params(vars(kwargs["params"]))
            record.attach_text(failure_text(e), "traceback.txt")
            record.set_tags({"paperdag.error": f"{type(e).__name__}: {e}", **tracking.environment()})
            record.end("KILLED" if isinstance(e, (Terminated, KeyboardInterrupt)) else "FAILED")
            raise
        elapsed = time.perf_counter() - t_call  # the stage function and writing its outputs
        if "params" in kwargs:
            record.log_params(vars(kwargs["params"]))
        if stage.builtin:
            from paperdag.engine.claims import run_tags

            record.set_tags(run_tags(result["claims"]["claims"]))
        record.set_tags({f"{tracking.OUT_TAG}{p}": m for p, m in out_md5.items()} | numerics_tags(numerics)
                        | tracking.environment())
        record.log_metrics({"paperdag.stage_seconds": elapsed})
        for a in stage.outputs.values():
            record.log_dataset(a.path, out_md5[a.path], "output", a.type, a.kind, artifacts.describe(a.type, result[a.name]))
        for a in stage.outputs.values():
            if a.kind == "metric":
                record.log_metrics(artifacts.read("json", root / a.path))
            if a.kind in ("metric", "plot"):
                record.attach(root / a.path, a.kind + "s")
        record.end("FINISHED")
    finally:
        records.start_drainer(root)
    age = process_age()
    _say(f"{address}: done: stage {elapsed:.1f} s, {time.perf_counter() - t0:.1f} s in all"
         + (f", {age:.1f} s since the process started" if age is not None else "") + f" (run record {record.id})")
    return out_md5


def _dep_md5s(root: Path, project: Project, params: dict[str, Any], stage: Stage, record: Any) -> dict[str, str]:
    """Tag the run with the md5 of every dep dvc.yaml declares (code, inputs, path params' files), hashed as DVC
    hashes it; return the data deps' (inputs and path params' files) by path."""
    from paperdag.engine import tracking
    from paperdag.engine.render import param_files

    md5 = {path: dvc_md5(root / path) for path in dvc_deps(project, params, stage) if (root / path).exists()}
    record.set_tags({f"{tracking.DEP_TAG}{p}": m for p, m in md5.items()})
    data = set(stage.dep_paths) | set(param_files(params, stage))
    return {p: m for p, m in md5.items() if p in data}


def _log_inputs(record: Any, project: Project, stage: Stage, kwargs: dict[str, Any], dep_md5: dict[str, str]) -> None:
    """Every data dep as a dataset of the run: another stage's output ("input", described from the value read) or a
    file a path param names ("source")."""
    values = {path: kwargs[name] for name, path in stage.deps.items()}
    values |= {path: kwargs[name][key] for name, paths in stage.gathers.items() for key, path in paths.items()}
    for path, md5 in dep_md5.items():
        if path in values:
            a = project.producers[path].output_at(path)
            record.log_dataset(path, md5, "input", a.type, a.kind, artifacts.describe(a.type, values[path]))
        else:
            record.log_dataset(path, md5, "source", Path(path).suffix.lstrip(".") or "dir", "source", {})


def _refuse_beside_a_run(root: Path) -> None:
    """Outside a `paperdag run`, refuse to run a stage while one runs in this repository (plain `dvc repro` beside
    it would run the same stages twice)."""
    from paperdag.engine import locks
    from paperdag.engine.tracking import FLOW_RUN_ENV

    if FLOW_RUN_ENV not in os.environ:
        locks.refuse_if_running(root)


def _write_outputs(root: Path, stage: Stage, result: Any) -> dict[str, str]:
    if not isinstance(result, dict):
        raise StageError(f"stage {stage.address} must return a dict of its outputs, got {type(result).__name__}")
    missing = set(stage.outputs) - set(result)
    extra = set(result) - set(stage.outputs)
    if missing or extra:
        raise StageError(
            f"stage {stage.address} returned outputs {sorted(result)}; declared {sorted(stage.outputs)}"
            + (f" (missing {sorted(missing)})" if missing else "")
            + (f" (undeclared {sorted(extra)})" if extra else "")
        )
    written: list[tuple[Path, Path]] = []
    try:
        for name, a in stage.outputs.items():
            final = root / a.path
            final.parent.mkdir(parents=True, exist_ok=True)
            tmp = tmp_sibling(final)
            artifacts.write(a, result[name], tmp)
            written.append((tmp, final))
    except BaseException:
        for tmp, _ in written:
            shutil.rmtree(tmp, ignore_errors=True) if tmp.is_dir() else tmp.unlink(missing_ok=True)
        for a in stage.outputs.values():
            remove_stale_tmp(root / a.path)
        raise
    for tmp, final in written:
        replace_into_place(tmp, final)
    return {str(final.relative_to(root)): dvc_md5(final) for _, final in written}


def process_age() -> float | None:
    """Seconds since this process started (Linux's /proc, 10 ms steps; None elsewhere). An exec keeps the start: a
    stage that re-executed itself under its numerics counts from its first start; a stage forked by a warm server
    counts from the fork."""
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(") ", 1)[1].split()[19])  # field 22, since boot
        return time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def _say(msg: str) -> None:
    if os.environ.get("PAPERDAG_QUIET") != "1":
        print(f"[paperdag] {msg}", file=sys.stderr, flush=True)

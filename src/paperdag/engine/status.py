"""Which stages are stale: changed according to DVC, or downstream of a changed stage."""

from __future__ import annotations

from pathlib import Path

from paperdag.engine import dvc
from paperdag.engine.spec import Project, Stage, load_project


def stale_stages(project: Project, pipeline: str) -> list[Stage]:
    """The stages a run of `pipeline` must execute, in topological order.

    Stale = DVC reports a change (deps, params, command or outs differ from dvc.lock, or never run), or the stage
    is downstream of a stale one. Stages of other pipelines that this one consumes are included.
    """
    project.pipeline(pipeline)
    wanted: set[str] = set()
    for s in project.order(pipeline):
        wanted |= {u.address for u in project.upstream(s.address)}
    scope = [s for s in project.order() if s.address in wanted]
    files = sorted({project.dvc_file(s) for s in scope})  # DVC reads only these (not every pipeline's)
    changed = dvc.changed_stages(project.root, [s.dvc_name for s in scope], files)
    return stale_stages_from(project, changed, scope)


def status(root: Path) -> dict[str, dict[str, str]]:
    """pipeline -> stage -> 'up to date' | 'changed' | 'stale (upstream changed)'."""
    project = load_project(root)
    changed = dvc.changed_stages(project.root, [s.dvc_name for s in project.order()])
    out: dict[str, dict[str, str]] = {}
    for name in sorted(project.pipelines):
        stale = {s.address for s in stale_stages_from(project, changed, project.order())}
        out[name] = {
            s.name: ("changed" if s.dvc_name in changed else "stale (upstream changed)" if s.address in stale else "up to date")
            for s in project.order(name)
        }
    return out


def stale_stages_from(project: Project, changed: set[str], scope: list[Stage]) -> list[Stage]:
    """Within `scope`, the stages DVC reports changed plus everything downstream of them."""
    names = {s.address for s in scope}
    stale = {s.address for s in scope if s.dvc_name in changed}
    for a in list(stale):
        stale |= project.graph.descendants(a) & names
    return [s for s in scope if s.address in stale]


def format_status(st: dict[str, dict[str, str]]) -> str:
    lines = []
    for pipeline, stages in st.items():
        n_ok = sum(v == "up to date" for v in stages.values())
        lines.append(f"{pipeline}  ({n_ok}/{len(stages)} up to date)")
        lines += [f"  {name:<24} {state}" for name, state in stages.items()]
    return "\n".join(lines)

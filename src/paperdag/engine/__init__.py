"""The paperdag engine: one pipeline declaration, rendered for DVC, run by Prefect, tracked in MLflow.

It knows no method: stages/<pipeline>.py is where a method and the engine meet. The names below are its public
surface (what a stage module or a script driving paperdag uses); every module of the package is private by
convention, its names free to change. Each name is imported on first use (`import paperdag.engine` stays cheap:
a `paperdag stage` process pays only for what it touches).

    from paperdag.engine import load_project, run_stage, verify
    project = load_project(".")
    run_stage(".", "toy:make")
    verify(".", "toy")
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from paperdag._lazy import attach

__getattr__, __dir__, __all__ = attach(__name__, {
    "spec": ["load_project", "Project", "Pipeline", "Stage", "Artifact"],  # the validated declaration
    "params": ["Item"],  # a matrix element's values, as a stage receives them
    "artifacts": ["ArtifactType", "register_type"],  # the extension point for artifact types
    "runner": ["run_stage"],
    "orchestrate": ["run_pipeline"],
    "render": ["render"],
    "verify": ["verify", "verify_against_lock"],
    "lineage": ["lineage"],
    "audit": ["audit"],
    "why": ["explain"],
    "errors": ["PaperdagError", "SpecError", "StageError"],
})

if TYPE_CHECKING:  # what type checkers and editors see; at run time the names come from __getattr__
    from paperdag.engine.artifacts import ArtifactType, register_type
    from paperdag.engine.audit import audit
    from paperdag.engine.errors import PaperdagError, SpecError, StageError
    from paperdag.engine.lineage import lineage
    from paperdag.engine.orchestrate import run_pipeline
    from paperdag.engine.params import Item
    from paperdag.engine.render import render
    from paperdag.engine.runner import run_stage
    from paperdag.engine.spec import Artifact, Pipeline, Project, Stage, load_project
    from paperdag.engine.verify import verify, verify_against_lock
    from paperdag.engine.why import explain

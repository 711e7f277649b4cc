"""A scratch copy of one pipeline, optionally at the smoke scale its declaration gives (`smoke:`): a project to
`dvc repro` without touching the checkout, which is how tests run each pipeline end to end.

    copy_pipeline(Path("."), "mfc", Path("/tmp/mfc"), smoke=True)   # then: git init; dvc init; dvc repro
"""

from __future__ import annotations

import io
import shutil
from pathlib import Path

from paperdag.engine.codedeps import code_deps
from paperdag.engine.errors import PaperdagError
from paperdag.engine.fsutil import atomic_write_text
from paperdag.engine.params import PARAMS_FILE, lookup
from paperdag.engine.spec import load_project, param_paths


def copy_pipeline(root: Path, pipeline: str, dest: Path, smoke: bool = False) -> Path:
    """Copy `pipeline`'s declaration, stage module and the code it imports from the project at `root` into `dest`
    (new or empty), with a params.yaml of `base` and the pipeline's own section, its comments kept; with `smoke`, the
    declared smoke values replace theirs. The copy is validated and its dvc.yaml rendered; returns `dest`."""
    from ruamel.yaml import YAML
    from ruamel.yaml.comments import CommentedSeq

    from paperdag.engine.render import render

    root, dest = Path(root).resolve(), Path(dest)
    if dest.exists() and any(dest.iterdir()):
        raise PaperdagError(f"{dest} is not empty: a scratch copy needs a new or empty directory")
    p = load_project(root).pipeline(pipeline)
    rt = YAML()
    params = rt.load((root / PARAMS_FILE).read_text())
    for section in [k for k in params if k not in ("base", pipeline)]:
        del params[section]
    for key, value in (p.smoke if smoke else {}).items():
        if isinstance(value, list):  # written [a, b] as params.yaml writes its lists
            value = CommentedSeq(value)
            value.fa.set_flow_style()
        parent, _, last = key.rpartition(".")
        lookup(params, parent)[last] = value
    files = [p.file, "stages/__init__.py", *code_deps(root, p.module_file)]
    files += [path for s in p.stages.values() for k in s.path_params for path in param_paths(params, k)]
    for rel in dict.fromkeys(files):
        src, target = root / rel, dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, target, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copyfile(src, target)
    buf = io.StringIO()
    rt.dump(params, buf)
    atomic_write_text(dest / PARAMS_FILE, buf.getvalue())
    render(load_project(dest))
    return dest

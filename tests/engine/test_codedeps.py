"""Code dependencies per stage function: the stage module, and the paperdag modules the function (with the helpers
it calls and the code run at import) reaches, transitively; lazy packages by the names used; never the engine."""

from __future__ import annotations

from pathlib import Path

import pytest

from paperdag.engine.codedeps import code_deps
from paperdag.engine.errors import PaperdagError

FILES = {
    "src/paperdag/__init__.py": "",
    "src/paperdag/methods/m/__init__.py": "from paperdag.methods.m.eager import EAGER\n",
    "src/paperdag/methods/m/eager.py": "EAGER = 1\n",
    "src/paperdag/methods/m/core.py": "from paperdag.methods.m import deep\n\ndef fit(p):\n    return deep.go(p)\n",
    "src/paperdag/methods/m/deep.py": "def go(p):\n    return p\n",
    "src/paperdag/methods/m/plot.py": "def draw(x):\n    return x\n",
    "src/paperdag/methods/m/consts.py": "SCALE = 2\n",
    "src/paperdag/lazy/__init__.py": ("from paperdag._lazy import attach\n\n"
                                      "__getattr__, __dir__, __all__ = attach(__name__, {'a': ['fa'], 'b': ['fb']})\n"),
    "src/paperdag/lazy/a.py": "def fa():\n    return 1\n",
    "src/paperdag/lazy/b.py": "def fb():\n    return 2\n",
    "src/paperdag/_lazy.py": "def attach(name, subs):\n    return None, None, []\n",
    "src/paperdag/engine/__init__.py": "",
    "src/paperdag/engine/helpers.py": "",
    "stages/m.py": '''from __future__ import annotations

from paperdag.engine.helpers import anything
from paperdag.lazy import fa, fb
from paperdag.methods.m import consts
from paperdag.methods.m.core import fit
from paperdag.methods.m.plot import draw

SCALE = consts.SCALE  # module-level code: every stage runs it


def _figure(x):
    return draw(x)


def train(params):
    return fit(params) * SCALE


def evaluate(params):
    return _figure(params)


def lazy_a(params):
    return fa()


def shadowed(params):
    fit = params  # a local named like the imported function: not a use of it
    return fit


def local_import(params):
    from paperdag.methods.m.plot import draw as d

    return d(params)
''',
}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    for rel, text in FILES.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return tmp_path


def deps(project: Path, function: str | None) -> set[str]:
    out = code_deps(project, "stages/m.py", function)
    assert out[0] == "stages/m.py"
    return {p.removeprefix("src/paperdag/") for p in out[1:]}


def test_a_stage_depends_on_what_its_function_reaches_transitively(project: Path) -> None:
    """train calls core.fit, core imports deep: both count, with the package __init__ above them and what it imports;
    the plot module train never reaches does not, nor the engine."""
    got = deps(project, "train")
    assert {"methods/m/core.py", "methods/m/deep.py", "methods/m/__init__.py", "methods/m/eager.py", "__init__.py"} <= got
    assert "methods/m/plot.py" not in got
    assert not any(p.startswith("engine") for p in got)


def test_a_module_level_helper_function_carries_its_modules(project: Path) -> None:
    """evaluate reaches plot.draw only through the module-level helper _figure: plot counts, core does not."""
    got = deps(project, "evaluate")
    assert "methods/m/plot.py" in got
    assert "methods/m/core.py" not in got and "methods/m/deep.py" not in got


def test_module_level_code_counts_for_every_stage(project: Path) -> None:
    """SCALE = consts.SCALE runs when the stage module is imported, so consts is a dep of every stage function."""
    for function in ("train", "evaluate", "lazy_a", "shadowed"):
        assert "methods/m/consts.py" in deps(project, function)


def test_a_lazy_package_counts_by_the_names_used(project: Path) -> None:
    """lazy_a uses fa: the lazy package's __init__, its submodule a and the attach helper count; b does not."""
    got = deps(project, "lazy_a")
    assert {"lazy/__init__.py", "lazy/a.py", "_lazy.py"} <= got
    assert "lazy/b.py" not in got


def test_a_local_name_shadowing_an_import_is_not_a_use(project: Path) -> None:
    """shadowed binds its own `fit`: core is not among its deps."""
    assert "methods/m/core.py" not in deps(project, "shadowed")


def test_an_import_inside_the_function_counts(project: Path) -> None:
    """local_import imports plot inside its body: plot counts for it."""
    assert "methods/m/plot.py" in deps(project, "local_import")


def test_without_a_function_the_whole_stage_module_counts(project: Path) -> None:
    """The scratch copy of a pipeline needs every module the stage module can reach: both lazy submodules, plot, core."""
    got = deps(project, None)
    assert {"methods/m/plot.py", "methods/m/core.py", "lazy/a.py", "lazy/b.py"} <= got


def test_an_unknown_function_is_an_error_naming_the_file(project: Path) -> None:
    """A function the stage module does not define: the error names the module and the function."""
    with pytest.raises(PaperdagError, match=r"stages/m.py has no top-level function nope"):
        code_deps(project, "stages/m.py", "nope")


def test_a_project_package_under_src_counts_and_installed_ones_do_not(project: Path) -> None:
    """A project keeps its own method package under src/ (any name); it is a dependency like paperdag's own, while an
    installed package of the same kind (numpy) is not, even when imported by the project's module."""
    (project / "src/ownmethod").mkdir(parents=True)
    (project / "src/ownmethod/__init__.py").write_text("import numpy as np\n\nfrom ownmethod.core import solve\n")
    (project / "src/ownmethod/core.py").write_text("def solve(p):\n    return p\n")
    (project / "stages/own.py").write_text("import numpy\n\nfrom ownmethod import solve\n\n\ndef run(params):\n"
                                            "    return solve(numpy.zeros(1))\n")
    got = code_deps(project, "stages/own.py", "run")
    assert got == ["stages/own.py", "src/ownmethod/__init__.py", "src/ownmethod/core.py"]

"""What a `paperdag stage` process pays in imports: importing a stage module (and resolving its params dataclasses
and stage functions' annotations, as the engine does) imports no torch, transformers, peft, sentence-transformers,
faiss, networkx, mlflow or pyplot; the shared and method packages import their submodules lazily yet still give
every name of their `__all__`."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import types

import pytest

from support import REPO

HEAVY = ("torch", "transformers", "peft", "sentence_transformers", "faiss", "networkx", "mlflow", "matplotlib.pyplot")
STAGE_MODULES = sorted(f"stages.{p.stem}" for p in (REPO / "stages").glob("*.py") if p.stem != "__init__")
METHOD_PACKAGES = sorted(f"paperdag.methods.{p.parent.name}" for p in (REPO / "src/paperdag/methods").glob("*/__init__.py"))
PACKAGES = ["paperdag.engine", "paperdag.lm", "paperdag.retrieval", "paperdag.dialogue", *METHOD_PACKAGES]

# In a fresh interpreter: import the module; for a stage module also resolve the annotations the engine resolves
# (runner.prepare: the stage function's; params.build: its params dataclass's); print the heavy modules loaded.
_PROBE = """
import dataclasses, importlib, inspect, json, sys, typing
module = importlib.import_module(sys.argv[1])
for name, obj in vars(module).items():
    if getattr(obj, "__module__", None) == module.__name__ and not name.startswith("_"):
        if inspect.isfunction(obj) or dataclasses.is_dataclass(obj):
            typing.get_type_hints(obj, include_extras=True)
print(json.dumps([m for m in json.loads(sys.argv[2]) if m in sys.modules]))
"""


def _fresh(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-c", code, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)


def _heavy_after_import(module: str) -> list[str]:
    r = _fresh(_PROBE, module, json.dumps(HEAVY))
    assert r.returncode == 0, f"importing {module} failed:\n{r.stderr[-3000:]}"
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_stage_modules_are_discovered():
    """Every stages/*.py is probed below: the discovery finds the stage modules that the pipelines name."""
    assert "stages.ckplug" in STAGE_MODULES and "stages.mfc" in STAGE_MODULES


@pytest.mark.parametrize("module", STAGE_MODULES)
def test_stage_module_imports_nothing_heavy(module: str):
    """Importing a stage module (a `paperdag stage` process does, whatever the stage) imports none of the heavy
    libraries: the stage functions that need them import them when they run; a module that fails to import fails."""
    assert _heavy_after_import(module) == []


@pytest.mark.parametrize("package", PACKAGES)
def test_package_alone_imports_nothing_heavy(package: str):
    """`import paperdag.lm` (retrieval, each method package) imports no torch, transformers or faiss by itself."""
    assert _heavy_after_import(package) == []


@pytest.mark.parametrize("package", PACKAGES)
def test_package_gives_every_name_of_its_all(package: str):
    """Every name in a package's `__all__` imports (`from package import name`) as the object itself, listed by
    dir(); none is shadowed by a submodule of the same name."""
    pkg = importlib.import_module(package)
    assert pkg.__all__, f"{package} exports nothing"
    for name in pkg.__all__:
        value = getattr(importlib.import_module(package), name)
        assert not isinstance(value, types.ModuleType), f"{package}.{name} is the submodule, not the name it exports"
        namespace: dict[str, object] = {}
        exec(f"from {package} import {name}", namespace)
        assert namespace[name] is value
    assert set(pkg.__all__) <= set(dir(pkg))


@pytest.mark.parametrize("package, name", [("paperdag.lm", "generate"), ("paperdag.retrieval", "encode"),
                                           ("paperdag.methods.milco", "translate"), ("paperdag.engine", "verify"),
                                           ("paperdag.engine", "render")])
def test_submodule_imported_first_does_not_shadow_its_name(package: str, name: str):
    """`import paperdag.lm.generate` before anything else still leaves paperdag.lm.generate the function, as the
    eager `from paperdag.lm.generate import generate` in the package did."""
    r = _fresh(f"import importlib, types; import {package}.{name}; pkg = importlib.import_module({package!r}); "
               f"print(isinstance(pkg.{name}, types.ModuleType))")
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip() == "False"


def test_importing_the_engine_imports_none_of_its_modules():
    """`import paperdag.engine` is cheap: its public names come from their modules on first use, and a stage module's
    `from paperdag.engine import Item` loads the params module only (not spec, the runner or MLflow's tracking)."""
    r = _fresh("import json, sys; import paperdag.engine; before = sorted(m for m in sys.modules if m.startswith('paperdag.engine.')); "
               "from paperdag.engine import Item; "
               "print(json.dumps([before, sorted(m for m in sys.modules if m.startswith('paperdag.engine.'))]))")
    assert r.returncode == 0, r.stderr[-3000:]
    before, after = json.loads(r.stdout.strip().splitlines()[-1])
    assert before == [] and after == ["paperdag.engine.errors", "paperdag.engine.fsutil", "paperdag.engine.params"]


def test_torch_imported_by_the_stage_function_is_seeded_and_set_up():
    """torch first imported inside the stage function (its module did not) is seeded with the stage's seed and gets
    the numerics' threads and deterministic kernels (warn only; inductor's config told only once it is imported),
    after the hooks stage modules registered (milco's one thread)."""
    r = _fresh("""
import sys
from paperdag._lazy import when_imported
from paperdag.engine.numerics import Numerics
from paperdag.engine.runner import seed_everything
when_imported("torch", lambda torch: torch.set_num_threads(1))  # as stages/milco.py does at import
seed_everything(7, Numerics(mode="native", threads=3, aten_cpu_capability="default", mkl_cbwr="COMPATIBLE",
                            onednn_max_cpu_isa="SSE41", openblas_coretype="Prescott", numpy_simd="native"))
assert "torch" not in sys.modules
import torch
drawn = torch.rand(4)
torch.manual_seed(7)
print(torch.equal(drawn, torch.rand(4)), torch.get_num_threads(), torch.are_deterministic_algorithms_enabled(),
      torch.is_deterministic_algorithms_warn_only_enabled(), type(torch.__loader__).__name__)  # its own loader, not the hook's
print("torch._inductor.config" in sys.modules)  # not imported to set the flag (~1.4 s)
import torch._inductor.config
print(torch._inductor.config.deterministic)  # told when it is imported, as torch.use_deterministic_algorithms would
""")
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split() == ["True", "3", "True", "True", "SourceFileLoader", "False", "True"]

"""Imports that happen when they are needed: torch, transformers and faiss cost seconds, and a stage process pays
only for what its stage function uses.

attach: lazy package namespaces (PEP 562), a package re-exporting names from its submodules imports a submodule on
first use of one of its names. The call has lazy_loader's signature (scientific-python SPEC 1), which the
environment does not ship:

    __getattr__, __dir__, __all__ = attach(__name__, {"causal": ["fit_causal_lm", ...], "factworld": [...]})

when_imported: set a library up the moment it is first imported (the engine seeds torch and fixes its threads so,
whenever the stage function imports it).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
from collections.abc import Callable, Mapping, Sequence


def attach(package: str, submodule_names: Mapping[str, Sequence[str]]) -> tuple[Callable[[str], object], Callable[[], list[str]], list[str]]:
    """The package's `__getattr__`, `__dir__` and `__all__`: `submodule_names` maps each submodule (relative name)
    to the names it exports. `from package import name` imports `package.<submodule>` then, and binds every name of
    that submodule on the package, so later lookups are plain attribute reads."""
    where = {name: sub for sub, names in submodule_names.items() for name in names}
    if len(where) != sum(len(names) for names in submodule_names.values()):
        raise ValueError(f"{package}: a name is exported by two submodules: {submodule_names}")
    module = sys.modules[package]
    module.__class__ = _Package
    module.__dict__["_lazy_names"] = where

    def __getattr__(name: str) -> object:
        sub = where.get(name)
        if sub is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        _bind(module, importlib.import_module(f"{package}.{sub}"), submodule_names[sub])
        return module.__dict__[name]

    def __dir__() -> list[str]:
        return sorted(set(module.__dict__) | set(where))

    return __getattr__, __dir__, sorted(where)


def _bind(package: types.ModuleType, submodule: types.ModuleType, names: Sequence[str]) -> None:
    for name in names:
        package.__dict__[name] = getattr(submodule, name)


class _Package(types.ModuleType):
    """A lazy package's class. The import system sets `package.<sub>` to the submodule once it is loaded; where a
    submodule is named like a name the package exports (lm.generate, retrieval.encode, milco.translate), the package
    keeps the exported name, as an eager `from .generate import generate` in `__init__` would."""

    def __setattr__(self, name: str, value: object) -> None:
        sub = self.__dict__.get("_lazy_names", {}).get(name)
        if isinstance(value, types.ModuleType) and sub is not None and value.__name__ == f"{self.__name__}.{name}":
            value = getattr(importlib.import_module(f"{self.__name__}.{sub}"), name)
        super().__setattr__(name, value)


_waiting: dict[str, list[Callable[[types.ModuleType], None]]] = {}


def when_imported(name: str, callback: Callable[[types.ModuleType], None]) -> None:
    """Call `callback(module)` once the top-level module `name` is imported: now if it is already, else right after
    its first import finishes, before the importer gets it. Callbacks run in the order they were registered."""
    if name in sys.modules:
        callback(sys.modules[name])
        return
    _waiting.setdefault(name, []).append(callback)
    if not any(isinstance(f, _AfterImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport())


class _AfterImport(importlib.abc.MetaPathFinder):
    """Finds a waited-for module with the other finders and runs its callbacks after its loader executed it."""

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in _waiting:
            return None
        for finder in sys.meta_path:
            if finder is not self and hasattr(finder, "find_spec"):
                spec = finder.find_spec(fullname, path, target)
                if spec is not None and spec.loader is not None:
                    spec.loader = _CallbacksAfter(spec.loader)
                    return spec
        return None


class _CallbacksAfter(importlib.abc.Loader):
    def __init__(self, loader: importlib.abc.Loader) -> None:
        self._loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        module.__loader__ = self._loader  # the module sees its own loader, not this one
        if module.__spec__ is not None:
            module.__spec__.loader = self._loader
        self._loader.exec_module(module)
        for callback in _waiting.pop(module.__name__, []):
            callback(module)

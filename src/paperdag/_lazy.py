"""Lazy package namespaces (PEP 562): a package re-exports names from its submodules, and a submodule is imported
on first use of one of its names, so that importing the package does not import torch, transformers or faiss.

The call has lazy_loader's signature (scientific-python SPEC 1), which the environment does not ship:

    __getattr__, __dir__, __all__ = attach(__name__, {"causal": ["fit_causal_lm", ...], "factworld": [...]})
"""

from __future__ import annotations

import importlib
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

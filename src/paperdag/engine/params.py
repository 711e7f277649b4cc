"""params.yaml: dotted-key lookup, typed stage params (strictly validated), and `--set` overrides."""

from __future__ import annotations

import dataclasses
import json
import zlib
from pathlib import Path
from typing import Any, get_type_hints

import yaml
from pydantic import TypeAdapter, ValidationError

from paperdag.engine.errors import SpecError
from paperdag.engine.fsutil import atomic_write_text, load_yaml

PARAMS_FILE = "params.yaml"


def load_params(root: Path) -> dict[str, Any]:
    path = Path(root) / PARAMS_FILE
    if not path.exists():
        raise SpecError(PARAMS_FILE, "(file)", f"missing; expected at {path}")
    try:
        doc = load_yaml(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise SpecError(PARAMS_FILE, "(file)", f"not valid YAML ({e})") from None
    if not isinstance(doc, dict):
        raise SpecError(PARAMS_FILE, "(top level)", "expected a mapping")
    seed = doc.get("base", {}).get("seed") if isinstance(doc.get("base"), dict) else None
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise SpecError(PARAMS_FILE, "base.seed", "required, an integer")
    return doc


def lookup(params: dict[str, Any], dotted: str) -> Any:
    node: Any = params
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            raise KeyError(dotted)
        node = node[part]
    return node


def stage_seed(params: dict[str, Any], address: str) -> int:
    """base.seed plus a stable offset derived from the stage address (independent of declaration order)."""
    return int(params["base"]["seed"]) + zlib.crc32(address.encode()) % 100_000


def collect(params: dict[str, Any], keys: tuple[str, ...]) -> dict[str, tuple[str, Any]]:
    """Flatten a stage's declared keys into field name -> (dotted source key, value).

    A key naming a mapping contributes each of its entries; a scalar key contributes itself under its last part.
    """
    flat: dict[str, tuple[str, Any]] = {}
    for key in keys:
        value = lookup(params, key)
        items = value.items() if isinstance(value, dict) else [(key.rsplit(".", 1)[-1], value)]
        for name, v in items:
            source = f"{key}.{name}" if isinstance(value, dict) else key
            if name in flat:
                raise SpecError(PARAMS_FILE, source, f"field '{name}' also comes from {flat[name][0]}")
            flat[name] = (source, v)
    return flat


def build(cls: type, flat: dict[str, tuple[str, Any]], seed: int, stage: str, item: dict[str, Any] | None = None) -> Any:
    """Instantiate the stage's params dataclass, strictly typed: a wrong type or unknown/missing key is an error.

    `seed` and, for a matrix element, fields named like its matrix keys are filled by the engine."""
    item = item or {}
    for name in item:
        if name in flat:
            raise SpecError(PARAMS_FILE, flat[name][0], f"field '{name}' also comes from the matrix of stage {stage}")
    flat = {**flat, **{name: (f"{stage} matrix {name}", v) for name, v in item.items()}}
    if not dataclasses.is_dataclass(cls):
        raise SpecError(stage, "params", f"the stage's `params` annotation must be a dataclass, got {cls!r}")
    hints = get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for name, (source, _) in flat.items():
        if name not in fields and name not in item:
            raise SpecError(PARAMS_FILE, source, f"unknown key for stage {stage} (its params are: {', '.join(fields)})")
    values: dict[str, Any] = {}
    for name, f in fields.items():
        if name in flat:
            source, raw = flat[name]
            try:
                values[name] = TypeAdapter(hints[name]).validate_json(json.dumps(raw), strict=True)
            except (ValidationError, TypeError) as e:
                msg = e.errors()[0]["msg"] if isinstance(e, ValidationError) else str(e)
                raise SpecError(PARAMS_FILE, source, f"expected {_type_name(hints[name])}, got {raw!r} ({msg})") from None
        elif name == "seed":
            values[name] = seed
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise SpecError(PARAMS_FILE, name, f"missing: stage {stage} needs params field '{name}'")
    return cls(**values)


def _type_name(t: Any) -> str:
    return getattr(t, "__name__", None) or str(t)


def _kind(v: Any) -> str:
    """The YAML kind of a value (ruamel's round-trip types subclass the plain ones)."""
    for t in (bool, int, float, str, list, dict):
        if isinstance(v, t):
            return t.__name__
    return "null" if v is None else type(v).__name__


def set_params(root: Path, assignments: list[str]) -> list[tuple[str, Any, Any]]:
    """Apply `key=value` overrides to params.yaml in place (comments kept), like `dvc exp run --set-param`.

    Values are parsed as YAML scalars/lists; the key must already exist and the value keep its type.
    Returns (key, old, new) per assignment.
    """
    from ruamel.yaml import YAML

    path = Path(root) / PARAMS_FILE
    rt = YAML()
    doc = rt.load(path.read_text())
    changes = []
    for assignment in assignments:
        key, sep, raw = assignment.partition("=")
        if not sep:
            raise SpecError("--set", assignment, "expected key=value")
        new = yaml.safe_load(raw)
        try:
            old = lookup(doc, key)
        except KeyError:
            raise SpecError(PARAMS_FILE, key, "not in params.yaml (--set only changes existing keys)") from None
        if isinstance(old, dict):
            raise SpecError(PARAMS_FILE, key, "names a section; set one of its keys")
        if _kind(old) != _kind(new) and not (_kind(old) == "float" and _kind(new) == "int"):
            raise SpecError(PARAMS_FILE, key, f"expected {_kind(old)} like {old}, got {raw!r}")
        parent = lookup(doc, key.rsplit(".", 1)[0]) if "." in key else doc
        parent[key.rsplit(".", 1)[-1]] = new
        changes.append((key, old, new))
    import io

    buf = io.StringIO()
    rt.dump(doc, buf)
    atomic_write_text(path, buf.getvalue())
    return changes

"""params.yaml: dotted-key lookup, typed stage params (strictly validated), a matrix element's `Item`, and `--set`
overrides."""

from __future__ import annotations

import dataclasses
import json
import zlib
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any, get_args, get_origin, get_type_hints

import yaml

from paperdag.engine.errors import SpecError
from paperdag.engine.fsutil import atomic_write_text, load_yaml

PARAMS_FILE = "params.yaml"

# Constraints for the fields of stage params dataclasses, beside pydantic's PositiveInt, NonNegativeInt,
# PositiveFloat and NonNegativeFloat; `build` checks them and names the params.yaml key a value breaks. Made on first
# use (PEP 562): `paperdag stage` reads params.yaml before it re-executes itself, without importing pydantic.
_BOUNDS = {
    "Fraction": {"ge": 0, "le": 1},  # a share or probability, 0..1
    "PositiveFraction": {"gt": 0, "le": 1},  # a share that must keep something: (0, 1]
}


def __getattr__(name: str) -> Any:
    if name in _BOUNDS:
        from pydantic import Field

        value = Annotated[float, Field(**_BOUNDS[name])]
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class Item(Mapping[str, "str | int"]):
    """One element of a matrix stage: its values by matrix name, as declared (`item.arm == "il_real"`,
    `item.replicate == 0`, or `item["arm"]`); `str(item)` is the element's key as DVC names it ("il_real-0").

    A stage of the element gets it as `params.item` (a params field `item: Item`); a stage gathering a matrix's
    outputs gets a dict keyed by the elements' Items, in the matrix's order. Outside a matrix it is empty (falsy)."""

    __slots__ = ("_values",)
    _values: dict[str, str | int]

    def __init__(self, values: Mapping[str, str | int] | None = None) -> None:
        object.__setattr__(self, "_values", dict(values or {}))

    def __getattr__(self, name: str) -> str | int:
        values = object.__getattribute__(self, "_values")
        if name in values:
            return values[name]
        raise AttributeError(f"matrix item {self!r} has no value '{name}' (its names: {', '.join(values) or 'none'})")

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("a matrix item is immutable")

    def __getitem__(self, name: str) -> str | int:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __hash__(self) -> int:
        return hash(tuple(self._values.items()))

    def __str__(self) -> str:
        return "-".join(str(v) for v in self._values.values())

    def __repr__(self) -> str:
        return f"Item({self._values!r})"

    def __reduce__(self) -> tuple[type[Item], tuple[dict[str, str | int]]]:  # copy.copy / deepcopy (dataclasses.asdict)
        return Item, (self._values,)


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


def build(cls: type, flat: dict[str, tuple[str, Any]], seed: int, stage: str, item: Item | None = None) -> Any:
    """Instantiate the stage's params dataclass, strictly typed: a wrong type, a value its constraint refuses
    (`n: PositiveInt`, `Annotated[float, Field(ge=0, le=1)]`) or an unknown/missing key is an error.

    The fields `seed` and, for a matrix element, `item` (its `Item`) are filled by the engine. A check across
    fields is the dataclass's `__post_init__` raising `ValueError(field_name, why)`: it is reported on that field's
    params.yaml key (any other ValueError on the stage's params)."""
    item = item or Item()
    if not dataclasses.is_dataclass(cls):
        raise SpecError(stage, "params", f"the stage's `params` annotation must be a dataclass, got {cls!r}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for name in item:
        if name in fields:
            raise SpecError(stage, f"params.{name}", f"the matrix value '{name}' reaches the stage as params.item.{name}: "
                            f"remove the field '{name}' from {cls.__name__} (declare `item: Item`)")
    if "item" in flat:
        raise SpecError(PARAMS_FILE, flat["item"][0], f"'item' is the matrix element's, filled by the engine (stage {stage})")
    hints = get_type_hints(cls, include_extras=True)  # with Annotated's constraints
    for name, (source, _) in flat.items():
        if name not in fields:
            raise SpecError(PARAMS_FILE, source, f"unknown key for stage {stage} (its params are: {', '.join(fields)})")
    values: dict[str, Any] = {}
    for name, f in fields.items():
        if name in flat:
            source, raw = flat[name]
            from pydantic import TypeAdapter, ValidationError

            try:
                values[name] = TypeAdapter(hints[name]).validate_json(json.dumps(raw), strict=True)
            except ValidationError as e:
                err = e.errors()[0]
                if not err["loc"]:
                    raise SpecError(PARAMS_FILE, source, f"expected {_type_name(hints[name])}, got {raw!r} ({err['msg']})") from None
                # an item of a list / mapping; pydantic marks a mapping's refused key by a "[key]" step after it
                inside = "".join(f"[{p}]" if isinstance(p, int) else "" if p == "[key]" else f".{p}" for p in err["loc"])
                what = "key" if "[key]" in err["loc"] else "got"
                raise SpecError(PARAMS_FILE, source + inside, f"{what} {err['input']!r} ({err['msg']})") from None
            except TypeError as e:
                raise SpecError(PARAMS_FILE, source, f"expected {_type_name(hints[name])}, got {raw!r} ({e})") from None
        elif name == "seed":
            values[name] = seed
        elif name == "item":
            values[name] = item
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise SpecError(PARAMS_FILE, name, f"missing: stage {stage} needs params field '{name}'")
    try:
        return cls(**values)
    except ValueError as e:  # the dataclass's own check across fields (__post_init__): ValueError(field, why)
        field, why = e.args if len(e.args) == 2 and e.args[0] in fields else (None, str(e))
        source = flat[field][0] if field in flat else f"the params of stage {stage}"
        raise SpecError(PARAMS_FILE, source, why) from None


def _type_name(t: Any) -> str:
    if get_origin(t) is Annotated:  # its constraint is in pydantic's message
        t = get_args(t)[0]
    return getattr(t, "__name__", None) or str(t)


def _kind(v: Any) -> str:
    """The YAML kind of a value (ruamel's round-trip types subclass the plain ones)."""
    for t in (bool, int, float, str, list, dict):
        if isinstance(v, t):
            return t.__name__
    return "null" if v is None else type(v).__name__


def same_kind(old: Any, new: Any) -> bool:
    """Whether `new` may replace the params.yaml value `old`: the same YAML kind, or an int where a float was."""
    return _kind(old) == _kind(new) or (_kind(old) == "float" and _kind(new) == "int")


def set_params(root: Path, assignments: list[str], check: Callable[[dict[str, Any]], object] | None = None) -> list[tuple[str, Any, Any]]:
    """Apply `key=value` overrides to params.yaml in place, like `dvc exp run --set-param`.

    Values are parsed as YAML scalars/lists; the key must already exist and the value keep its type. The new
    document is built in memory and given to `check` (the whole project's validation) before anything is written,
    so a refused value leaves params.yaml as it was; the file is then replaced atomically. Only the assigned values
    change: comments, quotes, flow-style lists `[a, b]` and long lines are kept as written.
    Returns (key, old, new) per assignment.
    """
    import io

    from ruamel.yaml import YAML
    from ruamel.yaml.comments import CommentedSeq
    from ruamel.yaml.scalarstring import ScalarString

    path = Path(root) / PARAMS_FILE
    rt = YAML()
    rt.preserve_quotes = True
    rt.width = 4096  # never fold a long line
    rt.indent(mapping=2, sequence=4, offset=2)  # block lists as params.yaml writes them: the dash two under its key
    doc = rt.load(path.read_text())
    changes = []
    for assignment in assignments:
        key, sep, raw = assignment.partition("=")
        if not sep:
            raise SpecError("--set", assignment, "expected key=value")
        new = load_yaml(raw)
        try:
            old = lookup(doc, key)
        except KeyError:
            raise SpecError(PARAMS_FILE, key, "not in params.yaml (--set only changes existing keys)") from None
        if isinstance(old, dict):
            raise SpecError(PARAMS_FILE, key, "names a section; set one of its keys")
        if not same_kind(old, new):
            raise SpecError(PARAMS_FILE, key, f"expected {_kind(old)} like {old}, got {raw!r}")
        value: Any = new
        if isinstance(old, CommentedSeq):  # a flow list stays a flow list
            value = CommentedSeq(new)
            if old.fa.flow_style():
                value.fa.set_flow_style()
        elif isinstance(old, ScalarString):  # "x" stays double-quoted, 'x' single-quoted
            value = type(old)(new)
        parent = lookup(doc, key.rsplit(".", 1)[0]) if "." in key else doc
        parent[key.rsplit(".", 1)[-1]] = value
        changes.append((key, old, new))
    buf = io.StringIO()
    rt.dump(doc, buf)
    if check is not None:
        check(load_yaml(buf.getvalue()))
    atomic_write_text(path, buf.getvalue())
    return changes

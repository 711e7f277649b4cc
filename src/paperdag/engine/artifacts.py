"""Artifact types: the one extension point saying, per type, how a declared output is recognised (its suffix), read
for a stage, written from what a stage returns, hashed (DVC's md5), compared with a rerun and described. No pickle.

parquet <-> polars.DataFrame; json <-> dict; jsonl <-> list of dicts (one JSON object per line);
safetensors <-> dict[str, numpy.ndarray] (torch tensors accepted); npy <-> numpy.ndarray (allow_pickle=False);
png <- matplotlib Figure or PNG bytes, -> its Path; dir <- an object with save_pretrained(path) or a callable
writer(path), -> its Path.

spec (suffix -> type), the runner (read, write, describe), verify (compare) and paperdag.lock (stable_blob) all ask
TYPES. A new type is a subclass registered once:

    class Csv(ArtifactType):
        name, suffixes = "csv", (".csv",)

        def read(self, path):
            return pl.read_csv(path)

        def write(self, value, path):
            value.write_csv(path)

    register_type(Csv())

A package makes its types known to every paperdag command (which parse pipelines/ before importing any stage module)
through the entry-point group "paperdag.artifact_types" (`csv = "mypkg.types:Csv"`, a class or an instance), loaded
the first time a name or suffix is not among the built-in types.
"""

from __future__ import annotations

import fnmatch
import io
import json
import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from paperdag.engine.errors import StageError
from paperdag.engine.fsutil import dvc_md5

if TYPE_CHECKING:
    import numpy as np

    from paperdag.engine.spec import Artifact

Volatile = tuple[str, ...]  # fnmatch patterns "<output>" or "<output>.<key path or column>"


def volatile(patterns: Volatile, key: str) -> bool:
    return any(fnmatch.fnmatchcase(key, p) for p in patterns)


@dataclass
class Comparison:
    """What `ArtifactType.compare` found between two versions whose bytes differ."""

    diffs: list[str] = field(default_factory=list)  # what differs beyond the tolerance, one line each
    skipped: list[str] = field(default_factory=list)  # volatile values that differ: listed, not compared


class ArtifactType(ABC):
    """One artifact type. `read` and `write` are required; the rest have defaults: DVC's md5, a byte comparison,
    the bytes as their stable content, nothing to describe."""

    name: str = ""
    suffixes: tuple[str, ...] = ()  # file suffixes that select it (a path ending in "/" is the "dir" type)
    media_type: str = ""  # its media type, where it has one (RO-Crate's encodingFormat)
    has_values: bool = False  # volatile patterns may name values inside it ("<output>.<key>"): json, jsonl, parquet

    @abstractmethod
    def read(self, path: Path) -> Any:
        """The value stored at `path`."""

    @abstractmethod
    def write(self, value: Any, path: Path) -> None:
        """Write `value` at `path`; a TypeError or ValueError says what was expected instead."""

    def md5(self, path: Path) -> str:
        """The md5 DVC records for it (dvc.lock, MLflow tags, lineage all key on it)."""
        return dvc_md5(path)

    def compare(self, ours: Path, theirs: Path, name: str, patterns: Volatile, rtol: float) -> Comparison:
        """Compare two versions (called only when their md5s differ); floats within `rtol`, `patterns` not compared."""
        return Comparison(diffs=[f"{name}: bytes differ"])

    def stable_blob(self, path: Path, name: str, patterns: Volatile) -> bytes:
        """A canonical serialisation of the content without the values `patterns` name (paperdag.lock hashes it).
        A type that holds no values a pattern can name (has_values False: paperdag.lock never asks it) is its bytes."""
        return Path(path).read_bytes()

    def describe(self, value: Any) -> dict[str, str]:
        """What is cheap to say about a value read or returned (no file read): keys "schema" and "profile", JSON."""
        return {}


TYPES: dict[str, ArtifactType] = {}


def register_type(t: ArtifactType) -> ArtifactType:
    """Make `t` known by its name and suffixes; a name or suffix already taken is an error."""
    taken = [s for s in t.suffixes if any(s in other.suffixes for other in TYPES.values())]
    if not t.name or t.name in TYPES or taken:
        raise ValueError(f"artifact type {t.name!r}: name or suffix {taken} already registered (or no name)")
    TYPES[t.name] = t
    return t


ENTRY_POINTS = "paperdag.artifact_types"
_plugins_loaded = False


def _load_plugins() -> None:
    """Register the types installed packages declare under ENTRY_POINTS (once per process)."""
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINTS):
        t = ep.load()
        register_type(t() if isinstance(t, type) else t)


def get(name: str) -> ArtifactType:
    if name not in TYPES:
        _load_plugins()
    if name not in TYPES:
        raise StageError(f"unknown artifact type {name} (known: {', '.join(TYPES)})")
    return TYPES[name]


def for_path(path: str) -> ArtifactType | None:
    """The type a declared output path selects: "dir" for a trailing '/', else by suffix; None if none does."""
    if path.endswith("/"):
        return TYPES["dir"]
    suffix = Path(path).suffix
    if suffix not in known_suffixes():
        _load_plugins()
    return next((t for t in TYPES.values() if suffix in t.suffixes), None)


def known_suffixes() -> list[str]:
    return [s for t in TYPES.values() for s in t.suffixes]


def read(atype: str, path: Path) -> Any:
    """What a stage receives for an input of type `atype` at `path`; a missing or corrupt file names the path."""
    t = get(atype)
    if not path.exists():
        raise StageError(f"input {path} is missing: run the stage that produces it first (dvc repro / paperdag run)")
    try:
        return t.read(path)
    except Exception as e:  # a corrupt artifact: name it
        raise StageError(f"input {path} cannot be read as {atype}: {type(e).__name__}: {e}") from e


def write(artifact: Artifact, value: Any, tmp: Path) -> None:
    """Write `value` to the temporary path `tmp`; the caller moves it into place once every output is written."""
    try:
        get(artifact.type).write(value, tmp)
    except (TypeError, ValueError) as e:
        raise StageError(f"output '{artifact.name}' ({artifact.path}): {e}") from e


def describe(atype: str, value: Any) -> dict[str, str]:
    return get(atype).describe(value)


# ---------------------------------------------------------------- the types


class Parquet(ArtifactType):
    name, suffixes, has_values = "parquet", (".parquet",), True
    media_type = "application/vnd.apache.parquet"

    def read(self, path: Path) -> Any:
        import polars as pl

        return pl.read_parquet(path)

    def write(self, value: Any, path: Path) -> None:
        import polars as pl

        if not isinstance(value, pl.DataFrame):
            raise TypeError(f"expected a polars DataFrame, got {type(value).__name__}")
        value.write_parquet(path)

    def compare(self, ours: Path, theirs: Path, name: str, patterns: Volatile, rtol: float) -> Comparison:
        import numpy as np
        import polars as pl

        out = Comparison()
        x, y = pl.read_parquet(ours), pl.read_parquet(theirs)
        if x.schema != y.schema or x.height != y.height:
            out.diffs.append(f"{name}: schema or row count differs ({x.shape} vs {y.shape})")
            return out
        for col in x.columns:
            key = f"{name}.{col}"
            if volatile(patterns, key):
                out.skipped.append(key)
                continue
            a, b = x[col], y[col]
            if a.dtype.is_float():
                if not np.allclose(a.to_numpy(), b.to_numpy(), rtol=rtol, atol=0.0, equal_nan=True):
                    out.diffs.append(f"{key}: floats differ beyond rtol={rtol}")
            elif not a.equals(b):
                out.diffs.append(f"{key}: values differ")
        return out

    def stable_blob(self, path: Path, name: str, patterns: Volatile) -> bytes:
        import polars as pl

        df = pl.read_parquet(path)
        df = df.select([c for c in df.columns if not volatile(patterns, f"{name}.{c}")])
        buf = io.BytesIO()
        df.write_ipc(buf, compression="uncompressed")
        return buf.getvalue()

    def describe(self, value: Any) -> dict[str, str]:
        if not hasattr(value, "schema"):
            return {}
        out = {"profile": json.dumps({"num_rows": value.height, "num_columns": value.width})}
        types = [_COLSPEC_TYPES.get(type(dtype).__name__) for dtype in value.schema.values()]
        if all(types):  # a column MLflow's format cannot name (a list, a struct): no schema rather than a wrong one
            cols = [{"type": t, "name": n, "required": True} for n, t in zip(value.schema, types, strict=True)]
            out["schema"] = json.dumps({"mlflow_colspec": cols})
        return out


# polars dtype name -> the column type of MLflow's schema format ("mlflow_colspec"), for the datasets its UI shows
_COLSPEC_TYPES = {"Float64": "double", "Float32": "float", "Int64": "long", "Int32": "integer", "Int16": "integer",
                  "Int8": "integer", "UInt32": "long", "UInt16": "integer", "UInt8": "integer", "Boolean": "boolean",
                  "String": "string", "Utf8": "string", "Binary": "binary", "Datetime": "datetime", "Date": "datetime"}


class Json(ArtifactType):
    name, suffixes, has_values = "json", (".json",), True
    media_type = "application/json"

    def read(self, path: Path) -> Any:
        return json.loads(path.read_text())

    def write(self, value: Any, path: Path) -> None:
        if not isinstance(value, dict):
            raise TypeError(f"expected a dict, got {type(value).__name__}")
        path.write_text(json.dumps(_plain(value), indent=2, sort_keys=False, allow_nan=False) + "\n")

    def compare(self, ours: Path, theirs: Path, name: str, patterns: Volatile, rtol: float) -> Comparison:
        out = Comparison()
        _cmp_json(self.read(ours), self.read(theirs), name, patterns, rtol, out)
        return out

    def stable_blob(self, path: Path, name: str, patterns: Volatile) -> bytes:
        return _canonical(_masked(self.read(path), name, patterns))


class Jsonl(ArtifactType):
    """One JSON object per line (agent traces, battle logs), read as a list of dicts: such records are ragged and
    nested (a tool call here, a message list there), which a table would null-fill or turn into structs; a stage that
    wants a frame builds one (`pl.DataFrame(rows)`). A volatile pattern "<output>.<key>" names a key of every row,
    as "<output>.<column>" names a Parquet column."""

    name, suffixes, has_values = "jsonl", (".jsonl",), True
    media_type = "application/jsonl"

    def read(self, path: Path) -> Any:
        rows = []
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if line.strip():
                row = json.loads(line)
                if not isinstance(row, dict):
                    raise ValueError(f"line {i} is a JSON {type(row).__name__}, not an object")
                rows.append(row)
        return rows

    def write(self, value: Any, path: Path) -> None:
        if not isinstance(value, (list, tuple)) or not all(isinstance(r, dict) for r in value):
            raise TypeError(f"expected a list of dicts (one per line), got {type(value).__name__}")
        with open(path, "w") as f:
            for i, row in enumerate(value):
                try:
                    f.write(json.dumps(_plain(row), allow_nan=False, separators=(",", ":")) + "\n")
                except ValueError as e:
                    raise ValueError(f"row {i}: {e}") from None

    def compare(self, ours: Path, theirs: Path, name: str, patterns: Volatile, rtol: float) -> Comparison:
        x, y = self.read(ours), self.read(theirs)
        out = Comparison()
        if len(x) != len(y):
            out.diffs.append(f"{name}: {len(x)} rows vs {len(y)}")
            return out
        for i, (u, v) in enumerate(zip(x, y, strict=True)):
            row = Comparison()
            _cmp_json(u, v, name, patterns, rtol, row)
            out.diffs += [f"row {i}: {d}" for d in row.diffs]
            out.skipped += [s for s in row.skipped if s not in out.skipped]
        return out

    def stable_blob(self, path: Path, name: str, patterns: Volatile) -> bytes:
        return b"\n".join(_canonical(_masked(row, name, patterns)) for row in self.read(path))

    def describe(self, value: Any) -> dict[str, str]:
        return {"profile": json.dumps({"num_rows": len(value)})} if isinstance(value, list) else {}


class Safetensors(ArtifactType):
    name, suffixes = "safetensors", (".safetensors",)

    def read(self, path: Path) -> Any:
        from safetensors.numpy import load_file

        return load_file(path)

    def write(self, value: Any, path: Path) -> None:
        from safetensors.numpy import save_file

        if not isinstance(value, dict):
            raise TypeError(f"expected a dict of arrays, got {type(value).__name__}")
        save_file({k: _to_numpy(v) for k, v in value.items()}, path)

    def compare(self, ours: Path, theirs: Path, name: str, patterns: Volatile, rtol: float) -> Comparison:
        return _cmp_arrays(self.read(ours), self.read(theirs), name, rtol)

    def describe(self, value: Any) -> dict[str, str]:
        if not isinstance(value, dict):
            return {}
        sizes = [int(math.prod(v.shape)) for v in value.values() if hasattr(v, "shape")]
        return {"profile": json.dumps({"num_tensors": len(value), "num_elements": sum(sizes)})}


class Npy(ArtifactType):
    name, suffixes = "npy", (".npy",)

    def read(self, path: Path) -> Any:
        import numpy as np

        return np.load(path, allow_pickle=False)

    def write(self, value: Any, path: Path) -> None:
        import numpy as np

        with open(path, "wb") as f:
            np.save(f, _to_numpy(value), allow_pickle=False)

    def compare(self, ours: Path, theirs: Path, name: str, patterns: Volatile, rtol: float) -> Comparison:
        return _cmp_arrays({"": self.read(ours)}, {"": self.read(theirs)}, name, rtol)

    def describe(self, value: Any) -> dict[str, str]:
        if not hasattr(value, "shape"):
            return {}
        return {"profile": json.dumps({"shape": list(value.shape), "dtype": str(value.dtype)})}


class Png(ArtifactType):
    name, suffixes = "png", (".png",)
    media_type = "image/png"

    def read(self, path: Path) -> Any:
        return path

    def write(self, value: Any, path: Path) -> None:
        if isinstance(value, (bytes, bytearray)):
            path.write_bytes(value)
        elif hasattr(value, "savefig"):
            import matplotlib.pyplot as plt

            # no Software tag: the PNG bytes then depend only on the figure, not on the matplotlib version
            value.savefig(path, format="png", dpi=110, metadata={"Software": None})
            plt.close(value)
        else:
            raise TypeError(f"expected a matplotlib Figure or PNG bytes, got {type(value).__name__}")


class Dir(ArtifactType):
    """A directory (a saved Hugging Face model): the stage reads its path. Compared file by file, safetensors files
    inside it within the tolerance."""

    name = "dir"

    def read(self, path: Path) -> Any:
        return path

    def write(self, value: Any, path: Path) -> None:
        path.mkdir(parents=True)
        if hasattr(value, "save_pretrained"):
            value.save_pretrained(path)
        elif callable(value):
            value(path)
        else:
            raise TypeError(f"expected an object with save_pretrained(path) or a writer(path), got {type(value).__name__}")

    def compare(self, ours: Path, theirs: Path, name: str, patterns: Volatile, rtol: float) -> Comparison:
        files = lambda d: {p.relative_to(d).as_posix() for p in d.rglob("*") if p.is_file()}  # noqa: E731
        fx, fy = files(ours), files(theirs)
        if fx != fy:
            return Comparison(diffs=[f"{name}: files differ: {sorted(fx ^ fy)[:5]}"])
        out = Comparison()
        tensors = TYPES["safetensors"]
        for rel in sorted(fx):
            if dvc_md5(ours / rel) == dvc_md5(theirs / rel):
                continue
            if rel.endswith(".safetensors"):
                out.diffs += tensors.compare(ours / rel, theirs / rel, f"{name}/{rel}", (), rtol).diffs
            else:
                out.diffs.append(f"{name}/{rel}: bytes differ")
        return out


for _t in (Parquet(), Json(), Jsonl(), Safetensors(), Npy(), Png(), Dir()):
    register_type(_t)


# ---------------------------------------------------------------- helpers of the types


def _to_numpy(v: Any) -> Any:
    import numpy as np

    if hasattr(v, "detach"):  # torch tensor
        return v.detach().cpu().contiguous().numpy()
    return np.ascontiguousarray(v)


def _plain(v: Any) -> Any:
    """numpy scalars/arrays -> plain JSON values, mappings (a matrix item) -> objects; NaN/inf rejected."""
    if isinstance(v, Mapping):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if hasattr(v, "tolist"):
        return _plain(v.tolist())
    if isinstance(v, float) and not math.isfinite(v):
        raise ValueError(f"non-finite number {v} in JSON output")
    return v


def _canonical(x: Any) -> bytes:
    return json.dumps(x, sort_keys=True, separators=(",", ":")).encode()


def _masked(x: Any, key: str, patterns: Volatile) -> Any:
    """x without the values `patterns` name (keys joined with '.', list items by index)."""
    if isinstance(x, dict):
        return {k: _masked(v, f"{key}.{k}", patterns) for k, v in x.items() if not volatile(patterns, f"{key}.{k}")}
    if isinstance(x, list):
        return [_masked(v, f"{key}.{i}", patterns) for i, v in enumerate(x) if not volatile(patterns, f"{key}.{i}")]
    return x


def _cmp_json(x: Any, y: Any, key: str, patterns: Volatile, rtol: float, out: Comparison) -> None:
    import numpy as np

    if volatile(patterns, key):
        if x != y:
            out.skipped.append(key)
        return
    if isinstance(x, dict) and isinstance(y, dict):
        for k in sorted(set(x) | set(y)):
            if k not in x or k not in y:
                out.diffs.append(f"{key}.{k}: present on one side only")
            else:
                _cmp_json(x[k], y[k], f"{key}.{k}", patterns, rtol, out)
    elif isinstance(x, list) and isinstance(y, list) and len(x) == len(y):
        for i, (u, v) in enumerate(zip(x, y, strict=True)):
            _cmp_json(u, v, f"{key}.{i}", patterns, rtol, out)
    elif isinstance(x, (int, float)) and isinstance(y, (int, float)) and not isinstance(x, bool):
        if not np.isclose(x, y, rtol=rtol, atol=0.0):
            out.diffs.append(f"{key}: {x} != {y}")
    elif x != y:
        out.diffs.append(f"{key}: {x!r} != {y!r}")


def _cmp_arrays(x: dict[str, np.ndarray], y: dict[str, np.ndarray], name: str, rtol: float) -> Comparison:
    import numpy as np

    out = Comparison()
    if set(x) != set(y):
        out.diffs.append(f"{name}: tensor names differ")
        return out
    for k in x:
        a, b = x[k], y[k]
        if a.shape != b.shape or a.dtype != b.dtype:
            out.diffs.append(f"{name}[{k}]: shape/dtype {a.shape}/{a.dtype} vs {b.shape}/{b.dtype}")
        elif np.issubdtype(a.dtype, np.floating):
            if not np.allclose(a, b, rtol=rtol, atol=0.0, equal_nan=True):
                out.diffs.append(f"{name}[{k}]: max abs diff {np.max(np.abs(a - b)):.3g} beyond rtol={rtol}")
        elif not np.array_equal(a, b):
            out.diffs.append(f"{name}[{k}]: values differ")
    return out


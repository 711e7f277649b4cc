"""Typed artifact I/O: what a stage receives for each input and how what it returns is written. No pickle.

parquet <-> polars.DataFrame; json <-> dict; safetensors <-> dict[str, numpy.ndarray] (torch tensors accepted);
npy <-> numpy.ndarray (allow_pickle=False); png <- matplotlib Figure or PNG bytes;
dir <- an object with save_pretrained(path) or a callable writer(path); dir -> its Path.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from paperdag.engine.errors import StageError
from paperdag.engine.spec import Artifact, ArtifactType


def read(atype: ArtifactType, path: Path) -> Any:
    if not path.exists():
        raise StageError(f"input {path} is missing: run the stage that produces it first (dvc repro / paperdag run)")
    try:
        if atype == "parquet":
            import polars as pl

            return pl.read_parquet(path)
        if atype == "json":
            return json.loads(path.read_text())
        if atype == "safetensors":
            from safetensors.numpy import load_file

            return load_file(path)
        if atype == "npy":
            import numpy as np

            return np.load(path, allow_pickle=False)
        if atype in ("dir", "png"):
            return path
    except Exception as e:  # a corrupt artifact: name it
        raise StageError(f"input {path} cannot be read as {atype}: {type(e).__name__}: {e}") from e
    raise StageError(f"unknown artifact type {atype}")


def write(artifact: Artifact, value: Any, tmp: Path) -> None:
    """Write `value` to the temporary path `tmp`; the caller moves it into place once every output is written."""
    t = artifact.type
    try:
        if t == "parquet":
            import polars as pl

            if not isinstance(value, pl.DataFrame):
                raise TypeError(f"expected a polars DataFrame, got {type(value).__name__}")
            value.write_parquet(tmp)
        elif t == "json":
            if not isinstance(value, dict):
                raise TypeError(f"expected a dict, got {type(value).__name__}")
            tmp.write_text(json.dumps(_plain(value), indent=2, sort_keys=False, allow_nan=False) + "\n")
        elif t == "safetensors":
            from safetensors.numpy import save_file

            if not isinstance(value, dict):
                raise TypeError(f"expected a dict of arrays, got {type(value).__name__}")
            save_file({k: _to_numpy(v) for k, v in value.items()}, tmp)
        elif t == "npy":
            import numpy as np

            with open(tmp, "wb") as f:
                np.save(f, _to_numpy(value), allow_pickle=False)
        elif t == "png":
            if isinstance(value, (bytes, bytearray)):
                tmp.write_bytes(value)
            elif hasattr(value, "savefig"):
                import matplotlib.pyplot as plt

                # no Software tag: the PNG bytes then depend only on the figure, not on the matplotlib version
                value.savefig(tmp, format="png", dpi=110, metadata={"Software": None})
                plt.close(value)
            else:
                raise TypeError(f"expected a matplotlib Figure or PNG bytes, got {type(value).__name__}")
        elif t == "dir":
            tmp.mkdir(parents=True)
            if hasattr(value, "save_pretrained"):
                value.save_pretrained(tmp)
            elif callable(value):
                value(tmp)
            else:
                raise TypeError(f"expected an object with save_pretrained(path) or a writer(path), got {type(value).__name__}")
    except (TypeError, ValueError) as e:
        raise StageError(f"output '{artifact.name}' ({artifact.path}): {e}") from e


def _to_numpy(v: Any) -> Any:
    import numpy as np

    if hasattr(v, "detach"):  # torch tensor
        return v.detach().cpu().contiguous().numpy()
    return np.ascontiguousarray(v)


def _plain(v: Any) -> Any:
    """numpy scalars/arrays -> plain JSON values; NaN/inf rejected with the key path."""
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if hasattr(v, "tolist"):
        return _plain(v.tolist())
    if isinstance(v, float) and not math.isfinite(v):
        raise ValueError(f"non-finite number {v} in JSON output")
    return v


# polars dtype name -> the column type of MLflow's schema format ("mlflow_colspec"), for the datasets its UI shows
_COLSPEC_TYPES = {"Float64": "double", "Float32": "float", "Int64": "long", "Int32": "integer", "Int16": "integer",
                  "Int8": "integer", "UInt32": "long", "UInt16": "integer", "UInt8": "integer", "Boolean": "boolean",
                  "String": "string", "Utf8": "string", "Binary": "binary", "Datetime": "datetime", "Date": "datetime"}


def describe(atype: ArtifactType, value: Any) -> dict[str, str]:
    """What is cheap to say about an artifact's content from the value a stage read or returned (no file read):
    a table's schema (MLflow's format) and size, an array's shape and dtype. Keys "schema" and "profile", JSON."""
    if atype == "parquet" and hasattr(value, "schema"):
        out = {"profile": json.dumps({"num_rows": value.height, "num_columns": value.width})}
        types = [_COLSPEC_TYPES.get(type(dtype).__name__) for dtype in value.schema.values()]
        if all(types):  # a column MLflow's format cannot name (a list, a struct): no schema rather than a wrong one
            cols = [{"type": t, "name": n, "required": True} for n, t in zip(value.schema, types)]
            out["schema"] = json.dumps({"mlflow_colspec": cols})
        return out
    if atype == "npy" and hasattr(value, "shape"):
        return {"profile": json.dumps({"shape": list(value.shape), "dtype": str(value.dtype)})}
    if atype == "safetensors" and isinstance(value, dict):
        sizes = [int(math.prod(v.shape)) for v in value.values() if hasattr(v, "shape")]
        return {"profile": json.dumps({"num_tensors": len(value), "num_elements": sum(sizes)})}
    return {}

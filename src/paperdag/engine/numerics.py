"""Portable numerics: everything outside the code and its inputs that decides the bits a stage computes.

A float result depends on which kernels run and how a reduction is split: ATen's SIMD level, MKL's code path,
oneDNN's ISA, numpy's dispatched SIMD loops, OpenBLAS's core kernel, and the number of threads each library uses.
Left alone, each library picks them from the CPU it finds, so the same stage trains a different model on an
AVX-512 Intel machine than on an AVX2 AMD one. `base.numerics` in params.yaml pins them for every stage process:

    mode: portable   every setting below is forced (whatever the caller exported), kernels no newer than SSE4.1
    mode: native     only thread counts and the hash seed are fixed; kernels are what the machine (or the caller's
                     environment) picks: fastest, but the bits change with the CPU

Environment variables are read when a library loads, so `paperdag stage` sets them and re-executes itself before
numpy or torch is imported (`ensure`). Every stage lists `base.numerics` among its params: changing it re-stales
every stage, and dvc.lock records the setting each output was made under.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any

from paperdag.engine.errors import SpecError

KEY = "base.numerics"
_MARK = "PAPERDAG_NUMERICS"  # set in the re-executed process: the settings it was started with

# numpy's dispatchable SIMD features beyond the x86-64 baseline it is built for (SSE..SSE3); disabling one the CPU
# lacks is a no-op, so the same list serves every x86 machine
_NUMPY_DISPATCH = ("SSSE3 SSE41 POPCNT SSE42 AVX F16C FMA3 AVX2 AVX512F AVX512CD AVX512_KNL AVX512_KNM AVX512_SKX "
                   "AVX512_CLX AVX512_CNL AVX512_ICL AVX512_SPR AVX512_FP16 AVX512_BF16")
_THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS",
                "VECLIB_MAXIMUM_THREADS", "POLARS_MAX_THREADS", "RAYON_NUM_THREADS")


@dataclass(frozen=True)
class Numerics:
    mode: str  # portable | native
    threads: int  # intra-op threads of every library (and torch's inter-op pool)
    aten_cpu_capability: str  # ATEN_CPU_CAPABILITY: default (no explicit SIMD), avx2, avx512
    mkl_cbwr: str  # MKL_CBWR: MKL's conditional numerical reproducibility branch (COMPATIBLE: same on any x86)
    onednn_max_cpu_isa: str  # ONEDNN_MAX_CPU_ISA (and DNNL_MAX_CPU_ISA)
    openblas_coretype: str  # OPENBLAS_CORETYPE: the OpenBLAS kernel numpy / scipy use
    numpy_simd: str  # baseline: NPY_DISABLE_CPU_FEATURES turns off every dispatched SIMD loop; native: left on

    def env(self) -> dict[str, str]:
        """The environment variables a stage process runs under (on top of the caller's)."""
        env = {v: str(self.threads) for v in _THREAD_VARS}
        env["PYTHONHASHSEED"] = "0"
        env["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"  # deterministic cuBLAS on a GPU; inert on a CPU
        if self.mode == "portable":
            env["ATEN_CPU_CAPABILITY"] = self.aten_cpu_capability
            env["MKL_CBWR"] = self.mkl_cbwr
            env["ONEDNN_MAX_CPU_ISA"] = env["DNNL_MAX_CPU_ISA"] = self.onednn_max_cpu_isa
            env["OPENBLAS_CORETYPE"] = self.openblas_coretype
            if self.numpy_simd == "baseline":
                env["NPY_DISABLE_CPU_FEATURES"] = _NUMPY_DISPATCH
        return env


_FIELDS = {"mode": str, "threads": int, "aten_cpu_capability": str, "mkl_cbwr": str, "onednn_max_cpu_isa": str,
           "openblas_coretype": str, "numpy_simd": str}
_CHOICES = {"mode": ("portable", "native"), "numpy_simd": ("baseline", "native"),
            "aten_cpu_capability": ("default", "avx2", "avx512")}


def from_params(params: dict[str, Any]) -> Numerics:
    """base.numerics, validated; errors name params.yaml and the key."""
    doc = params.get("base", {}).get("numerics")
    if not isinstance(doc, dict):
        raise SpecError("params.yaml", KEY, "required: a mapping with " + ", ".join(_FIELDS))
    for key in doc:
        if key not in _FIELDS:
            raise SpecError("params.yaml", f"{KEY}.{key}", f"unknown key (allowed: {', '.join(_FIELDS)})")
    values: dict[str, Any] = {}
    for key, typ in _FIELDS.items():
        if key not in doc:
            raise SpecError("params.yaml", f"{KEY}.{key}", "missing")
        v = doc[key]
        if not isinstance(v, typ) or isinstance(v, bool):
            raise SpecError("params.yaml", f"{KEY}.{key}", f"expected {typ.__name__}, got {v!r}")
        if key in _CHOICES and v not in _CHOICES[key]:
            raise SpecError("params.yaml", f"{KEY}.{key}", f"expected one of {', '.join(_CHOICES[key])}, got {v!r}")
        values[key] = v
    if values["threads"] < 1:
        raise SpecError("params.yaml", f"{KEY}.threads", f"expected a positive integer, got {values['threads']}")
    return Numerics(**values)


def _signature(n: Numerics) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(vars(n).items()))


def environment(n: Numerics) -> dict[str, str]:
    """The variables `ensure` sets: what the environment of a process started under these numerics holds."""
    return {**n.env(), _MARK: _signature(n)}


def ensure(n: Numerics, argv: list[str]) -> None:
    """Re-execute this process (`python -m paperdag ARGV`) under the numerics' environment, unless it already runs
    under it. Called before anything imports numpy or torch."""
    env = n.env()
    wrong = sorted(k for k, v in env.items() if os.environ.get(k) != v)
    if not wrong and os.environ.get(_MARK) == _signature(n):
        return
    if os.environ.get(_MARK) == _signature(n):  # already re-executed once: something resets the environment
        raise RuntimeError(f"numerics: the environment does not keep {wrong} after re-executing")
    new = {**os.environ, **environment(n)}
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, "-m", "paperdag", *argv], new)


def apply_in_process(n: Numerics) -> None:
    """What environment variables cannot say: torch's thread pools and its deterministic kernels (CPU and GPU)."""
    if "torch" not in sys.modules:
        return
    import torch

    torch.set_num_threads(n.threads)
    try:
        torch.set_num_interop_threads(n.threads)
    except RuntimeError:  # only allowed before the first parallel work; the environment already fixed OpenMP
        pass
    _deterministic(torch)
    if torch.backends.cudnn.is_available():
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False


def _deterministic(torch: Any) -> None:
    """torch.use_deterministic_algorithms(True, warn_only=True) without its import of torch._inductor.config (torch
    and torch._dynamo: ~1.5 CPU-s in every stage process that imports torch) made only to tell torch.compile, which
    no stage calls: ATen's flag is set directly, and inductor's config gets the setting if and when it is imported.
    A torch without that entry point gets the public call."""
    from paperdag._lazy import when_imported

    set_flag = getattr(torch._C, "_set_deterministic_algorithms", None)
    if set_flag is None:
        torch.use_deterministic_algorithms(True, warn_only=True)
        return
    set_flag(True, warn_only=True)
    when_imported("torch._inductor.config", lambda config: setattr(config, "deterministic", True))


def tags(n: Numerics) -> dict[str, str]:
    """What the MLflow run records: the setting, the variables, and what the libraries actually picked."""
    out = {f"numerics.{k}": str(v) for k, v in vars(n).items()}
    out.update({f"numerics.env.{k}": os.environ.get(k, "") for k in sorted(n.env()) if k not in _THREAD_VARS[1:]})
    if "torch" in sys.modules:
        import torch

        out["numerics.torch_cpu_capability"] = torch.backends.cpu.get_cpu_capability()
        out["numerics.torch_threads"] = str(torch.get_num_threads())
    return out

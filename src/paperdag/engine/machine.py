"""The machine a stage ran on, as far as it can decide a float's bits: the CPU (vendor, family / model / stepping,
the instruction-set extensions that libraries dispatch on) and the C library (glibc picks its libm variants by CPU).

Portable numerics (numerics.py) pin what the libraries can be told; this records what they could not, so that a
`paperdag verify --against-lock` on a fresh clone says whether an output was recorded on the machine it runs on or on
another one: a bit-identical rerun on another CPU is evidence of portability, a difference there is a lead.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
from functools import lru_cache
from pathlib import Path
from typing import Any

CPUINFO = Path("/proc/cpuinfo")
# the extensions numeric libraries dispatch on (ATen, MKL, oneDNN, OpenBLAS, numpy, glibc's libm); the full flag
# set is kept as a digest only
ISA = ("sse4_1", "sse4_2", "avx", "f16c", "fma", "fma4", "avx2", "avx512f", "avx512dq", "avx512bw", "avx512vl",
       "avx512_vnni", "avx512_bf16", "avx512_fp16", "avx_vnni", "amx_tile", "amx_bf16", "amx_int8")


def parse_cpuinfo(text: str) -> dict[str, Any]:
    """The first processor's entry of a /proc/cpuinfo text (every core of a machine reports the same)."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break
            continue
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    flags = sorted(set(fields.get("flags", "").split()))
    return {
        "cpu": fields.get("model name", platform.processor() or platform.machine()),
        "vendor": fields.get("vendor_id", ""),
        "family_model_stepping": "/".join(fields.get(k, "?") for k in ("cpu family", "model", "stepping")),
        "isa": [f for f in ISA if f in flags],
        "flags_md5": hashlib.md5(" ".join(flags).encode()).hexdigest(),
    }


@lru_cache(maxsize=1)
def describe() -> dict[str, Any]:
    """This machine: its CPU, C library and core count (the thread count a stage uses is pinned by numerics)."""
    try:
        cpu = parse_cpuinfo(CPUINFO.read_text(errors="replace"))
    except OSError:  # not Linux: what the platform module knows
        cpu = {"cpu": platform.processor() or platform.machine(), "vendor": "", "family_model_stepping": "",
               "isa": [], "flags_md5": ""}
    libc, version = platform.libc_ver()
    return {**cpu, "libc": f"{libc} {version}".strip(), "arch": platform.machine(), "cores": os.cpu_count() or 0}


def identity(desc: dict[str, Any]) -> str:
    """A short id of what can change a float's bits (the core count cannot: threads are pinned)."""
    keep = {k: v for k, v in desc.items() if k != "cores"}
    return hashlib.sha256(json.dumps(keep, sort_keys=True).encode()).hexdigest()[:12]


def this_id() -> str:
    return identity(describe())


def summary(desc: dict[str, Any] | None) -> str:
    """One line: 'AMD EPYC (AuthenticAMD 26/2/1, avx2 avx512f ..., glibc 2.36)'."""
    if not desc:
        return "a machine not recorded"
    isa = [str(x) for x in desc.get("isa", [])]
    top = next((x for x in ("amx_tile", "avx512f", "avx2", "avx", "sse4_2") if x in isa), "baseline")
    return f"{desc.get('cpu', '?')} ({desc.get('vendor', '')} {desc.get('family_model_stepping', '')}, {top}, {desc.get('libc', '')})"

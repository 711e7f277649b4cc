"""Glue of the grid pipeline: make@<arm>-<replicate> (a matrix) -> gather."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MakeParams:
    scale: int
    factor: float
    arm: str
    replicate: int
    seed: int


@dataclass(frozen=True)
class GatherParams:
    pass


def make(params: MakeParams) -> dict:
    value = params.scale * params.factor + params.replicate
    return {"values": {"arm": params.arm, "replicate": params.replicate, "value": value, "seed": params.seed}}


def gather(params: GatherParams, values: dict[str, dict]) -> dict:
    return {"summary": {"elements": list(values), "total": sum(v["value"] for v in values.values()),
                        "seeds": sorted({v["seed"] for v in values.values()})}}

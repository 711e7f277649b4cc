"""Glue of the grid pipeline: make@<arm>-<replicate> (a matrix) -> gather."""

from __future__ import annotations

from dataclasses import dataclass

from paperdag.engine import Item


@dataclass(frozen=True)
class MakeParams:
    scale: int
    factor: float
    item: Item  # the matrix element: item.arm, item.replicate
    seed: int


@dataclass(frozen=True)
class GatherParams:
    pass


def make(params: MakeParams) -> dict:
    value = params.scale * params.factor + params.item.replicate
    return {"values": {"arm": params.item.arm, "replicate": params.item.replicate, "value": value, "seed": params.seed}}


def gather(params: GatherParams, values: dict[Item, dict]) -> dict:
    return {"summary": {"elements": [str(item) for item in values], "total": sum(v["value"] for v in values.values()),
                        "seeds": sorted({v["seed"] for v in values.values()})}}

"""Closed-loop PDM score (NAVSIM): PDMS = NC * DAC * (5 TTC + 5 EP + 2 C) / 12, and open-loop L2 at horizons."""

from __future__ import annotations

import numpy as np


def pdm_score(nc: float, dac: float, ttc: float, ep: float, comfort: float) -> float:
    """No-collision and drivable-area compliance multiply; time-to-collision, ego progress, comfort are weighted 5/5/2."""
    return nc * dac * (5 * ttc + 5 * ep + 2 * comfort) / 12


def ego_progress(progress: float, reference: float, min_reference: float = 5.0) -> float:
    """EP: progress as a share of the reference planner's (the expert's) on the same scenario, in [0, 1]; 1 when the
    reference barely moves (NAVSIM's rule for a small denominator)."""
    if reference < min_reference:
        return 1.0
    return float(np.clip(progress / reference, 0.0, 1.0))


def l2_at(pred: np.ndarray, target: np.ndarray, interval: float, seconds: tuple[float, ...]) -> dict[str, float]:
    """Mean displacement error (metres) at each horizon: waypoint k is at (k + 1) * interval seconds."""
    err = np.linalg.norm(pred - target, axis=-1)  # (N, K)
    out = {}
    for s in seconds:
        k = round(s / interval) - 1
        if not 0 <= k < err.shape[1]:
            raise ValueError(f"l2_at: horizon {s} s is outside the {err.shape[1]} waypoints at {interval} s")
        out[f"{s:g}s"] = float(err[:, k].mean())
    return out


def episode_rows(arm: str, replicate: int, ids: list[int], episodes: list, reference: list[float]) -> list[dict]:
    """A row per closed-loop episode (one per held-out scenario): its PDMS and parts, infractions and progress;
    `reference` is the expert's progress per scenario (EP's denominator)."""
    rows = []
    for sid, e, ref in zip(ids, episodes, reference, strict=True):
        nc, dac, ttc, c = float(not e.collision), float(not e.off_road), float(not e.ttc), float(e.comfortable)
        ep = ego_progress(e.progress, ref)
        rows.append({"arm": arm, "replicate": replicate, "scenario": sid, "NC": nc, "DAC": dac, "TTC": ttc, "EP": ep, "C": c,
                     "PDMS": 100 * pdm_score(nc, dac, ttc, ep, c), "collision": e.collision, "off_road": e.off_road,
                     "route_completion": e.route_completion, "progress": e.progress})
    return rows

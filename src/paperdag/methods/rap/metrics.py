"""Closed-loop PDM score (NAVSIM): PDMS = NC * DAC * (5 TTC + 5 EP + 2 C) / 12, NAVSIM's ego-progress and comfort
rules, and open-loop L2 at horizons."""

from __future__ import annotations

import numpy as np

# NAVSIM's comfort bounds (navsim/planning/simulation/planner/pdm_planner/scoring/pdm_comfort_metrics.py):
# m/s^2, m/s^3, rad/s, rad/s^2; the Savitzky-Golay window is at most 15 samples, polynomial order 2
COMFORT_BOUNDS = {"min_lon_accel": -4.05, "max_lon_accel": 2.40, "max_abs_lat_accel": 4.89, "max_abs_yaw_rate": 0.95,
                  "max_abs_yaw_accel": 1.93, "max_abs_lon_jerk": 4.13, "max_abs_mag_jerk": 8.37}
SAVGOL_WINDOW, SAVGOL_ORDER = 15, 2
EP_MIN_PROGRESS = 5.0  # metres: NAVSIM normalises ego progress only when the best non-failing progress exceeds it


def pdm_score(nc: float, dac: float, ttc: float, ep: float, comfort: float) -> float:
    """No-collision and drivable-area compliance multiply; time-to-collision, ego progress, comfort are weighted 5/5/2."""
    return nc * dac * (5 * ttc + 5 * ep + 2 * comfort) / 12


def ego_progress(progress: float, ego_ok: bool, reference: float, reference_ok: bool, min_progress: float = EP_MIN_PROGRESS) -> float:
    """NAVSIM's EP: the ego's progress over the best progress among the non-failing proposals (NC and DAC both 1;
    here the expert's reference and the ego itself), clipped to [0, 1]; 0 when the ego fails; 1 when that best
    progress is at most `min_progress` metres (too little to normalise by)."""
    if not ego_ok:
        return 0.0
    best = max(progress, reference if reference_ok else 0.0)
    if best <= min_progress:
        return 1.0
    return float(np.clip(progress / best, 0.0, 1.0))


def _savgol(x: np.ndarray, dt: float, deriv: int) -> np.ndarray:
    from scipy.signal import savgol_filter

    window = min(SAVGOL_WINDOW, len(x) if len(x) % 2 else len(x) - 1)
    return savgol_filter(x, window, min(SAVGOL_ORDER, window - 1), deriv=deriv, delta=dt, axis=0, mode="interp")


def comfort_values(trajectory: np.ndarray, dt: float) -> dict[str, float]:
    """NAVSIM's comfort quantities of a trajectory (T, >=3: x, y, yaw): Savitzky-Golay derivatives (window <= 15,
    order 2) of the positions and the unwrapped heading; accelerations and jerk split into the longitudinal and
    lateral axes of the heading; the extremes each bound tests."""
    xy, yaw = trajectory[:, :2], np.unwrap(trajectory[:, 2])
    accel = _savgol(xy, dt, 2)  # (T, 2) world frame
    jerk = _savgol(accel, dt, 1)
    heading = np.stack([np.cos(yaw), np.sin(yaw)], 1)
    normal = np.stack([-np.sin(yaw), np.cos(yaw)], 1)
    lon_accel, lat_accel = (accel * heading).sum(1), (accel * normal).sum(1)
    yaw_rate, yaw_accel = _savgol(yaw, dt, 1), _savgol(yaw, dt, 2)
    return {"min_lon_accel": float(lon_accel.min()), "max_lon_accel": float(lon_accel.max()),
            "max_abs_lat_accel": float(np.abs(lat_accel).max()), "max_abs_yaw_rate": float(np.abs(yaw_rate).max()),
            "max_abs_yaw_accel": float(np.abs(yaw_accel).max()), "max_abs_lon_jerk": float(np.abs((jerk * heading).sum(1)).max()),
            "max_abs_mag_jerk": float(np.linalg.norm(jerk, axis=1).max())}


def comfortable(trajectory: np.ndarray, dt: float) -> bool:
    """C = 1 when every comfort quantity is within NAVSIM's bound (trajectories under 4 samples: 1)."""
    if len(trajectory) < 4:
        return True
    v, b = comfort_values(trajectory, dt), COMFORT_BOUNDS
    return bool(v["min_lon_accel"] >= b["min_lon_accel"] and all(v[k] <= b[k] for k in b if k != "min_lon_accel"))


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


def episode_rows(arm: str, replicate: int, ids: list[int], episodes: list, reference: list, dt: float) -> list[dict]:
    """A row per closed-loop episode (one per held-out scenario): its PDMS and parts, infractions and progress;
    `reference` holds the expert's episode per scenario (EP's other proposal)."""
    rows = []
    for sid, e, ref in zip(ids, episodes, reference, strict=True):
        nc, dac, ttc, c = float(not e.collision), float(not e.off_road), float(not e.ttc), float(comfortable(e.trajectory, dt))
        ep = ego_progress(e.progress, bool(nc * dac), ref.progress, not (ref.collision or ref.off_road))
        rows.append({"arm": arm, "replicate": replicate, "scenario": sid, "NC": nc, "DAC": dac, "TTC": ttc, "EP": ep, "C": c,
                     "PDMS": 100 * pdm_score(nc, dac, ttc, ep, c), "collision": e.collision, "off_road": e.off_road,
                     "route_completion": e.route_completion, "progress": e.progress})
    return rows

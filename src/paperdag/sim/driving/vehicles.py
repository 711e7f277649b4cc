"""Vehicle dynamics and checks: kinematic bicycle ego, IDM car-following, oriented boxes, collision and off-road tests.

A state is an array (..., 5): x, y, yaw, v, a (metres, radians, m/s, m/s^2).
"""

from __future__ import annotations

import numpy as np

from paperdag.sim.driving.road import Road

X, Y, YAW, V, A = range(5)
LENGTH, WIDTH, WHEELBASE = 4.5, 1.9, 2.7  # one car size for everyone
MAX_STEER, ACCEL_RANGE = 0.5, (-6.0, 3.0)


def bicycle_step(state: np.ndarray, accel: np.ndarray, steer: np.ndarray, dt: float, wheelbase: float = WHEELBASE) -> np.ndarray:
    """One explicit-Euler step of the kinematic bicycle model (rear-axle reference): x' = v cos(yaw), y' = v sin(yaw),
    yaw' = v tan(steer) / L, v' = a; speed never negative."""
    x, y, yaw, v = state[..., X], state[..., Y], state[..., YAW], state[..., V]
    accel = np.clip(accel, *ACCEL_RANGE)
    steer = np.clip(steer, -MAX_STEER, MAX_STEER)
    return np.stack([x + v * np.cos(yaw) * dt, y + v * np.sin(yaw) * dt, yaw + v * np.tan(steer) / wheelbase * dt,
                     np.maximum(0.0, v + accel * dt), np.broadcast_to(accel, v.shape)], axis=-1)


def idm_accel(v: np.ndarray, v0: np.ndarray, gap: np.ndarray, dv: np.ndarray, a_max: float = 1.5, b: float = 2.0,
              s0: float = 2.0, headway: float = 1.5) -> np.ndarray:
    """Intelligent Driver Model: a_max [1 - (v/v0)^4 - (s*/gap)^2], s* = s0 + max(0, v T + v dv / (2 sqrt(a_max b)))."""
    s_star = s0 + np.maximum(0.0, v * headway + v * dv / (2 * np.sqrt(a_max * b)))
    return a_max * (1 - (v / np.maximum(v0, 0.1)) ** 4 - (s_star / np.maximum(gap, 0.1)) ** 2)


def leader_gaps(s: np.ndarray, d: np.ndarray, v: np.ndarray, lane_width: float) -> tuple[np.ndarray, np.ndarray]:
    """Bumper-to-bumper gap to the nearest vehicle ahead in the same lane (|delta d| < 0.6 lane widths) and the speed
    difference v - v_leader, for every vehicle (inf gap and 0 when nobody is ahead)."""
    ahead = s[None, :] - s[:, None]  # (i, j): how far j is ahead of i
    same = (np.abs(d[None, :] - d[:, None]) < 0.6 * lane_width) & (ahead > 0)
    dist = np.where(same, ahead, np.inf)
    j = np.argmin(dist, axis=1)
    gap = dist[np.arange(len(s)), j] - LENGTH
    return gap, np.where(np.isfinite(gap), v - v[j], 0.0)


def corners(state: np.ndarray, length: float = LENGTH, width: float = WIDTH) -> np.ndarray:
    """(..., 4, 2) box corners, counter-clockwise from front-left... front-right, centred on (x, y)."""
    c, s = np.cos(state[..., YAW])[..., None], np.sin(state[..., YAW])[..., None]
    fx = np.array([1, -1, -1, 1]) * length / 2
    fy = np.array([1, 1, -1, -1]) * width / 2
    return np.stack([state[..., X, None] + fx * c - fy * s, state[..., Y, None] + fx * s + fy * c], axis=-1)


def boxes_overlap(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Separating-axis test of oriented rectangles (..., 4, 2) (broadcast): True where they intersect."""
    a, b = np.broadcast_arrays(a, b)
    edges = np.concatenate([a[..., 1:3, :] - a[..., 0:2, :], b[..., 1:3, :] - b[..., 0:2, :]], axis=-2)  # (..., 4, 2)
    pa = np.einsum("...cd,...kd->...kc", a, edges)
    pb = np.einsum("...cd,...kd->...kc", b, edges)
    separated = (pa.max(-1) < pb.min(-1)) | (pb.max(-1) < pa.min(-1))
    return ~separated.any(-1)


def collides(ego: np.ndarray, agents: np.ndarray) -> bool:
    """Whether the ego box (5,) overlaps any agent box (M, 5)."""
    return bool(len(agents)) and bool(boxes_overlap(corners(ego)[None], corners(agents)).any())


def off_road(road: Road, ego: np.ndarray) -> bool:
    """Whether any corner of the ego box lies outside the road's drivable width."""
    _, d, _ = road.frenet(corners(ego))
    return bool((np.abs(d) > road.half_width).any())


def time_to_collision_violated(ego: np.ndarray, agents: np.ndarray, horizon: float = 1.0, step: float = 0.25) -> bool:
    """Constant-velocity forecast of ego and agents over `horizon` seconds: True if the ego box would overlap an agent
    ahead of it (the NAVSIM TTC check, at-fault side only)."""
    if not len(agents):
        return False
    rel = agents[:, :2] - ego[:2]
    ahead = rel @ np.array([np.cos(ego[YAW]), np.sin(ego[YAW])]) > 0
    for t in np.arange(step, horizon + 1e-9, step):
        e, o = _advance(ego, t), _advance(agents, t)
        if (boxes_overlap(corners(e)[None], corners(o)) & ahead).any():
            return True
    return False


def _advance(state: np.ndarray, t: float) -> np.ndarray:
    out = state.copy()
    out[..., X] += state[..., V] * np.cos(state[..., YAW]) * t
    out[..., Y] += state[..., V] * np.sin(state[..., YAW]) * t
    return out


def to_frame(points: np.ndarray, pose: np.ndarray) -> np.ndarray:
    """World points (..., 2) into the frame of pose (x, y, yaw): x forward, y left."""
    c, s = np.cos(pose[YAW]), np.sin(pose[YAW])
    rel = points - pose[:2]
    return np.stack([rel[..., 0] * c + rel[..., 1] * s, -rel[..., 0] * s + rel[..., 1] * c], axis=-1)


def from_frame(points: np.ndarray, pose: np.ndarray) -> np.ndarray:
    """Points (..., 2) in the frame of pose back to world coordinates."""
    c, s = np.cos(pose[YAW]), np.sin(pose[YAW])
    return np.stack([pose[X] + points[..., 0] * c - points[..., 1] * s, pose[Y] + points[..., 0] * s + points[..., 1] * c], axis=-1)


def pure_pursuit(ego: np.ndarray, target: np.ndarray, wheelbase: float = WHEELBASE) -> float:
    """Steering angle that puts the ego on the circular arc through the world point `target`."""
    local = to_frame(target, ego)
    dist2 = max(float(local @ local), 1e-6)
    return float(np.arctan(2 * wheelbase * local[1] / dist2))


def track(ego: np.ndarray, waypoints: np.ndarray, interval: float, gain: float = 1.0) -> tuple[float, float]:
    """(accel, steer) that follow a trajectory of ego-frame waypoints spaced `interval` seconds: pure pursuit on the
    point of the path `lookahead` metres away; proportional control to the plan's speed between its first and third
    waypoints (a property of the plan, not of how far along it the ego already is)."""
    path = np.concatenate([np.zeros((1, 2)), waypoints])
    seg = np.linalg.norm(np.diff(path, axis=0), axis=1)
    arc = np.concatenate([[0.0], np.cumsum(seg)])
    if arc[-1] < 1e-3:
        return -3.0, 0.0
    lookahead = max(4.0, 0.6 * ego[V] + 2.0)
    along = min(lookahead, arc[-1])
    point = np.array([np.interp(along, arc, path[:, 0]), np.interp(along, arc, path[:, 1])])
    if lookahead > arc[-1] and seg[-1] > 1e-6:  # extend the last segment
        point = path[-1] + (path[-1] - path[-2]) / seg[-1] * (lookahead - arc[-1])
    k = min(2, len(waypoints) - 1)
    target_speed = np.linalg.norm(waypoints[k] - waypoints[0]) / (k * interval) if k else seg[0] / interval
    return float(gain * (target_speed - ego[V])), pure_pursuit(ego, from_frame(point, ego))

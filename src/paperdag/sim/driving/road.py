"""A multi-lane road: a centreline sampled every `ds` metres from (length, curvature) segments, Frenet conversions."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Road:
    xy: np.ndarray  # (N, 2) centreline samples
    heading: np.ndarray  # (N,) tangent angle
    s: np.ndarray  # (N,) arc length
    lanes: int
    lane_width: float

    @property
    def half_width(self) -> float:
        return self.lanes * self.lane_width / 2

    @property
    def length(self) -> float:
        return float(self.s[-1])

    def lane_offset(self, lane: np.ndarray | int) -> np.ndarray:
        """Lateral offset d of a lane's centre (lane 0 is the rightmost; d > 0 is left of the centreline)."""
        return (np.asarray(lane) - (self.lanes - 1) / 2) * self.lane_width

    def pose(self, s: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """World (x, y, yaw) of Frenet coordinates (s along the centreline, d to its left)."""
        s = np.clip(np.asarray(s, dtype=float), 0.0, self.length)
        x = np.interp(s, self.s, self.xy[:, 0])
        y = np.interp(s, self.s, self.xy[:, 1])
        yaw = np.interp(s, self.s, self.heading)  # continuous: integrated, never wrapped
        return x - np.sin(yaw) * d, y + np.cos(yaw) * d, yaw

    def frenet(self, xy: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(s, d, road heading at s) of world points (..., 2): nearest sample, then projection on its tangent."""
        pts = np.asarray(xy, dtype=float)
        flat = pts.reshape(-1, 2)
        i = np.argmin(((flat[:, None, :] - self.xy[None]) ** 2).sum(-1), axis=1)
        rel = flat - self.xy[i]
        c, sn = np.cos(self.heading[i]), np.sin(self.heading[i])
        s = self.s[i] + rel[:, 0] * c + rel[:, 1] * sn
        d = -rel[:, 0] * sn + rel[:, 1] * c
        shape = pts.shape[:-1]
        return s.reshape(shape), d.reshape(shape), self.heading[i].reshape(shape)


def make_road(segments: list[tuple[float, float]], lanes: int, lane_width: float, ds: float = 1.0) -> Road:
    """Integrate heading along (length m, curvature 1/m) segments from the origin, heading +x."""
    if lanes < 1 or lane_width <= 0 or not segments:
        raise ValueError(f"make_road: need lanes >= 1, lane_width > 0 and segments, got {lanes}, {lane_width}, {segments}")
    kappa = np.concatenate([np.full(max(1, round(length / ds)), k) for length, k in segments])
    heading = np.concatenate([[0.0], np.cumsum(kappa * ds)])
    mid = (heading[:-1] + heading[1:]) / 2
    steps = np.stack([np.cos(mid), np.sin(mid)], axis=1) * ds
    xy = np.concatenate([np.zeros((1, 2)), np.cumsum(steps, axis=0)])
    return Road(xy, heading, np.arange(len(xy)) * ds, lanes, lane_width)


def random_segments(rng: np.random.Generator, length: float, max_curvature: float) -> list[tuple[float, float]]:
    """Alternating straight and curved stretches (30-80 m each) up to `length` metres; curves bend either way."""
    segments, total, curved = [], 0.0, bool(rng.integers(2))
    while total < length:
        piece = float(rng.uniform(30, 80))
        segments.append((piece, float(rng.uniform(0.3, 1.0) * max_curvature * rng.choice([-1, 1])) if curved else 0.0))
        total, curved = total + piece, not curved
    return segments

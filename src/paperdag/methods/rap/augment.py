"""RAP's data: expert futures in a vehicle's frame, recovery perturbations of the ego pose, cross-agent viewpoints."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from paperdag.sim.driving import A, V, YAW, to_frame


@dataclass(frozen=True)
class Perturbation:
    """Uniform ranges of the recovery perturbation (the paper's): position +- metres, yaw +- degrees, speed and
    acceleration +- a share of their value."""

    position: float = 0.5
    yaw_deg: float = 15.0
    speed: float = 0.2
    accel: float = 0.1


def future_in_frame(log: np.ndarray, t: int, pose: np.ndarray, every: int, count: int) -> np.ndarray:
    """The logged positions log[t + every], ..., log[t + count * every] (log (T, 5)) in the frame of `pose`: (count, 2)."""
    idx = t + every * np.arange(1, count + 1)
    if idx[-1] >= len(log):
        raise ValueError(f"future_in_frame: the log has {len(log)} steps, the future of step {t} needs {idx[-1] + 1}")
    return to_frame(log[idx, :2], pose)


def perturb(state: np.ndarray, rng: np.random.Generator, p: Perturbation) -> np.ndarray:
    """A recovery start: x, y, yaw shifted uniformly within +-position, +-yaw_deg; speed and acceleration scaled by
    1 + U(-speed, speed) and 1 + U(-accel, accel)."""
    out = state.copy()
    out[:2] += rng.uniform(-p.position, p.position, size=2)
    out[YAW] += np.radians(rng.uniform(-p.yaw_deg, p.yaw_deg))
    out[V] *= 1 + rng.uniform(-p.speed, p.speed)
    out[A] *= 1 + rng.uniform(-p.accel, p.accel)
    return out


def recovery_sample(ego_log: np.ndarray, t: int, rng: np.random.Generator, p: Perturbation, every: int,
                    count: int) -> tuple[np.ndarray, np.ndarray]:
    """(perturbed pose, target): the expert's logged future re-expressed from the perturbed pose, a trajectory that
    leads back onto the expert's path."""
    pose = perturb(ego_log[t], rng, p)
    return pose, future_in_frame(ego_log, t, pose, every, count)


def cross_agent_candidates(ego: np.ndarray, agents: np.ndarray, radius: float, road_end_s: np.ndarray,
                           agent_s: np.ndarray) -> np.ndarray:
    """Indices of agents within `radius` metres of the ego whose logged future stays on the road (s before its end):
    the viewpoints for cross-agent synthesis."""
    near = np.linalg.norm(agents[:, :2] - ego[:2], axis=1) <= radius
    return np.flatnonzero(near & (agent_s < road_end_s))

"""Scenarios (a road, an ego, IDM traffic), their step function, and the expert driver (lane-centre pure pursuit
with IDM speed control, PDM-Closed-like). Every scenario is plain numbers, so it can be stored in a table."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from paperdag.sim.driving.road import Road, make_road, random_segments
from paperdag.sim.driving.vehicles import (
    LENGTH,
    V,
    bicycle_step,
    collides,
    idm_accel,
    leader_gaps,
    off_road,
    pure_pursuit,
    time_to_collision_violated,
)


@dataclass(frozen=True)
class ScenarioConfig:
    road_length: float = 600.0  # metres of road
    lanes: int = 2
    lane_width: float = 3.5
    max_curvature: float = 1 / 80  # 1/m
    agents: int = 8  # IDM background vehicles
    ego_speed: float = 11.0  # expert's desired speed, m/s
    agent_speed: tuple[float, float] = (5.0, 11.0)  # agents' desired speeds, m/s


@dataclass(frozen=True)
class Scenario:
    segments: list[tuple[float, float]]  # road (length, curvature) pieces
    lanes: int
    lane_width: float
    ego_lane: int
    ego_s: float
    ego_speed: float  # initial and desired speed of the expert
    agent_s: list[float]
    agent_lane: list[int]
    agent_speed: list[float]  # initial speeds
    agent_v0: list[float]  # desired speeds

    def road(self) -> Road:
        return make_road(self.segments, self.lanes, self.lane_width)


def make_scenario(rng: np.random.Generator, cfg: ScenarioConfig) -> Scenario:
    """A random road and traffic: agents spread over every lane ahead of (and a few behind) the ego, never overlapping."""
    segments = random_segments(rng, cfg.road_length, cfg.max_curvature)
    ego_lane = int(rng.integers(cfg.lanes))
    ego_s = 20.0
    slots: list[tuple[float, int]] = []
    while len(slots) < cfg.agents:
        s, lane = float(rng.uniform(5.0, cfg.road_length * 0.4)), int(rng.integers(cfg.lanes))
        if all(abs(s - t) > 3 * LENGTH or lane != m for t, m in slots + [(ego_s, ego_lane)]):
            slots.append((s, lane))
    v0 = rng.uniform(*cfg.agent_speed, size=cfg.agents)
    return Scenario(segments, cfg.lanes, cfg.lane_width, ego_lane, ego_s, cfg.ego_speed, [s for s, _ in slots],
                    [m for _, m in slots], (v0 * rng.uniform(0.7, 1.0, size=cfg.agents)).tolist(), v0.tolist())


@dataclass
class World:
    """The mutable state of one scenario being driven: agents in Frenet coordinates, the ego in world coordinates."""

    scenario: Scenario
    road: Road
    ego: np.ndarray  # (5,)
    agent_s: np.ndarray
    agent_d: np.ndarray
    agent_v: np.ndarray
    agent_a: np.ndarray
    agent_v0: np.ndarray
    time: float = 0.0
    start_s: float = 0.0
    events: dict[str, bool] = field(default_factory=lambda: {"collision": False, "off_road": False, "ttc": False})

    @classmethod
    def start(cls, scenario: Scenario) -> World:
        road = scenario.road()
        x, y, yaw = road.pose(scenario.ego_s, road.lane_offset(scenario.ego_lane))
        ego = np.array([x, y, yaw, scenario.ego_speed, 0.0])
        n = len(scenario.agent_s)
        return cls(scenario, road, ego, np.array(scenario.agent_s, float), road.lane_offset(np.array(scenario.agent_lane, int)).astype(float),
                   np.array(scenario.agent_speed, float), np.zeros(n), np.array(scenario.agent_v0, float), start_s=scenario.ego_s)

    def agents(self) -> np.ndarray:
        """(M, 5) agent states in world coordinates."""
        x, y, yaw = self.road.pose(self.agent_s, self.agent_d)
        return np.stack([x, y, yaw, self.agent_v, self.agent_a], axis=1)

    def ego_frenet(self) -> tuple[float, float]:
        s, d, _ = self.road.frenet(self.ego[:2])
        return float(s), float(d)

    def step(self, accel: float, steer: float, dt: float) -> None:
        """Advance everyone by dt: agents by IDM along their lanes (the ego counts as a leader), the ego by the bicycle
        model; then record collision, off-road and TTC events."""
        es, ed = self.ego_frenet()
        s = np.append(self.agent_s, es)
        d = np.append(self.agent_d, ed)
        v = np.append(self.agent_v, self.ego[V])
        gap, dv = leader_gaps(s, d, v, self.road.lane_width)
        self.agent_a = np.clip(idm_accel(self.agent_v, self.agent_v0, gap[:-1], dv[:-1]), -6.0, 2.0)
        self.agent_s = self.agent_s + self.agent_v * dt
        self.agent_v = np.maximum(0.0, self.agent_v + self.agent_a * dt)
        self.ego = bicycle_step(self.ego, np.float64(accel), np.float64(steer), dt)
        self.time += dt
        agents = self.agents()
        self.events["collision"] |= collides(self.ego, agents)
        self.events["off_road"] |= off_road(self.road, self.ego)
        self.events["ttc"] |= time_to_collision_violated(self.ego, agents)

    def progress(self) -> float:
        return self.ego_frenet()[0] - self.start_s


def expert_control(world: World) -> tuple[float, float]:
    """The expert: pure pursuit on its lane's centre (lookahead 0.6 v + 4 m) and IDM speed control behind the leader."""
    lane_d = world.road.lane_offset(world.scenario.ego_lane)
    es, ed = world.ego_frenet()
    lookahead = 0.6 * world.ego[V] + 4.0
    tx, ty, _ = world.road.pose(es + lookahead, lane_d)
    s = np.append(world.agent_s, es)
    d = np.append(world.agent_d, lane_d)
    v = np.append(world.agent_v, world.ego[V])
    gap, dv = leader_gaps(s, d, v, world.road.lane_width)
    accel = float(idm_accel(world.ego[V], world.scenario.ego_speed, gap[-1], dv[-1]))
    return accel, pure_pursuit(world.ego, np.array([float(tx), float(ty)]))


def log_expert(scenario: Scenario, duration: float, dt: float) -> tuple[np.ndarray, np.ndarray]:
    """Drive the scenario with the expert for `duration` seconds: ego states (T + 1, 5) and agent states (T + 1, M, 5)."""
    world = World.start(scenario)
    egos, agents = [world.ego.copy()], [world.agents()]
    for _ in range(round(duration / dt)):
        world.step(*expert_control(world), dt)
        egos.append(world.ego.copy())
        agents.append(world.agents())
    return np.stack(egos), np.stack(agents)

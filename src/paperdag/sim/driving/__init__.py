"""A small driving world in numpy: multi-lane roads, IDM traffic, a kinematic-bicycle ego driven by an expert or a
planner, and two renderers of each scene (a clean depth-shaded raster, with a bird's-eye view, and a noisy "real"
camera). Shared building block: it knows nothing about any method."""

from paperdag.sim.driving.closed_loop import COMFORT, Episode, Planner, comfortable, drive
from paperdag.sim.driving.render import (
    Camera,
    bev_view,
    camera_eye,
    camera_primitives,
    clip_polygons,
    fill_polygons,
    project,
    raster_view,
    real_view,
    to_camera,
)
from paperdag.sim.driving.road import Road, make_road, random_segments
from paperdag.sim.driving.vehicles import (
    A,
    LENGTH,
    V,
    WIDTH,
    X,
    Y,
    YAW,
    bicycle_step,
    boxes_overlap,
    collides,
    corners,
    from_frame,
    idm_accel,
    leader_gaps,
    off_road,
    pure_pursuit,
    time_to_collision_violated,
    to_frame,
    track,
)
from paperdag.sim.driving.world import Scenario, ScenarioConfig, World, expert_control, log_expert, make_scenario

__all__ = [
    "A", "COMFORT", "LENGTH", "V", "WIDTH", "X", "Y", "YAW", "Camera", "Episode", "Planner", "Road", "Scenario",
    "ScenarioConfig", "World", "bev_view", "bicycle_step", "boxes_overlap", "camera_eye", "camera_primitives", "clip_polygons",
    "collides", "comfortable", "corners", "drive", "expert_control", "fill_polygons", "from_frame", "idm_accel",
    "leader_gaps", "log_expert", "make_road", "make_scenario", "off_road", "project", "pure_pursuit", "random_segments",
    "raster_view", "real_view", "to_camera", "time_to_collision_violated", "to_frame", "track",
]

"""The driving world: projection, clipping and filling, bicycle kinematics, IDM, Frenet frames, collision and off-road
checks, and an expert that drives a scenario cleanly."""

from __future__ import annotations

import numpy as np
import pytest

from paperdag.sim.driving import (
    Camera,
    ScenarioConfig,
    bicycle_step,
    boxes_overlap,
    clip_polygons,
    collides,
    corners,
    drive,
    fill_polygons,
    from_frame,
    idm_accel,
    make_road,
    make_scenario,
    off_road,
    project,
    raster_view,
    real_view,
    to_camera,
    to_frame,
)

CAM = Camera(height=32, width=64, fov_deg=90.0, mount=1.6, forward=1.0, horizon=0.4)  # f = 32, (cx, cy) = (32, 12.8)


def test_projection_of_known_points() -> None:
    """A ground point 10 m ahead of a vehicle at the origin lands on the centre column, 32 * 1.6 / 9 px below the
    horizon row; a point 5 m ahead and 2 m left lands at u = 32 - 32 * 2 / 4."""
    pose = np.array([0.0, 0.0, 0.0])
    cam_pts = to_camera(np.array([[10.0, 0.0, 0.0], [5.0, 2.0, 0.0]]), pose, CAM)
    np.testing.assert_allclose(cam_pts, [[0.0, 1.6, 9.0], [-2.0, 1.6, 4.0]], atol=1e-12)
    np.testing.assert_allclose(project(cam_pts, CAM), [[32.0, 12.8 + 32 * 1.6 / 9], [16.0, 12.8 + 32 * 1.6 / 4]], atol=1e-9)


def test_projection_follows_the_vehicle_heading() -> None:
    """The same point seen from a vehicle turned 90 degrees and moved is the same pixel once expressed in its frame."""
    pose = np.array([3.0, -2.0, np.pi / 2])
    world = np.array([[3.0, 8.0, 0.0]])  # 10 m straight ahead of it
    np.testing.assert_allclose(to_camera(world, pose, CAM), [[0.0, 1.6, 9.0]], atol=1e-9)


def test_sutherland_hodgman_clips_a_square_and_a_triangle() -> None:
    """Clipping the square [0, 2]^2 at x >= 1 keeps [1, 2] x [0, 2]; the triangle (0,0) (2,0) (0,2) at y <= 1 becomes
    the quadrilateral (0,0) (2,0) (1,1) (0,1); a polygon wholly outside keeps no vertex."""
    square = np.array([[[0, 0], [2, 0], [2, 2], [0, 2]]], float)
    out, n = clip_polygons(square, np.array([4]), np.array([1.0, 0.0]), 1.0)
    assert n.tolist() == [4]
    assert sorted(map(tuple, out[0, :4].tolist())) == [(1, 0), (1, 2), (2, 0), (2, 2)]
    tri = np.array([[[0, 0], [2, 0], [0, 2], [0, 2]]], float)  # padded: the last vertex repeats
    out, n = clip_polygons(tri, np.array([3]), np.array([0.0, -1.0]), -1.0)
    assert n.tolist() == [4]
    assert out[0, :4].tolist() == [[0, 0], [2, 0], [1, 1], [0, 1]]
    _, n = clip_polygons(square, np.array([4]), np.array([1.0, 0.0]), 5.0)
    assert n.tolist() == [0]


def test_near_plane_clipping_keeps_the_visible_part_of_a_ground_quad() -> None:
    """A quad from 1 m behind to 4 m ahead of the camera is cut at z = near: every kept vertex has z >= near."""
    quad = np.array([[[-1.0, 1.6, -1.0], [1.0, 1.6, -1.0], [1.0, 1.6, 4.0], [-1.0, 1.6, 4.0]]])
    out, n = clip_polygons(quad, np.array([4]), np.array([0.0, 0.0, 1.0]), 0.5)
    assert n.tolist() == [4]
    assert (out[0, :, 2] >= 0.5 - 1e-12).all() and sorted(set(out[0, :, 2].round(9))) == [0.5, 4.0]


def test_fill_paints_in_order_later_polygons_on_top() -> None:
    """Two squares in pixel space: pixel centres inside each are labelled, the overlap with the later one."""
    a = [[1, 1], [5, 1], [5, 5], [1, 5]]
    b = [[3, 3], [7, 3], [7, 7], [3, 7]]
    label = fill_polygons(np.array([a, b], float), np.array([4, 4]), 8, 8)
    expect = np.full((8, 8), -1)
    expect[1:5, 1:5] = 0
    expect[3:7, 3:7] = 1
    np.testing.assert_array_equal(label, expect)


def test_bicycle_model_kinematics() -> None:
    """Straight: x advances v dt; with tan(steer) = 0.27 at 5 m/s the yaw rate is v tan(steer) / L = 0.5 rad/s; speed
    integrates the acceleration and never goes negative."""
    s = bicycle_step(np.array([0.0, 0.0, 0.0, 10.0, 0.0]), np.float64(0.0), np.float64(0.0), 0.1)
    np.testing.assert_allclose(s, [1.0, 0.0, 0.0, 10.0, 0.0])
    state = np.array([0.0, 0.0, 0.0, 5.0, 0.0])
    for _ in range(10):
        state = bicycle_step(state, np.float64(0.0), np.float64(np.arctan(0.27)), 0.1)
    assert state[2] == pytest.approx(0.5)
    assert np.hypot(state[0], state[1]) == pytest.approx(2 * 10.0 * np.sin(0.25), rel=0.02)  # chord of the arc, R = 10 m
    fast = bicycle_step(np.array([0.0, 0.0, 0.0, 10.0, 0.0]), np.float64(2.0), np.float64(0.0), 0.5)
    assert fast[3] == pytest.approx(11.0) and fast[4] == 2.0
    stop = bicycle_step(np.array([0.0, 0.0, 0.0, 0.5, 0.0]), np.float64(-5.0), np.float64(0.0), 0.5)
    assert stop[3] == 0.0


def test_idm_free_road_and_close_leader() -> None:
    """IDM: at the desired speed with nobody ahead the acceleration is 0; from standstill it is a_max; 5 m behind a
    leader at the same 10 m/s it brakes (s* = 2 + 15 = 17 m)."""
    assert idm_accel(np.array(10.0), np.array(10.0), np.array(np.inf), np.array(0.0)) == pytest.approx(0.0)
    assert idm_accel(np.array(0.0), np.array(10.0), np.array(np.inf), np.array(0.0)) == pytest.approx(1.5)
    assert idm_accel(np.array(10.0), np.array(10.0), np.array(5.0), np.array(0.0)) == pytest.approx(-1.5 * (17 / 5) ** 2)


def test_frenet_round_trip_on_a_curved_road() -> None:
    """pose(s, d) then frenet gives back (s, d) on a road with a curve."""
    road = make_road([(50.0, 0.0), (60.0, 1 / 40), (50.0, 0.0)], lanes=2, lane_width=3.5)
    s, d = np.array([10.0, 70.0, 130.0]), np.array([1.75, -1.0, 0.5])
    x, y, _ = road.pose(s, d)
    s2, d2, _ = road.frenet(np.stack([x, y], -1))
    np.testing.assert_allclose(s2, s, atol=0.05)
    np.testing.assert_allclose(d2, d, atol=0.05)


def test_collision_by_separating_axes() -> None:
    """4.5 m long cars: centres 4 m apart in line overlap, 5 m apart do not; one crossing at 90 degrees, 2 m to the
    side, overlaps; a frame round trip is the identity."""
    car = np.array([0.0, 0.0, 0.0, 0.0, 0.0])
    assert collides(car, np.array([[4.0, 0.0, 0.0, 0.0, 0.0]]))
    assert not collides(car, np.array([[5.0, 0.0, 0.0, 0.0, 0.0]]))
    assert collides(car, np.array([[0.0, 2.0, np.pi / 2, 0.0, 0.0]]))
    assert not collides(car, np.array([[0.0, 3.5, 0.0, 0.0, 0.0]]))
    assert boxes_overlap(corners(car), corners(car))
    pts = np.array([[1.0, 2.0], [-3.0, 0.5]])
    pose = np.array([2.0, -1.0, 0.7])
    np.testing.assert_allclose(from_frame(to_frame(pts, pose), pose), pts)


def test_off_road_uses_the_box_corners() -> None:
    """Two 3.5 m lanes (half width 3.5 m), a 1.9 m wide car along the road: 2.5 m off centre is on the road (corner at
    3.45 m), 2.7 m is off (3.65 m)."""
    road = make_road([(200.0, 0.0)], lanes=2, lane_width=3.5)
    assert not off_road(road, np.array([50.0, 0.0, 0.0, 10.0, 0.0]))
    assert not off_road(road, np.array([50.0, 2.5, 0.0, 10.0, 0.0]))
    assert off_road(road, np.array([50.0, 2.7, 0.0, 10.0, 0.0]))


def test_the_expert_drives_clean_and_renders_are_images() -> None:
    """The expert completes a random scenario without collision or leaving the road; the raster and real views of a
    scene are uint8 images that differ (another palette) but share the road's silhouette."""
    rng = np.random.default_rng(3)
    scenario = make_scenario(rng, ScenarioConfig(agents=6))
    (episode,) = drive([scenario], None, CAM, duration=12.0, dt=0.1, replan_every=2, waypoint_interval=0.5, route_length=100.0, rng=rng)
    assert not episode.collision and not episode.off_road and episode.progress > 90
    road = scenario.road()
    pose = episode.trajectory[0]
    raster, real = raster_view(road, np.zeros((0, 5)), pose, CAM), real_view(road, np.zeros((0, 5)), pose, CAM, rng)
    assert raster.shape == real.shape == (32, 64, 3) and raster.dtype == real.dtype == np.uint8
    assert (raster[:12] == 0).all() and raster[-1, 32].sum() > 0  # black sky, lit road under the camera
    assert np.abs(raster.astype(int) - real.astype(int)).mean() > 20

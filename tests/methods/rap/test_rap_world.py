"""The rap pipeline's world pieces: the cameras' paint order (lane lines over the road on a curve), NAVSIM's comfort
computation, and the paired comparison the claims read."""

from __future__ import annotations

import numpy as np
import pytest

from paperdag.sim.driving import Camera, make_road
from paperdag.sim.driving.render import EDGE_LINE, RASTER_COLOURS, Primitives, camera_primitives, fill_polygons, raster_view, real_view


def _curve_view():
    road = make_road([(30.0, 0.0), (200.0, 1 / 40)], 2, 3.5)  # a tight left curve ahead
    x, y, yaw = road.pose(25.0, -1.75)  # 5 m before the curve, in the right lane
    return road, np.array([float(x), float(y), float(yaw), 10.0, 0.0]), Camera(64, 128)


def _one_plane(prims: Primitives) -> Primitives:
    """The paint order before issue 19's fix: ground (road strips and lane lines together) far to near, then boxes.
    Clipping is per polygon, so re-sorting clipped primitives is the same as sorting before the clip."""
    order = np.lexsort((-prims.depth, prims.owner >= 0))
    return Primitives(prims.polys[order], prims.counts[order], prims.kind[order], prims.depth[order], prims.owner[order])


def test_lane_lines_are_painted_over_the_road_on_a_curve() -> None:
    """On a curve a one-plane depth sort lets nearer road strips hide farther edge lines; camera_primitives' order
    (is_box, is_line, -depth) shows every line pixel the lines alone would cover, in both cameras."""
    road, pose, cam = _curve_view()
    prims = camera_primitives(road, np.zeros((0, 5)), pose, cam)
    edges = prims.kind == EDGE_LINE
    alone = fill_polygons(prims.polys[edges], prims.counts[edges], cam.height, cam.width) >= 0  # edge-line pixels
    flat = _one_plane(prims)
    lost = (flat.kind[np.maximum(fill_polygons(flat.polys, flat.counts, cam.height, cam.width), 0)] != EDGE_LINE) & alone
    assert lost.sum() > 0.1 * alone.sum()  # the bug the order fixes: one plane loses ~20 % of the edge-line pixels here
    label = fill_polygons(prims.polys, prims.counts, cam.height, cam.width)
    assert (prims.kind[label[alone]] == EDGE_LINE).all()

    def yellow(image: np.ndarray) -> np.ndarray:  # edge-line colour: red, no blue (road grey has both)
        return (image[..., 0] > 0) & (image[..., 2] == 0)

    assert RASTER_COLOURS[EDGE_LINE][2] == 0
    assert yellow(raster_view(road, np.zeros((0, 5)), pose, cam))[alone].all()
    real = real_view(road, np.zeros((0, 5)), pose, cam, np.random.default_rng(0))
    assert real.shape == (64, 128, 3) and real[alone].mean() > real[~alone & (label >= 0)].mean()  # lines brighter than asphalt


def test_comfort_follows_navsim_bounds() -> None:
    """A steady 10 m/s drive is comfortable; braking at 6 m/s^2 breaks the longitudinal bound; a weave at 1.2
    rad/s breaks the yaw-rate bound; the quantities come from Savitzky-Golay derivatives of the poses."""
    from paperdag.methods.rap import comfort_values, comfortable

    dt, t = 0.1, np.arange(60) * 0.1
    steady = np.stack([10 * t, np.zeros_like(t), np.zeros_like(t)], 1)
    assert comfortable(steady, dt)
    assert comfort_values(steady, dt)["max_abs_lat_accel"] == pytest.approx(0.0, abs=1e-9)
    brake = np.stack([10 * t - 3 * t**2, np.zeros_like(t), np.zeros_like(t)], 1)
    assert comfort_values(brake, dt)["min_lon_accel"] == pytest.approx(-6.0, abs=1e-6) and not comfortable(brake, dt)
    yaw = 0.3 * np.sin(4 * t)  # peak yaw rate 1.2 rad/s
    weave = np.stack([np.cumsum(5 * np.cos(yaw)) * dt, np.cumsum(5 * np.sin(yaw)) * dt, yaw], 1)
    assert comfort_values(weave, dt)["max_abs_yaw_rate"] > 0.95 and not comfortable(weave, dt)


def test_paired_grid_interval_and_mdd() -> None:
    """A constant difference has a zero-width interval at it; noise widens it; the MDD is (t_.975 + t_.8) SE."""
    from scipy import stats

    from paperdag.methods.rap.evaluation import paired_grid

    same = paired_grid(np.full((5, 100), 3.0))
    assert same["mean"] == 3.0 and same["ci95_low"] == same["ci95_high"] == 3.0 and same["n"] == 5 and same["scenarios"] == 100
    d = np.random.default_rng(0).normal(1.0, 20.0, size=(5, 100))
    out = paired_grid(d)
    se = np.sqrt(d.mean(1).var(ddof=1) / 5 + d.mean(0).var(ddof=1) / 100)
    assert out["std"] == pytest.approx(se) and out["ci95_high"] - out["mean"] == pytest.approx(stats.t.ppf(0.975, 4) * se)
    assert out["mdd"] == pytest.approx((stats.t.ppf(0.975, 4) + stats.t.ppf(0.8, 4)) * se)
    one = paired_grid(d[:1])
    assert one["n"] == 1 and one["df"] == 99 and one["ci95_low"] < one["mean"]

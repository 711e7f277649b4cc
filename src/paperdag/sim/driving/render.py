"""Two renderers of one scene, sharing the geometry: pinhole projection of lane surfaces, lane lines and vehicle
cuboids, Sutherland-Hodgman clipping at the near and far planes, scan-line filling of the convex polygons painted
far to near. `raster` colours the primitives cleanly, shaded by depth alpha = (d_max - d) / d_max; `real` is the
"camera": another palette, sky and grass, per-vehicle paint, texture noise and lighting jitter. A bird's-eye raster
is a second view. Every function is vectorised numpy; images are (H, W, 3) uint8.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from paperdag.sim.driving.road import Road
from paperdag.sim.driving.vehicles import LENGTH, YAW, corners, to_frame

ROAD, EDGE_LINE, LANE_LINE, SIDE, FRONT, TOP = range(6)  # primitive classes
RASTER_COLOURS = np.array([[110, 110, 110], [255, 220, 0], [255, 255, 255], [0, 120, 255], [255, 40, 40], [0, 230, 230]], float)
REAL_COLOURS = np.array([[62, 60, 66], [215, 205, 150], [200, 200, 190], [0, 0, 0], [0, 0, 0], [0, 0, 0]], float)
BOX_HEIGHT, LINE_WIDTH, DASH = 1.5, 0.2, 3.0


@dataclass(frozen=True)
class Camera:
    height: int = 32  # pixels
    width: int = 64
    fov_deg: float = 90.0  # horizontal field of view
    mount: float = 1.6  # metres above ground
    forward: float = 1.0  # metres ahead of the ego reference point
    horizon: float = 0.4  # principal point row as a share of the height
    near: float = 0.5
    far: float = 60.0  # d_max

    def intrinsics(self) -> np.ndarray:
        f = self.width / (2 * np.tan(np.radians(self.fov_deg) / 2))
        return np.array([[f, 0.0, self.width / 2], [0.0, f, self.height * self.horizon], [0.0, 0.0, 1.0]])


def clip_polygons(polys: np.ndarray, counts: np.ndarray, normal: np.ndarray, offset: float) -> tuple[np.ndarray, np.ndarray]:
    """Sutherland-Hodgman for a batch of convex polygons against the half-space normal . p >= offset.

    polys (P, V, D) with counts (P,) valid vertices (the rest repeat the last one). Each edge (p_i, p_i+1) emits p_i
    if inside, then the edge's crossing point if it crosses the boundary. Returns (P, V', D) and the new counts
    (0 for a polygon entirely outside)."""
    n_poly, n_vert, _ = polys.shape
    i = np.arange(n_vert)
    nxt_i = np.where(i[None] + 1 < counts[:, None], i[None] + 1, 0)
    cur, nxt = polys, np.take_along_axis(polys, nxt_i[..., None], axis=1)
    valid = i[None] < counts[:, None]
    dc, dn = cur @ normal - offset, nxt @ normal - offset
    inside = (dc >= 0) & valid
    crossing = ((dc >= 0) != (dn >= 0)) & valid
    t = np.where(crossing, dc / np.where(crossing, dc - dn, 1.0), 0.0)
    cand = np.stack([cur, cur + t[..., None] * (nxt - cur)], axis=2).reshape(n_poly, 2 * n_vert, -1)
    keep = np.stack([inside, crossing], axis=2).reshape(n_poly, 2 * n_vert)
    order = np.argsort(~keep, axis=1, kind="stable")
    new_counts = keep.sum(1)
    width = max(1, int(new_counts.max(initial=0)))
    slot = np.minimum(np.arange(width)[None], np.maximum(new_counts - 1, 0)[:, None])
    gathered = np.take_along_axis(order, slot, axis=1)
    return np.take_along_axis(cand, gathered[..., None], axis=1), new_counts


def fill_polygons(polys: np.ndarray, counts: np.ndarray, height: int, width: int) -> np.ndarray:
    """Scan-line fill of convex pixel-space polygons (P, V, 2) as (u, v), painted in order (later on top): the index
    of the polygon covering each pixel centre, -1 where none does."""
    label = np.full((height, width), -1, dtype=np.int32)
    keep = counts >= 3
    if not keep.any():
        return label
    polys, counts, ids = polys[keep], counts[keep], np.flatnonzero(keep)
    i = np.arange(polys.shape[1])
    nxt_i = np.where(i[None] + 1 < counts[:, None], i[None] + 1, 0)
    p0, p1 = polys, np.take_along_axis(polys, nxt_i[..., None], axis=1)
    rows = np.arange(height) + 0.5
    y0, y1 = p0[..., 1, None], p1[..., 1, None]  # (P, E, 1)
    crosses = (y0 <= rows) != (y1 <= rows)  # (P, E, H)
    x = p0[..., 0, None] + (rows - y0) * (p1[..., 0, None] - p0[..., 0, None]) / np.where(y1 == y0, 1.0, y1 - y0)
    left = np.where(crosses, x, np.inf).min(1)  # (P, H)
    right = np.where(crosses, x, -np.inf).max(1)
    covered_rows, poly = np.nonzero((left < right).T)  # (row, polygon) pairs, sorted by row then paint order
    if not len(poly):
        return label
    cols = np.arange(width) + 0.5
    inside = (cols >= left[poly, covered_rows, None]) & (cols < right[poly, covered_rows, None])  # (K, W)
    painted = np.where(inside, poly[:, None], -1)
    starts = np.flatnonzero(np.diff(covered_rows, prepend=-1))
    top = np.maximum.reduceat(painted, starts, axis=0)  # the last-painted polygon per pixel of each covered row
    label[covered_rows[starts]] = np.where(top >= 0, ids[np.maximum(top, 0)], -1)
    return label


@dataclass(frozen=True)
class Primitives:
    """Polygons of one view in paint order: vertices (P, V, 2) in pixels, counts, class, depth, owner (agent or -1)."""

    polys: np.ndarray
    counts: np.ndarray
    kind: np.ndarray
    depth: np.ndarray
    owner: np.ndarray


def _ground_quads(road: Road, s0: float, s1: float, step: float) -> tuple[np.ndarray, np.ndarray]:
    """World quads (Q, 4, 2) on the ground between s0 and s1: the lane surface strips and the lane lines (edges solid,
    inner lines dashed at fixed road positions), with their classes."""
    s = np.arange(np.floor(s0 / step) * step, s1 + step, step)
    s = s[(s >= 0) & (s <= road.length)]
    if len(s) < 2:
        return np.zeros((0, 4, 2)), np.zeros(0, int)
    bounds = -road.half_width + road.lane_width * np.arange(road.lanes + 1)
    offsets = np.concatenate([[-road.half_width, road.half_width], bounds - LINE_WIDTH / 2, bounds + LINE_WIDTH / 2])
    x, y, _ = road.pose(s[:, None], offsets[None, :])
    xy = np.stack([x, y], -1)  # (S, D, 2)
    n = road.lanes + 1

    def strip(lo: int, hi: int) -> np.ndarray:  # quads between offsets lo and hi over every s step
        return np.stack([xy[:-1, lo], xy[1:, lo], xy[1:, hi], xy[:-1, hi]], axis=1)

    quads, kinds = [strip(0, 1)], [np.full(len(s) - 1, ROAD)]
    for k in range(n):
        edge = k in (0, road.lanes)
        dashed = edge | (np.floor(s[:-1] / DASH) % 2 == 0)
        quads.append(strip(2 + k, 2 + n + k)[dashed])
        kinds.append(np.full(int(dashed.sum()), EDGE_LINE if edge else LANE_LINE))
    return np.concatenate(quads), np.concatenate(kinds)


def _box_faces(agents: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cuboid faces (M * 5, 4, 3) of agent boxes: four sides and the top; classes and owner indices."""
    base = corners(agents)  # (M, 4, 2) front-left, rear-left, rear-right, front-right
    lo = np.concatenate([base, np.zeros(base.shape[:-1] + (1,))], -1)
    hi = lo + np.array([0, 0, BOX_HEIGHT])
    faces = []
    for i, j in ((0, 1), (1, 2), (2, 3), (3, 0)):
        faces.append(np.stack([lo[:, i], lo[:, j], hi[:, j], hi[:, i]], axis=1))
    faces.append(hi)
    faces = np.stack(faces, axis=1)  # (M, 5, 4, 3)
    kinds = np.array([SIDE, FRONT, SIDE, FRONT, TOP])
    m = len(agents)
    return faces.reshape(-1, 4, 3), np.tile(kinds, m), np.repeat(np.arange(m), 5)


def camera_eye(pose: np.ndarray, cam: Camera) -> np.ndarray:
    """World position of the camera on the vehicle at pose (x, y, yaw)."""
    return np.array([pose[0] + cam.forward * np.cos(pose[YAW]), pose[1] + cam.forward * np.sin(pose[YAW]), cam.mount])


def to_camera(points: np.ndarray, pose: np.ndarray, cam: Camera) -> np.ndarray:
    """World points (..., 3), z up, into camera coordinates (x right, y down, z forward along the vehicle's yaw)."""
    c, s = np.cos(pose[YAW]), np.sin(pose[YAW])
    rot = np.array([[s, -c, 0.0], [0.0, 0.0, -1.0], [c, s, 0.0]])
    return (points - camera_eye(pose, cam)) @ rot.T


def project(points: np.ndarray, cam: Camera) -> np.ndarray:
    """Pinhole projection of camera-frame points (..., 3) in front of the camera: K [x/z, y/z, 1] -> pixels (u, v)."""
    k = cam.intrinsics()
    z = np.maximum(points[..., 2:3], 1e-6)
    return points[..., :2] / z * np.array([k[0, 0], k[1, 1]]) + k[:2, 2]


def camera_primitives(road: Road, agents: np.ndarray, pose: np.ndarray, cam: Camera) -> Primitives:
    """Project the scene seen from `pose` (x, y, yaw of a vehicle): world -> camera (x right, y down, z forward),
    clip at the near and far planes, divide by depth through K; road strips, lane lines, then cuboid faces, each far to near."""
    eye = camera_eye(pose, cam)
    s_here, _, _ = road.frenet(pose[:2])
    quads, qkinds = _ground_quads(road, float(s_here) - 5.0, float(s_here) + cam.far * 1.2, 5.0)
    ground = np.concatenate([quads, np.zeros(quads.shape[:-1] + (1,))], -1)
    near = np.linalg.norm(agents[:, :2] - pose[:2], axis=1) < cam.far + LENGTH if len(agents) else np.zeros(0, bool)
    faces, fkinds, owners = _box_faces(agents[near])
    owners = np.flatnonzero(near)[owners] if len(owners) else owners
    gc, fc = to_camera(ground, pose, cam), to_camera(faces, pose, cam)
    if len(fc):  # back-face culling: keep faces whose outward side looks at the camera
        centre = faces.reshape(-1, 5, 4, 3).mean(axis=(1, 2)).repeat(5, 0)
        middle = faces.mean(1)
        facing = ((eye - middle) * (middle - centre)).sum(-1) > 0
        fc, fkinds, owners = fc[facing], fkinds[facing], owners[facing]
    polys = np.concatenate([gc, fc]) if len(fc) else gc
    kinds = np.concatenate([qkinds, fkinds])
    owner = np.concatenate([np.full(len(qkinds), -1), owners])
    depth = polys[..., 2].mean(1)
    is_box = np.arange(len(polys)) >= len(gc)
    is_line = np.isin(kinds, (EDGE_LINE, LANE_LINE))
    # paint order (is_box, is_line, -depth): road strips, then lane lines, then vehicle faces, each far to near. Road
    # strips and lane lines lie in one plane, so sorting them together by depth would let a nearer strip paint over a
    # farther part of a lane line on curves (up to ~40 % of the edge-line pixels lost).
    order = np.lexsort((-depth, is_line, is_box))
    polys, kinds, owner, depth = polys[order], kinds[order], owner[order], depth[order]
    counts = np.full(len(polys), 4)
    polys, counts = clip_polygons(polys, counts, np.array([0.0, 0.0, 1.0]), cam.near)
    polys, counts = clip_polygons(polys, counts, np.array([0.0, 0.0, -1.0]), -cam.far)
    pix = project(polys, cam)
    return Primitives(pix, counts, kinds, depth, owner)


def _background(cam: Camera) -> np.ndarray:
    rows = np.arange(cam.height) + 0.5
    return rows >= cam.height * cam.horizon  # True: ground, False: sky


def raster_view(road: Road, agents: np.ndarray, pose: np.ndarray, cam: Camera) -> np.ndarray:
    """The clean raster: each primitive its class colour times alpha = (d_max - d) / d_max; black background."""
    prims = camera_primitives(road, agents, pose, cam)
    label = fill_polygons(prims.polys, prims.counts, cam.height, cam.width)
    alpha = np.clip((cam.far - prims.depth) / cam.far, 0.0, 1.0)
    colours = np.concatenate([RASTER_COLOURS[prims.kind] * alpha[:, None], np.zeros((1, 3))])
    return colours[label].astype(np.uint8)


def real_view(road: Road, agents: np.ndarray, pose: np.ndarray, cam: Camera, rng: np.random.Generator) -> np.ndarray:
    """The "camera" image of the same geometry: sky gradient and grass, asphalt, per-vehicle paint with a darker roof
    and lit sides, then lighting jitter (gain, colour cast), vertical shading and texture noise."""
    prims = camera_primitives(road, agents, pose, cam)
    label = fill_polygons(prims.polys, prims.counts, cam.height, cam.width)
    paint = _vehicle_paint(max(1, len(agents)))
    face_light = np.array([1.0, 1.0, 1.0, 0.8, 1.05, 0.6])[prims.kind]
    colours = np.where((prims.owner >= 0)[:, None], paint[np.maximum(prims.owner, 0)] * face_light[:, None], REAL_COLOURS[prims.kind])
    h, w = cam.height, cam.width
    rows = (np.arange(h)[:, None] + 0.5) / h
    sky = np.array([150, 190, 235]) + (rows / cam.horizon)[..., None] * np.array([60, 40, 10])
    grass = np.array([70, 110, 45]) * (0.8 + 0.4 * rows)[..., None]
    back = np.where(_background(cam)[:, None, None], grass, sky) * np.ones((1, w, 1))
    image = np.where((label >= 0)[..., None], np.concatenate([colours, np.zeros((1, 3))])[label], back)
    gain = rng.uniform(0.65, 1.3) * rng.uniform(0.85, 1.15, size=3)
    image = image * gain * (0.85 + 0.3 * rows)[..., None]
    image = image + rng.normal(0, 14, size=image.shape) + rng.normal(0, 10, size=(h, 1, 1))
    return np.clip(image, 0, 255).astype(np.uint8)


def _vehicle_paint(n: int) -> np.ndarray:
    """A fixed body colour per agent index (a small car-paint palette)."""
    palette = np.array([[180, 30, 30], [230, 230, 230], [30, 30, 35], [40, 70, 160], [150, 150, 155], [200, 160, 40]], float)
    return palette[np.arange(n) % len(palette)]


def bev_view(road: Road, agents: np.ndarray, pose: np.ndarray, size: int = 64, metres: float = 40.0) -> np.ndarray:
    """Bird's-eye raster centred ahead of the vehicle (forward up): lanes, lines, agent boxes, the ego in green."""
    scale = size / metres
    s_here, _, _ = road.frenet(pose[:2])
    quads, kinds = _ground_quads(road, float(s_here) - metres, float(s_here) + metres, 4.0)
    boxes = corners(np.concatenate([agents, pose[None, :5]]))
    polys = np.concatenate([quads, boxes])
    local = to_frame(polys, pose)
    pix = np.stack([size / 2 - local[..., 1] * scale, size * 0.75 - local[..., 0] * scale], -1)
    label = fill_polygons(pix, np.full(len(pix), 4), size, size)
    colours = np.concatenate([RASTER_COLOURS[kinds], np.tile(RASTER_COLOURS[TOP], (len(agents), 1)), [[0, 220, 0]], [[0, 0, 0]]])
    return colours[label].astype(np.uint8)

"""cuRobo's primitive obstacles — cuboid, sphere, capsule, cylinder — as exact analytic signed
distances of points (for sphere queries) and as conservative tessellations (for the mesh backends).

Every primitive lives in its own frame (the obstacle's pose places it); parameters, metres, in a
(..., 7) row so one table holds every kind (unused entries are 0):
    cuboid    [hx, hy, hz, 0, 0, 0, 0]       half extents (cuRobo's `dims` / 2), centred
    sphere    [r, 0, 0, 0, 0, 0, 0]           centred
    capsule   [r, ax, ay, az, bx, by, bz]     radius, segment base a and tip b (cuRobo's base/tip)
    cylinder  [r, h / 2, 0, 0, 0, 0, 0]       radius, half height along z, centred (cuRobo's Cylinder)

Signed distances are positive outside, negative inside, and differentiable by autograd with
respect to the points (norms are guarded, so a point on a centre, an axis or a box's medial
plane gets a finite one-sided gradient, never NaN).

Tessellations, for the exact mesh kernels and the learned models, which see meshes only:
- the cuboid's 12 triangles are exact;
- the curved ones are approximated by a convex polytope that CONTAINS the true shape and lies
  within `tol` metres outside it (a circumscribed tessellation). A planner then never misses a
  collision because of the tessellation; it may report contact up to `tol` early. `tessellate`
  returns the deviation actually reached (<= tol), which the world records per obstacle.
"""

from __future__ import annotations

import math
from enum import IntEnum

import numpy as np
import torch

__all__ = ["PrimitiveKind", "primitive_params", "primitive_signed_distance", "tessellate"]

NUM_PARAMS = 7
_TINY = 1e-30  # guards sqrt at 0 (float32's smallest normal is 1.2e-38, so squares of 1e-15 survive)


class PrimitiveKind(IntEnum):
    CUBOID = 0
    SPHERE = 1
    CAPSULE = 2
    CYLINDER = 3


def _positive(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)) \
            or not math.isfinite(value) or not value > 0:
        raise ValueError(f"{name}: expected a finite number > 0 (metres), got {value!r}")
    return float(value)


def primitive_params(kind: PrimitiveKind, *, dims=None, radius=None, height=None, base=None,
                     tip=None) -> list[float]:
    """The checked 7-parameter row of one primitive (see the module docstring)."""
    if kind == PrimitiveKind.CUBOID:
        d = np.asarray(dims, dtype=np.float64).reshape(-1) if dims is not None else np.zeros(0)
        if d.shape != (3,) or not np.isfinite(d).all() or not (d > 0).all():
            raise ValueError(f"dims: expected 3 finite side lengths > 0 (metres, full sizes as in cuRobo), "
                             f"got {dims!r}")
        return [*(d / 2).tolist(), 0.0, 0.0, 0.0, 0.0]
    r = _positive(radius, "radius")
    if kind == PrimitiveKind.SPHERE:
        return [r, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    if kind == PrimitiveKind.CYLINDER:
        return [r, _positive(height, "height") / 2, 0.0, 0.0, 0.0, 0.0, 0.0]
    ends = []
    for name, x in (("base", base), ("tip", tip)):
        x = np.asarray(x if x is not None else [np.nan], dtype=np.float64).reshape(-1)
        if x.shape != (3,) or not np.isfinite(x).all():
            raise ValueError(f"{name}: expected a finite (3,) point in the capsule's frame (metres), got {x!r}")
        ends.append(x)
    return [r, *ends[0].tolist(), *ends[1].tolist()]


def _safe_norm(x: torch.Tensor) -> torch.Tensor:
    sq = (x * x).sum(-1)
    return torch.where(sq > 0, sq.clamp_min(_TINY).sqrt(), torch.zeros_like(sq))


def _box(p, h):
    q = p.abs() - h
    return _safe_norm(q.clamp_min(0)) + q.max(-1).values.clamp_max(0)


def _segment(p, a, b, r):
    ab = b - a
    t = ((p - a) * ab).sum(-1) / (ab * ab).sum(-1).clamp_min(_TINY)
    return _safe_norm(p - a - t.clamp(0, 1)[..., None] * ab) - r


def _cylinder(p, r, half):
    q = torch.stack([_safe_norm(p[..., :2]) - r, p[..., 2].abs() - half], -1)
    return _safe_norm(q.clamp_min(0)) + q.max(-1).values.clamp_max(0)


def primitive_signed_distance(points: torch.Tensor, kind: torch.Tensor, params: torch.Tensor) -> torch.Tensor:
    """Signed distance (...) of points (..., 3), given in each primitive's frame, to primitives of
    kind (...) int64 (`PrimitiveKind`) with params (..., 7). Every formula is evaluated and the
    kind selects (fixed shapes, no data-dependent branching)."""
    r = params[..., 0]
    box = _box(points, params[..., :3])
    ball = _safe_norm(points) - r
    capsule = _segment(points, params[..., 1:4], params[..., 4:7], r)
    cylinder = _cylinder(points, r, params[..., 1])
    # Plain ints: an IntEnum compared with a tensor does not trace under torch.compile.
    out = torch.where(kind == int(PrimitiveKind.CUBOID), box, ball)
    out = torch.where(kind == int(PrimitiveKind.CAPSULE), capsule, out)
    return torch.where(kind == int(PrimitiveKind.CYLINDER), cylinder, out)


# ---- tessellation ---------------------------------------------------------------------------------
def _circumscribed_ball(radius: float, tol: float) -> tuple[np.ndarray, np.ndarray, float]:
    """A UV-sphere polytope containing the ball of `radius`, within `tol` outside it."""
    import trimesh

    for count in range(8, 4097, 4):
        tm = trimesh.creation.uv_sphere(radius=1.0, count=[count, count])
        v, f = np.asarray(tm.vertices), np.asarray(tm.faces)
        tri = v[f]
        n = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
        area = np.linalg.norm(n, axis=1)
        keep = area > 1e-12
        # The polytope contains the unit ball iff every face plane is at least 1 from the centre.
        plane = np.abs((n[keep] / area[keep, None] * tri[keep, 0]).sum(1)).min()
        scale = radius / plane
        deviation = radius * (np.linalg.norm(v, axis=1).max() / plane - 1)
        if deviation <= tol:
            return v * scale, f[keep], float(deviation)
    raise ValueError(f"tol: {tol} m is too fine for radius {radius} m (more than 4096 sections needed)")


def tessellate(kind: PrimitiveKind, params, tol: float) -> tuple[np.ndarray, np.ndarray, float]:
    """(vertices (V, 3), faces (F, 3), deviation): a triangle mesh of the primitive in its frame
    that contains it and lies within `deviation` <= `tol` metres outside it (0 for a cuboid)."""
    import trimesh

    tol = _positive(tol, "tessellation_tol")
    p = np.asarray(params, dtype=np.float64)
    if kind == PrimitiveKind.CUBOID:
        tm = trimesh.creation.box(extents=2 * p[:3])
        return np.asarray(tm.vertices), np.asarray(tm.faces), 0.0
    r = float(p[0])
    if kind == PrimitiveKind.CYLINDER:
        # A prism over a regular polygon circumscribing the circle: its edges' midpoints touch it.
        sections = 4 * max(2, math.ceil(math.pi / math.acos(r / (r + tol)) / 4))  # symmetric polygon
        rc = r / math.cos(math.pi / sections)
        tm = trimesh.creation.cylinder(radius=rc, height=2 * p[1], sections=sections)
        return np.asarray(tm.vertices), np.asarray(tm.faces), rc - r
    v, f, dev = _circumscribed_ball(r, tol)
    if kind == PrimitiveKind.SPHERE:
        return v, f, dev
    # Capsule = segment (+) ball: the hull of the ball polytope at both ends contains it, and is no
    # farther outside than the ball polytope itself.
    hull = trimesh.Trimesh(np.concatenate([v + p[1:4], v + p[4:7]]), process=False).convex_hull
    return np.asarray(hull.vertices), np.asarray(hull.faces), dev

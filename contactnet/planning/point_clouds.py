"""Point-cloud obstacles (a depth camera's view, or points a user has) for the planning world.

A cloud is the union of balls of radius `point_radius` around its points (the occupied surface a
depth camera saw, thickened as nvblox's voxels thicken it). How each query path sees it:
- sphere queries: the exact distance to that union outside it, min_i |x - p_i| - point_radius;
- the exact mesh kernels: one octahedron per point circumscribing its ball (vertices at
  sqrt(3) * point_radius, 8 triangles): contains the union, so no contact is missed, and lies at
  most (sqrt(3) - 1) * point_radius outside it;
- the learned models: the points themselves, resampled to the world's K, with normals estimated by
  open3d from each point's neighbours and oriented towards the camera (a visible surface faces it).
"""

from __future__ import annotations

import math

import numpy as np

from contactnet.geometry.depth_views import _camera_matrix, estimate_normals, points_from_depth

__all__ = ["cloud_from_depth", "check_cloud", "completed_samples", "encoder_samples", "octahedra"]

_OCTAHEDRON_FACES = np.array([[0, 2, 4], [2, 1, 4], [1, 3, 4], [3, 0, 4],
                              [2, 0, 5], [1, 2, 5], [3, 1, 5], [0, 3, 5]])
_AXES = np.array([[1, 0, 0], [-1, 0, 0], [0, 1, 0], [0, -1, 0], [0, 0, 1], [0, 0, -1]], dtype=np.float64)


def check_cloud(points, name: str = "points") -> np.ndarray:
    """(P, 3) float64 copy of points (numpy or torch), P >= 1, finite."""
    if hasattr(points, "detach"):
        points = points.detach().cpu().numpy()
    p = np.asarray(points, dtype=np.float64)
    if p.ndim != 2 or p.shape[1] != 3 or p.shape[0] < 1:
        raise ValueError(f"{name}: expected a (P, 3) array of points with P >= 1, got shape {p.shape}")
    if not np.isfinite(p).all():
        raise ValueError(f"{name}: contains NaN or Inf")
    return p


def cloud_from_depth(depth, intrinsics, camera_pose) -> tuple[np.ndarray, np.ndarray]:
    """(points (P, 3), camera position (3,)) of a depth image (H, W) z-depth in metres (0 or
    non-finite: no return), pinhole intrinsics (3, 3), camera_pose (7,) [x, y, z, qw, qx, qy, qz]
    or (4, 4) camera-to-world (camera looks along +z, y down: the OpenCV convention)."""
    points = points_from_depth(np.asarray(depth), intrinsics, camera_pose)
    if points.shape[0] == 0:
        raise ValueError("depth: the image has no return (every pixel is 0 or non-finite)")
    return points, _camera_matrix(camera_pose)[:3, 3]


def octahedra(points: np.ndarray, point_radius: float) -> tuple[np.ndarray, np.ndarray]:
    """(vertices (6P, 3), faces (8P, 3)): one octahedron per point containing its ball."""
    a = math.sqrt(3) * point_radius  # the octahedron |x|+|y|+|z| <= a contains the ball of a / sqrt(3)
    v = (points[:, None, :] + a * _AXES[None]).reshape(-1, 3)
    f = (_OCTAHEDRON_FACES[None] + 6 * np.arange(points.shape[0])[:, None, None]).reshape(-1, 3)
    return v, f


def encoder_samples(points: np.ndarray, count: int, seed: int, viewpoint, normal_radius: float):
    """(samples (count, 3), normals (count, 3)) float32: the learned models' input for a cloud,
    `count` points drawn without replacement when there are enough (with replacement otherwise),
    normals from open3d oriented towards `viewpoint` (3,)."""
    normals = estimate_normals(points, viewpoint, radius=normal_radius)
    rng = np.random.default_rng(seed)
    pick = rng.choice(points.shape[0], count, replace=points.shape[0] < count)
    return points[pick].astype(np.float32), normals[pick].astype(np.float32)


def completed_samples(completion, points: np.ndarray, normals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`encoder_samples` of one object's view completed by `completion` (a `ViewCompletion`, or the
    path of its checkpoint, read on every call: pass the module to read it once): the same count
    of points with outward normals, float32."""
    from contactnet.models.completion import ViewCompletion, complete_views, load_view_completion

    if not isinstance(completion, ViewCompletion):
        completion = load_view_completion(completion)
    p, n = complete_views(completion.eval(), points[None].astype(np.float32), normals[None].astype(np.float32))
    return p[0], n[0]

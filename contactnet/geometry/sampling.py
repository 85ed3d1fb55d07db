"""Even surface sampling of triangle meshes: the K-point clouds (with normals) the shape encoder
reads. Area-weighted random candidates are thinned by farthest-point sampling, which spreads the
points evenly (a Poisson-disk-like cover) and is deterministic for a seed."""

import numpy as np

# K, the points per object cloud of the data sets and of CollisionWorld: twice the LOCC paper's
# 1,500, so LOCC's surface depths read the surfaces at a finer spacing (docs/results.md).
SURFACE_POINTS = 3000


def face_normals_and_areas(vertices: np.ndarray, faces: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unit face normals (F, 3) (zero for degenerate faces) and face areas (F,)."""
    tri = vertices[faces]
    cross = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    norm = np.linalg.norm(cross, axis=1)
    normals = np.divide(cross, norm[:, None], out=np.zeros_like(cross), where=norm[:, None] > 0)
    return normals, 0.5 * norm


def sample_surface_even(
    vertices: np.ndarray, faces: np.ndarray, count: int, seed: int, oversample: int = 5
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`count` points spread evenly over the surface.

    vertices: (V, 3) float, faces: (F, 3) int. Returns points (count, 3), unit outward normals of
    the faces they lie on (count, 3) and those face ids (count,). Deterministic for `seed`.
    """
    if count <= 0:
        raise ValueError(f"count: expected a positive number of points, got {count}")
    normals, areas = face_normals_and_areas(vertices, faces)
    total = areas.sum()
    if not np.isfinite(total) or total <= 0:
        raise ValueError("vertices/faces: the mesh has no surface area to sample")
    rng = np.random.default_rng(seed)
    m = count * max(1, oversample)
    face_ids = rng.choice(len(faces), size=m, p=areas / total)
    # Uniform barycentric coordinates by reflecting the unit square onto the triangle.
    u, v = rng.random(m), rng.random(m)
    flip = u + v > 1
    u[flip], v[flip] = 1 - u[flip], 1 - v[flip]
    tri = vertices[faces[face_ids]]
    candidates = tri[:, 0] + u[:, None] * (tri[:, 1] - tri[:, 0]) + v[:, None] * (tri[:, 2] - tri[:, 0])

    chosen = np.empty(count, dtype=np.int64)
    chosen[0] = 0  # candidates are already in random order
    nearest = np.linalg.norm(candidates - candidates[0], axis=1)
    for i in range(1, count):
        chosen[i] = int(np.argmax(nearest))
        np.minimum(nearest, np.linalg.norm(candidates - candidates[chosen[i]], axis=1), out=nearest)
    return candidates[chosen], normals[face_ids[chosen]], face_ids[chosen]

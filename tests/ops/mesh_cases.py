"""Mesh and pose builders shared by the mesh-query tests and benchmarks (numpy + trimesh)."""

from __future__ import annotations

import numpy as np
import torch

__all__ = [
    "box_mesh",
    "bumpy_sphere",
    "random_poses",
    "random_soup",
    "subdivided_box",
]


def bumpy_sphere(subdivisions: int = 2, radius: float = 0.05, bump: float = 0.3, seed: int = 0):
    """Watertight, non-convex (star-shaped) mesh: an icosphere with random radial bumps.

    Triangles: 20 * 4**subdivisions (1280 at 3, 20480 at 5, 327680 at 7)."""
    import trimesh

    rng = np.random.default_rng(seed)
    s = trimesh.creation.icosphere(subdivisions=subdivisions, radius=1.0)
    v = np.asarray(s.vertices)
    # Smooth random field: a few random lobes.
    lobes = rng.normal(size=(6, 3))
    lobes /= np.linalg.norm(lobes, axis=1, keepdims=True)
    field = np.exp(4 * (v @ lobes.T - 1)).sum(1)
    r = radius * (1 + bump * (field - field.mean()) / (np.ptp(field) + 1e-12))
    return v * r[:, None], np.asarray(s.faces)


def box_mesh(extents=(0.1, 0.1, 0.1)):
    import trimesh

    b = trimesh.creation.box(extents=extents)
    return np.asarray(b.vertices), np.asarray(b.faces)


def subdivided_box(extents=(0.1, 0.1, 0.1), iterations: int = 1):
    """The same box re-triangulated finer (each triangle split in 4, `iterations` times)."""
    import trimesh

    b = trimesh.creation.box(extents=extents)
    v, f = np.asarray(b.vertices), np.asarray(b.faces)
    for _ in range(iterations):
        v, f = trimesh.remesh.subdivide(v, f)
    return np.asarray(v), np.asarray(f)


def random_soup(n: int = 60, size: float = 0.1, tri_size: float = 0.03, seed: int = 0):
    """Open polygon soup: n random triangles in a cube of side `size`."""
    rng = np.random.default_rng(seed)
    centres = rng.uniform(-size / 2, size / 2, (n, 1, 3))
    v = (centres + rng.normal(scale=tri_size / 2, size=(n, 3, 3))).reshape(-1, 3)
    return v, np.arange(3 * n).reshape(n, 3)


def random_poses(n: int, spread: float, seed: int = 0, dtype=torch.float64) -> torch.Tensor:
    """(n, 7) poses: uniform positions in [-spread, spread]^3, uniform random rotations."""
    g = torch.Generator().manual_seed(seed)
    t = (torch.rand(n, 3, generator=g, dtype=torch.float64) * 2 - 1) * spread
    q = torch.randn(n, 4, generator=g, dtype=torch.float64)
    q = q / q.norm(dim=1, keepdim=True)
    return torch.cat([t, q], 1).to(dtype)


def near_contact_poses(lib, ids_a, ids_b, gap: float, seed: int = 0, spread: float = 0.3,
                       iterations: int = 6):  # fmt: skip
    """Random poses for mesh pairs, then B translated (along the closest-point direction) until
    the pair's surface distance is `gap` (LOCC-style distance manipulation; float64).

    Returns (poses_a, poses_b) in the library's dtype. Pairs start `spread` apart (far enough to
    be separated for meshes smaller than that)."""
    from contactnet.ops import mesh_distance

    ids_a = torch.as_tensor(ids_a)
    ids_b = torch.as_tensor(ids_b)
    q = ids_a.shape[0]
    pa = random_poses(q, 0.0, seed=seed)
    pb = random_poses(q, 0.0, seed=seed + 1)
    g = torch.Generator().manual_seed(seed + 2)
    direction = torch.nn.functional.normalize(torch.randn(q, 3, generator=g, dtype=torch.float64), dim=1)  # noqa: E501
    pb[:, :3] = pa[:, :3] + spread * direction
    lib64 = lib if lib.dtype == torch.float64 else lib.to(dtype=torch.float64)
    for _ in range(iterations):
        res = mesh_distance(lib64, ids_a, ids_b, pa.to(lib64.device), pb.to(lib64.device))
        d = res.distance.cpu()
        u = (res.point_a - res.point_b).cpu() / d.clamp_min(1e-300)[:, None]
        ok = d > 0
        # move B towards A by d - gap along the closest-point direction
        pb[:, :3] += torch.where(ok[:, None], u * (d - gap)[:, None], -0.01 * direction)
    return pa.to(lib.dtype), pb.to(lib.dtype)

"""Small non-convex test objects whose exact convex decomposition is known."""

import numpy as np
import torch


def box_points(lo, hi) -> np.ndarray:
    lo, hi = np.asarray(lo, float), np.asarray(hi, float)
    return np.array([[(hi if i >> k & 1 else lo)[k] for k in range(3)] for i in range(8)])


def l_shape() -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """An L of two boxes (a 0.2 m cube-ish bar and a foot), centred on its AABB: (vertices,
    faces, the two boxes' corners as its exact convex pieces)."""
    import manifold3d

    boxes = [([0.0, 0.0, 0.0], [0.06, 0.2, 0.06]), ([0.0, 0.0, 0.0], [0.2, 0.06, 0.06])]
    solid = None
    for lo, hi in boxes:
        cube = manifold3d.Manifold.cube(np.subtract(hi, lo).tolist()).translate(lo)
        solid = cube if solid is None else solid + cube
    mesh = solid.to_mesh()
    vertices, faces = np.asarray(mesh.vert_properties[:, :3], float), np.asarray(mesh.tri_verts, np.int64)
    centre = (vertices.min(0) + vertices.max(0)) / 2
    return vertices - centre, faces, [box_points(lo, hi) - centre for lo, hi in boxes]


def random_poses(n: int, seed: int, spread: float = 0.25, dtype=torch.float64) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(n, 4, generator=g, dtype=dtype)
    return torch.cat([spread * torch.rand(n, 3, generator=g, dtype=dtype), q / q.norm(dim=1, keepdim=True)], 1)

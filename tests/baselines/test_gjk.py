"""Fixed-iteration GJK against exact convex-convex collision (mesh_collide on the hulls)."""

import numpy as np
import pytest
import torch

from contactnet.baselines.gjk import gjk_intersect, gjk_piece_pairs
from contactnet.geometry import Mesh, MeshLibrary
from contactnet.ops import mesh_collide, mesh_distance

CUBE = torch.tensor([[i >> 2 & 1, i >> 1 & 1, i & 1] for i in range(8)], dtype=torch.float64) - 0.5


def random_convex_pairs(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """n pairs of 20-point clouds, anisotropic, B offset by about one object size."""
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(n, 20, 3, generator=g, dtype=torch.float64) * (0.1 + torch.rand(n, 1, 3, generator=g, dtype=torch.float64))
    b = torch.randn(n, 20, 3, generator=g, dtype=torch.float64) * (0.1 + torch.rand(n, 1, 3, generator=g, dtype=torch.float64))
    return a, b + 1.5 * torch.randn(n, 1, 3, generator=g, dtype=torch.float64)


def hull_faces(points: torch.Tensor) -> torch.Tensor:
    """Outward-oriented hull triangles (scipy's simplices come in either winding, which would
    spoil the winding-number containment test)."""
    from scipy.spatial import ConvexHull

    hull = ConvexHull(points.numpy())
    faces = hull.simplices.copy()
    flip = (hull.equations[:, :3] * np.cross(*(points.numpy()[faces[:, k]] - points.numpy()[faces[:, 0]]
                                                  for k in (1, 2)))).sum(1) < 0
    faces[flip] = faces[flip][:, ::-1]
    return torch.as_tensor(faces, dtype=torch.int64)


def exact_hull_collision(a: torch.Tensor, b: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """(collide, distance) of the convex hulls of a[i], b[i] via the project's exact mesh ops."""
    meshes = [Mesh(p, hull_faces(p)) for pair in zip(a, b) for p in pair]
    lib = MeshLibrary(meshes, dtype=torch.float64)
    ids = torch.arange(len(meshes))
    pose = torch.zeros(len(a), 7, dtype=torch.float64)
    pose[:, 3] = 1
    collide = mesh_collide(lib, ids[0::2], ids[1::2], pose, pose)
    distance = mesh_distance(lib, ids[0::2], ids[1::2], pose, pose).distance
    return collide.numpy(), distance.numpy()


def test_gjk_matches_exact_hull_collision_on_random_pairs(device):
    a, b = random_convex_pairs(400, seed=0)
    collide, distance = exact_hull_collision(a, b)
    assert 0.1 < collide.mean() < 0.9  # both classes present
    got = gjk_intersect(a.to(device), b.to(device), iterations=32).cpu().numpy()
    clear = collide | (distance > 1e-6)  # away from touching
    np.testing.assert_array_equal(got[clear], collide[clear])


def test_few_iterations_err_towards_collision_only():
    a, b = random_convex_pairs(400, seed=1)
    collide, _ = exact_hull_collision(a, b)
    for iterations in (1, 2, 4):
        got = gjk_intersect(a, b, iterations).numpy()
        assert not (collide & ~got).any(), f"{iterations} iterations called a colliding pair free"
    assert (gjk_intersect(a, b, 1).numpy() != collide).any()  # and one round is not enough


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_touching_and_near_touching_cubes(dtype):
    gaps = torch.tensor([-1e-3, 0.0, 1e-3, 1e-2], dtype=torch.float64)
    offsets = torch.zeros(len(gaps), 3, dtype=torch.float64)
    offsets[:, 0] = 1 + gaps
    a = CUBE.expand(len(gaps), 8, 3)
    b = CUBE + offsets[:, None]
    got = gjk_intersect(a.to(dtype), b.to(dtype), 16)
    assert got.tolist() == [True, True, False, False]
    # Rotated about the contact normal: face-face contact with misaligned edges, and edge-edge.
    c, s = np.cos(0.3), np.sin(0.3)
    rot = torch.tensor([[1, 0, 0], [0, c, -s], [0, s, c]], dtype=torch.float64)
    got = gjk_intersect(a.to(dtype), (CUBE @ rot.T + offsets[:, None]).to(dtype), 16)
    assert got.tolist() == [True, True, False, False]


def test_degenerate_sets():
    point_in, point_out = torch.zeros(1, 3, dtype=torch.float64), torch.tensor([[0.6, 0.0, 0.0]], dtype=torch.float64)
    segment = torch.tensor([[-2.0, 0.1, 0.2], [2.0, 0.1, 0.2]], dtype=torch.float64)  # pierces the cube
    flat = torch.tensor([[0.4, -1, -1], [0.4, 1, -1], [0.4, 1, 1], [0.4, -1, 1]], dtype=torch.float64)
    assert bool(gjk_intersect(CUBE, point_in, 8)) and not bool(gjk_intersect(CUBE, point_out, 8))
    assert bool(gjk_intersect(CUBE, segment, 8)) and not bool(gjk_intersect(CUBE, segment + 0.7, 8))
    assert bool(gjk_intersect(flat, CUBE, 8)) and not bool(gjk_intersect(flat + torch.tensor([0.2, 0, 0]), CUBE, 8))
    # Padding by repeating a vertex changes nothing.
    padded = torch.cat([flat, flat[:1].expand(5, 3)])
    assert bool(gjk_intersect(padded, CUBE, 8)) == bool(gjk_intersect(flat, CUBE, 8))


def test_bad_input_names_the_argument():
    with pytest.raises(ValueError, match="verts_a, verts_b"):
        gjk_intersect(torch.zeros(4, 2), CUBE)
    with pytest.raises(ValueError, match="iterations"):
        gjk_intersect(CUBE, CUBE, 0)


def test_piece_pairs_match_broadcast_pairs():
    g = torch.Generator().manual_seed(3)
    a = torch.randn(5, 3, 7, 3, generator=g, dtype=torch.float64) * 0.3
    b = torch.randn(5, 4, 6, 3, generator=g, dtype=torch.float64) * 0.3 + torch.randn(5, 4, 1, 3, generator=g, dtype=torch.float64)
    for iterations in (1, 3, 16):
        expected = gjk_intersect(a[:, :, None], b[:, None], iterations)
        got = gjk_piece_pairs(a, b, iterations)
        assert got.shape == (5, 3, 4) and torch.equal(got, expected)
        assert 0 < got.sum() < got.numel()
    with pytest.raises(ValueError, match="pieces_a, pieces_b"):
        gjk_piece_pairs(a, b[:2])

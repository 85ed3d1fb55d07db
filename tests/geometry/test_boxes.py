"""Oriented-box overlap against exact collision of the boxes as meshes; box nesting by hand."""

import math

import torch
import trimesh

from contactnet.geometry import Mesh, MeshLibrary
from contactnet.geometry.boxes import box_corners, boxes_nested, boxes_overlap
from contactnet.ops import mesh_collide, mesh_distance


def test_matches_exact_collision_of_box_meshes():
    g = torch.Generator().manual_seed(0)
    sizes = [(0.1, 0.05, 0.02), (0.03, 0.2, 0.04)]
    lib = MeshLibrary([Mesh(trimesh.creation.box(s).vertices, trimesh.creation.box(s).faces) for s in sizes],
                      dtype=torch.float64)
    aabb = torch.stack([lib[i].bounds() for i in range(2)])
    q = 3000
    quats = torch.randn(q, 2, 4, generator=g, dtype=torch.float64)
    quats = quats / quats.norm(dim=-1, keepdim=True)
    pa = torch.cat([torch.zeros(q, 3, dtype=torch.float64), quats[:, 0]], 1)
    pb = torch.cat([(torch.rand(q, 3, generator=g, dtype=torch.float64) * 2 - 1) * 0.08, quats[:, 1]], 1)
    ids_a, ids_b = torch.zeros(q, dtype=torch.long), torch.ones(q, dtype=torch.long)
    exact = mesh_collide(lib, ids_a, ids_b, pa, pb)
    clear = mesh_distance(lib, ids_a, ids_b, pa, pb).distance > 1e-9
    got = boxes_overlap(aabb[ids_a], aabb[ids_b], pa, pb)
    decided = clear | exact
    assert (got[decided] == exact[decided]).all()
    assert 0.2 < exact.float().mean() < 0.8


def test_broadcasts_over_groups():
    aabb = torch.tensor([[[-1.0, -1, -1], [1, 1, 1]]])
    pose = torch.tensor([1.0, 0, 0, 1, 0, 0, 0])
    far = torch.tensor([5.0, 0, 0, 1, 0, 0, 0])
    out = boxes_overlap(aabb[:, None], aabb[:, None], torch.stack([pose, pose])[None], torch.stack([pose, far])[None])
    assert out.tolist() == [[True, False]]


def _pose(x=0.0):
    return torch.tensor([x, 0.0, 0.0, 1, 0, 0, 0])


def test_box_corners_are_the_eight_min_max_combinations():
    box = torch.tensor([[-1.0, -2.0, -3.0], [1.0, 2.0, 3.0]])
    corners = box_corners(box[None].expand(2, 2, 3))
    assert corners.shape == (2, 8, 3)
    assert {tuple(c) for c in corners[0].tolist()} == {(x, y, z) for x in (-1, 1) for y in (-2, 2) for z in (-3, 3)}


def test_boxes_nested_by_hand_and_independent_of_the_world_frame():
    from contactnet.data.pairs import random_quaternions
    from contactnet.geometry.poses import compose_poses

    big, small = torch.tensor([[-1.0, -1, -1], [1, 1, 1]]), torch.tensor([[-0.1, -0.1, -0.1], [0.1, 0.1, 0.1]])
    turned = torch.tensor([0.0, 0, 0, math.cos(math.pi / 8), 0, 0, math.sin(math.pi / 8)])  # 45 deg about z
    cases = [  # (pose of the small box in the big one's frame, nested)
        (_pose(), True), (_pose(0.85), True), (_pose(0.95), False),  # 0.95 + 0.1 sticks out
        (turned, True), (_pose(3.0), False)]
    for pose, expected in cases:
        assert bool(boxes_nested(big, small, _pose(), pose)) == expected, pose
        assert bool(boxes_nested(small, big, pose, _pose())) == expected, pose  # either order
    assert bool(boxes_nested(big, big, _pose(), _pose()))  # equal boxes: each lies in the other
    # Moving the whole scene changes nothing; a batch broadcasts (Q,) against (Q, N).
    g = torch.Generator().manual_seed(0)
    n = 64
    pa = torch.cat([torch.rand(n, 3, generator=g), random_quaternions(n, g).float()], 1)
    pb = torch.cat([pa[:, :3] + 2.4 * torch.rand(n, 3, generator=g) - 1.2, random_quaternions(n, g).float()], 1)
    got = boxes_nested(big, small, pa, pb)
    assert got.any() and not got.all()
    world = torch.cat([torch.rand(n, 3, generator=g), random_quaternions(n, g).float()], 1)
    assert torch.equal(boxes_nested(big, small, compose_poses(world, pa), compose_poses(world, pb)), got)
    grid = boxes_nested(big, small[None].expand(3, 2, 3), pa[:, None], pb[:, None].expand(n, 3, 7))
    assert grid.shape == (n, 3) and torch.equal(grid, got[:, None].expand(n, 3))

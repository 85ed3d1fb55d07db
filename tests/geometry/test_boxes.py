"""Oriented-box overlap against exact collision of the boxes as meshes; box corners by hand."""


import torch
import trimesh

from contactnet.geometry import Mesh, MeshLibrary
from contactnet.geometry.boxes import box_corners, boxes_overlap
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

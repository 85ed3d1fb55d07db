"""IS-CD: winding numbers against the reference, exact labels on easy pairs, convergence in N."""

import numpy as np
import pytest
import torch

from contactnet.baselines import ImplicitSurfaceCD, pad_triangles, winding_numbers
from contactnet.geometry import Mesh, MeshLibrary
from contactnet.ops import mesh_collide, mesh_distance
from contactnet.ops.reference.mesh_contacts import winding_number_reference
from tests.baselines.shapes import l_shape, random_poses


def setup(num_points: int, dtype=torch.float64):
    vertices, faces, _ = l_shape()
    aabb = torch.tensor(np.stack([vertices.min(0), vertices.max(0)]))[None]
    # Object 1: the L with a few padding triangles (a second, smaller object pads object 0).
    small = vertices * 0.5
    tris = pad_triangles([vertices, small[: len(vertices)]], [faces, faces[: len(faces) // 2]], dtype)
    lib = MeshLibrary([Mesh(vertices, faces)], dtype=torch.float64)
    return ImplicitSurfaceCD(tris[:1], aabb.to(dtype), num_points=num_points), lib, tris


def test_padded_winding_numbers_match_the_reference():
    _, _, tris = setup(8)
    g = torch.Generator().manual_seed(0)
    points = 0.15 * torch.randn(2, 50, 3, generator=g, dtype=torch.float64)
    got = winding_numbers(points, tris, face_chunk=7)  # a chunk that splits the faces unevenly
    for i, t in enumerate(tris):
        real = t[t.flatten(1).abs().sum(1) > 0]  # padding collapses to the origin
        torch.testing.assert_close(got[i], winding_number_reference(points[i], real))


def test_easy_pairs_get_exact_labels(device):
    checker, lib, _ = setup(512)
    checker = checker.to(device)
    ids = torch.zeros(200, dtype=torch.int64)
    pa, pb = random_poses(200, 0), random_poses(200, 1)
    pb[:20] = pa[:20]  # the first 20: B a copy of A, shifted by 5 mm: deep overlap
    pb[:20, 0] += 0.005
    exact = mesh_collide(lib, ids, ids, pa, pb).numpy()
    free = mesh_distance(lib, ids, ids, pa, pb).distance.numpy()
    got = checker(ids, ids, pa.to(device), pb.to(device)).cpu().numpy()
    assert not (got & ~exact).any()  # a point inside both is a witness: no false positives
    # Far apart, or overlapping deeply: no misses either.
    assert exact[:20].all() and got[:20].all()
    assert (free > 0.01).any() and not got[free > 0.01].any()


def test_accuracy_converges_to_exact_with_more_points():
    ids = torch.zeros(100, dtype=torch.int64)
    pa, pb = random_poses(100, 4), random_poses(100, 5)
    checker, lib, _ = setup(4)
    exact = mesh_collide(lib, ids, ids, pa, pb)
    accuracy = [float((ImplicitSurfaceCD(checker.tris, checker.aabb, n)(ids, ids, pa, pb) == exact).double().mean())
                for n in (4, 64, 1024)]
    # Slowish convergence: the points fill a box overlap much larger than the overlap of two
    # rotated L's (measured: 0.63, 0.91, 0.97).
    assert accuracy[0] < accuracy[1] < accuracy[2] and accuracy[2] >= 0.95


def test_bad_arguments():
    checker, _, _ = setup(8)
    with pytest.raises(ValueError, match="num_points"):
        ImplicitSurfaceCD(checker.tris, checker.aabb, num_points=0)
    with pytest.raises(ValueError, match="tris, aabb"):
        ImplicitSurfaceCD(checker.tris, checker.aabb[0])

"""PieceGjk: exact pieces give exact labels (numpy ids and float32 poses too); it agrees with
UCF-GJK and the exact check on objects of different piece counts; bad poses are named."""

import numpy as np
import pytest
import torch
import trimesh

from contactnet.baselines import PieceGjk, UcfGjk, pad_pieces
from contactnet.geometry import Mesh, MeshLibrary
from contactnet.ops import mesh_collide, mesh_distance
from tests.baselines.shapes import l_shape, random_poses


def _labels(meshes, ids_a, ids_b, pa, pb):
    lib = MeshLibrary(meshes, dtype=torch.float64)
    return mesh_collide(lib, ids_a, ids_b, pa, pb), mesh_distance(lib, ids_a, ids_b, pa, pb).distance


def test_exact_pieces_give_exact_labels(device):
    vertices, faces, pieces = l_shape()
    ids = torch.zeros(400, dtype=torch.int64)
    pa, pb = random_poses(400, 0), random_poses(400, 1)
    exact, distance = _labels([Mesh(vertices, faces)], ids, ids, pa, pb)
    assert 0.2 < float(exact.double().mean()) < 0.8
    on = [x.to(device) for x in (ids, pa, pb)]  # the module refuses tensors on another device than its own
    got = PieceGjk(pad_pieces([pieces], torch.float64)).to(device)(on[0], on[0], on[1], on[2]).cpu()
    clear = exact | (distance > 1e-6)  # not touching
    assert torch.equal(got[clear], exact[clear])
    # As users hold them: numpy ids, float32 pieces and poses (compared clear of float32 rounding).
    got32 = PieceGjk(pad_pieces([pieces]))(ids.numpy(), ids.numpy(), pa.float(), pb.float())
    clear = distance.abs() > 1e-4
    assert torch.equal(got32[clear], exact[clear])


def test_agrees_with_ucf_gjk_and_exact_on_objects_of_different_piece_counts():
    vertices, faces, l_pieces = l_shape()
    box = trimesh.creation.box(extents=(0.06, 0.06, 0.06))
    padded = pad_pieces([l_pieces, [np.asarray(box.vertices)]], torch.float64)  # the box's piece is padded
    g = torch.Generator().manual_seed(3)
    ids_a, ids_b = torch.randint(2, (600,), generator=g), torch.randint(2, (600,), generator=g)
    pa, pb = random_poses(600, 4, spread=0.15), random_poses(600, 5, spread=0.15)
    exact, distance = _labels([Mesh(vertices, faces), Mesh(box.vertices, box.faces)], ids_a, ids_b, pa, pb)
    assert 0.1 < float(exact.double().mean()) < 0.9
    got = PieceGjk(padded)(ids_a, ids_b, pa, pb)
    ucf = UcfGjk(padded, iterations=64)(ids_a, ids_b, pa, pb)
    clear = exact | (distance > 1e-6)
    assert torch.equal(got[clear], exact[clear]) and torch.equal(ucf[clear], exact[clear])


def test_bad_inputs_are_named():
    check = PieceGjk(pad_pieces([l_shape()[2]], torch.float64))
    ids, poses = torch.zeros(2, dtype=torch.int64), random_poses(2, 0)
    with pytest.raises(ValueError, match="poses_b"):
        check(ids, ids, poses, torch.full((2, 7), float("nan"), dtype=torch.float64))
    with pytest.raises(ValueError, match=r"ids_b: object rows must lie in \[0, 1\)"):
        check(ids, ids + 1, poses, poses)
    with pytest.raises(ValueError, match="ids_b has batch size 2 but ids_a has 1"):
        check(ids[:1], ids, poses, poses)

"""UCF-GJK over objects: exact pieces give exact answers; CoACD pieces are cached and reused."""

import sys

import numpy as np
import pytest
import torch

from contactnet.baselines import DecompositionSpec, UcfGjk, cached_decompose, object_set_pieces, pad_pieces
from contactnet.baselines import convex_pieces
from contactnet.geometry import Mesh, MeshLibrary
from contactnet.ops import mesh_collide, mesh_distance
from tests.baselines.shapes import l_shape, random_poses

# Cheap CoACD settings: the tests check plumbing, not decomposition quality.
FAST = DecompositionSpec(threshold=0.2, max_pieces=4, max_piece_vertices=16, resolution=200,
                         mcts_iterations=5, mcts_nodes=4, mcts_max_depth=1)


def test_exact_pieces_give_exact_labels(device):
    vertices, faces, pieces = l_shape()
    lib = MeshLibrary([Mesh(vertices, faces)], dtype=torch.float64)
    ids = torch.zeros(300, dtype=torch.int64)
    pa, pb = random_poses(300, 0), random_poses(300, 1)
    exact = mesh_collide(lib, ids, ids, pa, pb).numpy()
    distance = mesh_distance(lib, ids, ids, pa, pb).distance.numpy()
    assert 0.2 < exact.mean() < 0.8
    checker = UcfGjk(pad_pieces([pieces], torch.float64), iterations=32, chunk=64).to(device)
    got = checker(ids, ids, pa.to(device), pb.to(device)).cpu().numpy()
    clear = exact | (distance > 1e-6)
    np.testing.assert_array_equal(got[clear], exact[clear])


def test_padding_repeats_real_pieces_and_vertices():
    _, _, pieces = l_shape()
    padded = pad_pieces([pieces, pieces[:1], [pieces[1][:5]]])
    assert padded.vertices.shape == (3, 2, 8, 3) and padded.counts.tolist() == [2, 1, 1]
    assert torch.equal(padded.vertices[1, 1], padded.vertices[1, 0])  # missing piece: piece 0 again
    assert torch.equal(padded.vertices[2, 0, 5:], padded.vertices[2, 0, :1].expand(3, 3))
    with pytest.raises(ValueError, match="pieces_per_object"):
        pad_pieces([pieces, []])


def test_decomposition_cache_is_reused_and_keyed_by_params(tmp_path, monkeypatch):
    pytest.importorskip("coacd")
    vertices, faces, _ = l_shape()
    calls = []
    real = convex_pieces.decompose
    monkeypatch.setattr(convex_pieces, "decompose", lambda *a: calls.append(a[2]) or real(*a))
    first = cached_decompose(vertices, faces, FAST, tmp_path)
    again = cached_decompose(vertices, faces, FAST, tmp_path)
    assert len(calls) == 1 and len(list(tmp_path.glob("*.npz"))) == 1
    assert len(first) == len(again) and all(np.array_equal(a, b) for a, b in zip(first, again))
    assert 1 <= len(first) <= FAST.max_pieces and all(len(p) <= FAST.max_piece_vertices for p in first)
    other = DecompositionSpec(**{**FAST.__dict__, "threshold": 0.3})
    cached_decompose(vertices, faces, other, tmp_path)  # a config change: a new entry
    cached_decompose(vertices * 2, faces, FAST, tmp_path)  # a mesh change: a new entry
    assert len(calls) == 3 and len(list(tmp_path.glob("*.npz"))) == 3
    pieces = object_set_pieces([vertices, vertices * 2], [faces, faces], FAST, tmp_path, progress=False)
    assert len(calls) == 3 and pieces.vertices.shape[0] == 2


def test_coacd_pieces_cover_the_object(tmp_path):
    pytest.importorskip("coacd")
    vertices, faces, _ = l_shape()
    pieces = object_set_pieces([vertices], [faces], FAST, tmp_path, progress=False)
    lib = MeshLibrary([Mesh(vertices, faces)], dtype=torch.float64)
    ids = torch.zeros(200, dtype=torch.int64)
    pa, pb = random_poses(200, 2), random_poses(200, 3)
    exact = mesh_collide(lib, ids, ids, pa, pb)
    got = UcfGjk(pieces.to(dtype=torch.float64), iterations=16)(ids, ids, pa, pb)
    assert (got == exact).double().mean() > 0.9


def test_missing_coacd_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "coacd", None)
    vertices, faces, _ = l_shape()
    with pytest.raises(ImportError, match=r"contactnet\[baselines\]"):
        object_set_pieces([vertices], [faces], FAST, "unused", progress=False)


def test_bad_arguments():
    with pytest.raises(ValueError, match="threshold"):
        DecompositionSpec(threshold=0)
    with pytest.raises(ValueError, match="iterations"):
        UcfGjk(pad_pieces([l_shape()[2]]), iterations=0)


def test_parallel_decomposition_fills_the_same_cache(tmp_path):
    pytest.importorskip("coacd")
    vertices, faces, _ = l_shape()
    meshes = [vertices, vertices * 1.5]
    parallel = object_set_pieces(meshes, [faces, faces], FAST, tmp_path / "a", progress=False, workers=2)
    serial = object_set_pieces(meshes, [faces, faces], FAST, tmp_path / "a", progress=False)  # all cached
    assert torch.equal(parallel.vertices, serial.vertices) and len(list((tmp_path / "a").glob("*.npz"))) == 2
    with pytest.raises(ValueError, match="workers"):
        object_set_pieces(meshes, [faces, faces], FAST, tmp_path, progress=False, workers=0)

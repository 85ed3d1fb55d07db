"""Mesh / MeshLibrary: validation, degenerate faces, packing, files, devices, BVH caching."""

import numpy as np
import pytest
import torch

from contactnet.geometry import Mesh, MeshLibrary
from tests.ops.mesh_cases import box_mesh, bumpy_sphere


def test_validation_errors_name_the_mesh():
    v, f = box_mesh()
    bad = v.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="'cube'.*NaN"):
        Mesh(bad, f, name="cube")
    bad[3, 1] = np.inf
    with pytest.raises(ValueError, match="'cube'.*NaN or Inf"):
        Mesh(bad, f, name="cube")
    with pytest.raises(ValueError, match="'cube'.*face indices"):
        Mesh(v, np.vstack([f, [[0, 1, 99]]]), name="cube")
    with pytest.raises(ValueError, match="'cube'.*face indices"):
        Mesh(v, np.vstack([f, [[0, -1, 2]]]), name="cube")
    with pytest.raises(ValueError, match="'empty' is empty"):
        Mesh(np.zeros((0, 3)), np.zeros((0, 3), int), name="empty")
    with pytest.raises(ValueError, match="shape"):
        Mesh(np.zeros((4, 2)), f, name="flat")


def test_degenerate_faces_dropped_with_warning():
    v, f = box_mesh()
    v = np.vstack([v, [[0, 0, 0], [1, 1, 1], [2, 2, 2]]])  # collinear
    extra = np.array([[8, 9, 10], [0, 0, 1]])
    with pytest.warns(UserWarning, match="dropped 2 degenerate"):
        m = Mesh(v, np.vstack([f, extra]), name="box")
    assert m.num_faces == 12 and m.kept_faces.tolist() == list(range(12))
    with pytest.raises(ValueError, match="empty"):
        with pytest.warns(UserWarning):
            Mesh(v, extra, name="only-degenerate")


def test_recentered_and_bounds():
    v, f = box_mesh((0.2, 0.1, 0.1))
    m = Mesh(v + np.array([1.0, 2.0, 3.0]), f)
    torch.testing.assert_close(m.aabb_center(), torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64))
    c = m.recentered()
    torch.testing.assert_close(c.aabb_center(), torch.zeros(3, dtype=torch.float64))
    assert torch.equal(m.aabb_center(), torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)), "not moved"


def test_library_packing_and_roundtrip(tmp_path):
    meshes = [Mesh(*box_mesh(), name="box"), Mesh(*bumpy_sphere(1), name="bumpy")]
    path = tmp_path / "bumpy.obj"
    meshes[1].to_trimesh().export(path)
    meshes.append(Mesh.from_file(path))
    lib = MeshLibrary(meshes)
    assert len(lib) == 3 and lib.dtype == torch.float32
    assert lib.face_offsets.tolist() == [0, 12, 92, 172]
    for i, m in enumerate(meshes):
        torch.testing.assert_close(lib[i].vertices, m.vertices)
        assert torch.equal(lib[i].faces, m.faces)
    assert lib.memory_bytes() > 0
    with pytest.raises(IndexError):
        lib[3]
    with pytest.raises(ValueError):
        MeshLibrary([])
    with pytest.raises(TypeError):
        MeshLibrary([np.zeros(3)])


def test_bvh_cached_and_moved(device):
    lib = MeshLibrary([Mesh(*bumpy_sphere(2), name="b")], dtype=torch.float64)
    b1 = lib.bvh
    assert lib.bvh is b1
    moved = lib.to(device)
    assert moved.bvh.tris.device.type == device
    assert torch.equal(moved.bvh.nodes.cpu(), b1.nodes)
    f32 = lib.to(dtype=torch.float32)
    assert f32.bvh.tris.dtype == torch.float32
    # memory is linear in triangles: a median split of n > 4 triangles leaves both halves >= 2, so
    # every leaf holds 2..4 of the F triangles and the full binary tree has 2 * leaves - 1 <= F - 1 nodes
    links = b1.links
    leaf_sizes = torch.tensor([b1.leaf_range(int(link))[1] for link in links[links < 0]])
    assert int(leaf_sizes.sum()) == lib.faces.shape[0]
    assert 2 <= int(leaf_sizes.min()) and int(leaf_sizes.max()) <= 4
    assert b1.nodes.shape[0] == 2 * leaf_sizes.numel() - 1 <= lib.faces.shape[0] - 1

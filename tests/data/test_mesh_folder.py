"""Real mesh folders (GSO / YCB / any files), tested on small meshes written here."""

import numpy as np
import pytest
import trimesh

from contactnet.data.mesh_folder import load_mesh_folder


def _box(path, extent=0.1, offset=(1.0, 2.0, 3.0)):
    mesh = trimesh.creation.box([extent] * 3)
    mesh.apply_translation(offset)
    path.parent.mkdir(parents=True, exist_ok=True)
    mesh.export(path)


def test_gso_layout(tmp_path):
    for name in ("mug_a", "bowl_b"):
        _box(tmp_path / name / "meshes" / "model.obj")
    (tmp_path / "README.txt").write_text("not a mesh")
    meshes, manifest = load_mesh_folder(tmp_path)
    assert manifest.layout == "gso"
    assert [m.name for m in meshes] == ["bowl_b", "mug_a"]
    for m in meshes:  # recentred on the AABB centre
        np.testing.assert_allclose(m.vertices.min(0) + m.vertices.max(0), 0, atol=1e-12)


def test_ycb_layout_and_scale(tmp_path):
    _box(tmp_path / "003_cracker_box" / "google_16k" / "textured.obj", extent=0.2)
    meshes, manifest = load_mesh_folder(tmp_path, scale=1.5)
    assert manifest.layout == "ycb" and manifest.scale == 1.5
    np.testing.assert_allclose(np.ptp(meshes[0].vertices, axis=0), 0.3, atol=1e-9)


def test_plain_folder_skips_bad_files_with_reasons(tmp_path):
    _box(tmp_path / "a.stl")
    _box(tmp_path / "sub" / "b.ply")
    (tmp_path / "broken.obj").write_text("v 0 0 0\nv nan 0 0\nv 0 1 0\nf 1 2 3\n")
    (tmp_path / "empty.obj").write_text("# nothing here\n")
    meshes, manifest = load_mesh_folder(tmp_path)
    assert manifest.layout == "files"
    assert sorted(m.name for m in meshes) == ["a", "sub__b"]
    reasons = {s["name"]: s["reason"] for s in manifest.skipped}
    assert set(reasons) == {"broken", "empty"}
    assert "NaN" in reasons["broken"]


def test_degenerate_faces_are_dropped_and_counted(tmp_path):
    v = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [2, 0, 0]], dtype=float)
    f = np.array([[0, 1, 2], [0, 1, 3], [1, 1, 2]])  # collinear, repeated index
    trimesh.Trimesh(v, f, process=False).export(tmp_path / "toy.obj")
    with pytest.warns(UserWarning, match="degenerate"):
        meshes, manifest = load_mesh_folder(tmp_path)
    assert len(meshes[0].faces) == 1 and manifest.loaded[0]["dropped_faces"] == 2


def test_missing_or_empty_folder(tmp_path):
    with pytest.raises(ValueError, match="not a directory"):
        load_mesh_folder(tmp_path / "nope")
    with pytest.raises(ValueError, match="no loadable mesh"):
        load_mesh_folder(tmp_path)

"""Object sets: build, cache, resume, load."""

import json
import threading

import numpy as np
import pytest
import trimesh

from contactnet.data.objects import ObjectSetSpec, build_object_set, load_object_set, main
from contactnet.data.procedural import DEFAULT_FAMILIES
from contactnet.data.storage import folder_lock


def test_build_load_and_resume(tmp_path):
    spec = ObjectSetSpec(families=["mug", "ring"], objects_per_family=2, num_points=64, seed=1)
    manifest = build_object_set(spec, tmp_path, progress=False)
    names = ["mug_000", "mug_001", "ring_000", "ring_001"]
    assert [o["name"] for o in manifest["objects"]] == names + [f"{n}@inner" for n in names]
    objects = load_object_set(tmp_path)
    assert len(objects) == 8 and objects.points.shape == (8, 64, 3)
    assert objects.families == ["mug", "mug", "ring", "ring"] * 2
    # Inner copies: each original scaled about its frame origin by one factor in inner_scale.
    assert objects.inner_of == [None] * 4 + [0, 1, 2, 3]
    for i in range(4):
        factor = objects.aabb[4 + i] / objects.aabb[i]
        assert 0.2 <= factor.min() and np.allclose(factor, factor.flat[0], rtol=1e-6) and factor.max() <= 0.5
        np.testing.assert_allclose(objects.vertices[4 + i], objects.vertices[i] * factor.flat[0], rtol=1e-6)
        np.testing.assert_allclose(objects.points[4 + i], objects.points[i] * factor.flat[0], rtol=1e-5)
        np.testing.assert_array_equal(objects.normals[4 + i], objects.normals[i])
    # Interrupted run: one object file lost. Resuming rebuilds exactly that file, byte for byte.
    lost = tmp_path / "objects" / "ring_000.npz"
    before = lost.read_bytes()
    untouched = (tmp_path / "objects" / "mug_000.npz").stat().st_mtime_ns
    lost.unlink()
    assert build_object_set(spec, tmp_path, progress=False) == manifest
    assert lost.read_bytes() == before
    assert (tmp_path / "objects" / "mug_000.npz").stat().st_mtime_ns == untouched


def test_a_finished_set_refuses_other_objects_rather_than_shifting_ids(tmp_path):
    """A complete set rebuilt with other objects (e.g. the default families changed) is a named
    error: appending them would move the inner copies' ids under the shards that use them."""
    spec = ObjectSetSpec(families=["mug"], objects_per_family=1, num_points=32)
    manifest = build_object_set(spec, tmp_path, progress=False)
    assert build_object_set(spec, tmp_path, progress=False) == manifest  # the same objects: fine
    with pytest.raises(ValueError, match=r"other objects \(to add: \['ring_000'\]"):
        build_object_set(ObjectSetSpec(families=["mug", "ring"], objects_per_family=1, num_points=32), tmp_path,
                         progress=False)
    assert json.loads((tmp_path / "manifest.json").read_text()) == json.loads(json.dumps(manifest))  # left as it was


def test_a_set_built_with_another_cloud_size_is_refused_not_reused(tmp_path):
    """The default cloud size changed (1,500 -> 3,000): a finished set, or an interrupted one's
    object files, sampled at another K is a named error rather than clouds of the wrong size."""
    spec = ObjectSetSpec(families=["mug"], objects_per_family=1, num_points=32)
    build_object_set(spec, tmp_path / "finished", progress=False)
    with pytest.raises(ValueError, match=r"other settings \(num_points 32 -> 64\)"):
        build_object_set(ObjectSetSpec(families=["mug"], objects_per_family=1, num_points=64), tmp_path / "finished",
                         progress=False)
    build_object_set(spec, tmp_path / "interrupted", progress=False)
    (tmp_path / "interrupted" / "manifest.json").unlink()
    with pytest.raises(ValueError, match="mug_000.npz holds 32 points, the spec asks num_points 64"):
        build_object_set(ObjectSetSpec(families=["mug"], objects_per_family=1, num_points=64),
                         tmp_path / "interrupted", progress=False)


def test_a_set_without_families_holds_the_default_ones_only(tmp_path):
    # Every data config leaves `families` out: the wider families must not change its objects.
    spec = ObjectSetSpec(objects_per_family=1, num_points=16, inner_scale=None)
    build_object_set(spec, tmp_path, progress=False)
    assert load_object_set(tmp_path).families == list(DEFAULT_FAMILIES)


def test_mesh_folder_source_via_cli(tmp_path):
    folder = tmp_path / "meshes"
    folder.mkdir()
    trimesh.creation.annulus(0.03, 0.05, 0.02).export(folder / "washer.stl")
    main(["--out", str(tmp_path / "set"), "--mesh-folder", str(folder), "--num-points", "32", "--scale", "2"])
    objects = load_object_set(tmp_path / "set")
    assert objects.names == ["washer", "washer@inner"]
    np.testing.assert_allclose(np.ptp(objects.vertices[0], axis=0).max(), 0.2, atol=1e-6)
    assert json.loads((tmp_path / "set" / "manifest.json").read_text())["spec"]["scale"] == 2.0


def test_bad_specs(tmp_path):
    with pytest.raises(ValueError, match="families: unknown"):
        build_object_set(ObjectSetSpec(families=["teapot"]), tmp_path, progress=False)
    with pytest.raises(ValueError, match="num_points"):
        build_object_set(ObjectSetSpec(num_points=0), tmp_path, progress=False)
    with pytest.raises(ValueError, match="inner_scale"):
        build_object_set(ObjectSetSpec(inner_scale=(0.5, 0.2)), tmp_path, progress=False)
    with pytest.raises(FileNotFoundError, match="manifest.json"):
        load_object_set(tmp_path / "missing")


def test_a_build_waits_for_the_one_under_way(tmp_path):
    """Many generation jobs start together: while one holds the set's folder lock, another build
    writes nothing, then finishes the same set once the lock is free."""
    spec = ObjectSetSpec(families=["ring"], objects_per_family=1, num_points=32)
    results = []
    with folder_lock(tmp_path):
        waiting = threading.Thread(target=lambda: results.append(build_object_set(spec, tmp_path, progress=False)))
        waiting.start()
        waiting.join(timeout=3.0)  # a ring takes well under a second unblocked
        assert waiting.is_alive() and not (tmp_path / "objects").exists()
    waiting.join()
    assert [o["name"] for o in results[0]["objects"]] == ["ring_000", "ring_000@inner"]

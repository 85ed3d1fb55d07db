"""Cached partial views: each view is the documented pure function of (settings, name, view),
builds resume and are deterministic, loading is lazy and errors are clear."""

import json

import numpy as np
import pytest

from contactnet.data.objects import ObjectSetSpec, build_object_set, load_object_set
from contactnet.data.partial_views import build_partial_views, load_partial_views
from contactnet.data.seeds import derive_seed
from contactnet.geometry.depth_views import partial_cloud


@pytest.fixture
def object_set(tmp_path):
    build_object_set(ObjectSetSpec(families=["bowl", "l_bracket"], objects_per_family=1, num_points=64, inner_scale=None),
                     tmp_path / "objects", progress=False)
    return tmp_path / "objects"


def test_views_are_the_seeded_partial_clouds_and_builds_resume(object_set, tmp_path):
    build_partial_views(object_set, views_per_object=3, seed=7, progress=False)
    objects = load_object_set(object_set)
    views = objects.partial_views(build_missing=False)
    assert views.points.shape == views.normals.shape == (2, 3, 64, 3) and views.eyes.shape == (2, 3, 3)
    for i, name in enumerate(objects.names):
        for v in range(3):
            points, normals = partial_cloud(objects.vertices[i], objects.faces[i], 64, derive_seed(7, name, v))
            np.testing.assert_array_equal(views.points[i, v], points)
            np.testing.assert_array_equal(views.normals[i, v], normals)
    assert views.points.std(1).max() > 0  # views differ
    # Resuming skips finished files; a lost file comes back identical.
    first = object_set / "partial" / f"{objects.names[0]}.npz"
    second = object_set / "partial" / f"{objects.names[1]}.npz"
    stamp = first.stat().st_mtime_ns
    second.unlink()
    build_partial_views(object_set, views_per_object=3, seed=7, progress=False)
    assert first.stat().st_mtime_ns == stamp
    np.testing.assert_array_equal(load_partial_views(object_set).points, views.points)
    with pytest.raises(ValueError, match="records other settings"):
        build_partial_views(object_set, views_per_object=4, seed=7, progress=False)


def test_missing_views_are_an_error_or_built_once(object_set):
    objects = load_object_set(object_set)
    assert objects._partial_views is None  # nothing read until asked for
    with pytest.raises(FileNotFoundError, match="python -m contactnet.data.partial_views --objects"):
        objects.partial_views(build_missing=False)
    views = objects.partial_views()
    assert views.points.shape == (2, 8, 64, 3)
    assert json.loads((object_set / "partial" / "manifest.json").read_text())["views_per_object"] == 8
    assert objects.partial_views() is views


def test_views_of_another_object_set_are_refused(object_set):
    build_partial_views(object_set, views_per_object=1, progress=False)
    manifest = json.loads((object_set / "manifest.json").read_text())
    manifest["spec"]["seed"] = 1  # the set was rebuilt from another seed after its views were rendered
    (object_set / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="another object set"):
        load_partial_views(object_set)

"""Procedural families: watertight, really non-convex, sized and triangulated as specified,
deterministic per seed."""

import numpy as np
import pytest
import trimesh

from contactnet.data.procedural import DEFAULT_FAMILIES, FAMILIES, SIZE_RANGE_M, TRIANGLE_RANGE, make_object


def test_at_least_twelve_default_families_all_built_in():
    assert len(DEFAULT_FAMILIES) >= 12 and set(DEFAULT_FAMILIES) < set(FAMILIES)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_family_objects_are_valid_non_convex_solids(family):
    for seed in (0, 1):
        vertices, faces = make_object(family, seed)
        mesh = trimesh.Trimesh(vertices, faces, process=False)
        assert mesh.is_watertight and mesh.volume > 0
        extent = np.ptp(vertices, axis=0).max()
        assert SIZE_RANGE_M[0] - 1e-9 <= extent <= SIZE_RANGE_M[1] + 1e-9
        assert TRIANGLE_RANGE[0] <= len(faces) <= TRIANGLE_RANGE[1]
        # Centred on the AABB centre (the object frame).
        np.testing.assert_allclose(vertices.min(0) + vertices.max(0), 0, atol=1e-9)
        if family in DEFAULT_FAMILIES and family != "thin":
            # A real concavity: the solid fills clearly less than its convex hull.
            assert mesh.volume / mesh.convex_hull.volume < 0.97, family
        else:
            # The wider families and `thin` include convex shapes (boxy superquadrics, plates,
            # sticks), but each object is one piece: no hole or pocket cuts it apart.
            assert len(mesh.split(only_watertight=False)) == 1, family


def test_objects_are_deterministic_per_seed():
    a = make_object("mug", 5)
    b = make_object("mug", 5)
    c = make_object("mug", 6)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    assert a[0].shape != c[0].shape or not np.array_equal(a[0], c[0])


def test_unknown_family_is_a_clear_error():
    with pytest.raises(ValueError, match="family: unknown family 'teapot'"):
        make_object("teapot", 0)


def test_thin_objects_are_flat_slender_or_thin_walled():
    """The `thin` family is what the others never are: a box side 1:15 or less of the longest
    (sheets, plates, blades, washers, sticks), or a thin wall filling under a fifth of its box."""
    for seed in range(12):
        vertices, faces = make_object("thin", seed)
        extent = np.ptp(vertices, axis=0)
        fill = trimesh.Trimesh(vertices, faces, process=False).volume / np.prod(extent)
        assert extent.min() / extent.max() <= 1 / 15 or fill <= 0.2, seed

"""Even surface sampling: points on the surface, unit face normals, even spread, determinism."""

import numpy as np
import pytest
import torch

import contactnet.ops as ops
from contactnet.data.procedural import make_object
from contactnet.geometry.sampling import sample_surface_even


def _distance_to_mesh(points, vertices, faces):
    tris = torch.as_tensor(vertices[faces])
    p = torch.as_tensor(points, dtype=torch.float64)
    n, f = len(p), len(tris)
    d = ops.point_triangle_distance(p.repeat_interleave(f, 0), tris.repeat(n, 1, 1)).distance
    return d.view(n, f).min(1).values.numpy()


def test_points_lie_on_the_surface_with_face_normals():
    vertices, faces = make_object("cup", 0)
    points, normals, face_ids = sample_surface_even(vertices, faces, 300, seed=0)
    assert points.shape == (300, 3) and normals.shape == (300, 3)
    assert _distance_to_mesh(points, vertices, faces).max() < 1e-9
    np.testing.assert_allclose(np.linalg.norm(normals, axis=1), 1, atol=1e-9)
    # Each point lies in the plane of the face whose normal it carries.
    v0 = vertices[faces[face_ids, 0]]
    assert np.abs(((points - v0) * normals).sum(1)).max() < 1e-9


def test_coverage_is_even_compared_with_uniform_random():
    vertices, faces = make_object("bowl", 1)
    even, _, _ = sample_surface_even(vertices, faces, 500, seed=0)
    uniform, _, _ = sample_surface_even(vertices, faces, 500, seed=0, oversample=1)
    def nearest_neighbour(p):
        d = np.linalg.norm(p[:, None] - p[None], axis=-1)
        np.fill_diagonal(d, np.inf)
        return d.min(1)
    # Farthest-point thinning keeps points apart: the closest pair is far less close.
    assert nearest_neighbour(even).min() > 3 * nearest_neighbour(uniform).min()


def test_sampling_is_deterministic_per_seed():
    vertices, faces = make_object("ring", 0)
    a = sample_surface_even(vertices, faces, 200, seed=3)[0]
    b = sample_surface_even(vertices, faces, 200, seed=3)[0]
    c = sample_surface_even(vertices, faces, 200, seed=4)[0]
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_bad_arguments():
    vertices, faces = make_object("ring", 0)
    with pytest.raises(ValueError, match="count"):
        sample_surface_even(vertices, faces, 0, seed=0)
    with pytest.raises(ValueError, match="no surface area"):
        sample_surface_even(np.zeros((3, 3)), np.array([[0, 1, 2]]), 10, seed=0)

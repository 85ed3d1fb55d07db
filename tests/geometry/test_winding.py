"""The point-cloud winding number against the exact mesh one (clear of the surface), on a closed
sphere, under scale and uneven density, broadcasting, and its input errors."""

import numpy as np
import pytest
import torch

from contactnet.data.procedural import make_object
from contactnet.geometry.mesh import Mesh, MeshLibrary
from contactnet.geometry.sampling import sample_surface_even
from contactnet.geometry.winding import dipole_winding, surface_dipoles
from contactnet.ops.point_mesh import point_mesh_distance


def _winding(points, normals, queries, **dipoles):
    """Winding numbers of queries w.r.t. a cloud, its dipoles made on the spot."""
    return dipole_winding(surface_dipoles(points, normals, **dipoles), queries)


def _sphere(count: int, radius: float = 1.0):
    """Fibonacci points on a sphere with their outward normals, (1, count, 3) each."""
    i = torch.arange(count, dtype=torch.float64) + 0.5
    z = 1 - 2 * i / count
    phi = i * np.pi * (3 - 5**0.5)
    n = torch.stack([(1 - z * z).sqrt() * phi.cos(), (1 - z * z).sqrt() * phi.sin(), z], -1)[None]
    return radius * n, n


@pytest.mark.parametrize("scale", [1e-3, 1.0, 1e3])
def test_a_sphere_wraps_its_inside_once_and_its_outside_never(scale):
    points, normals = _sphere(1500, scale)
    queries = torch.tensor([[0.0, 0, 0], [0.3, 0.2, -0.1], [0, 0, 0.6], [1.6, 0, 0], [0, -3, 0], [2, 2, 2]])[None]
    w = _winding(points, normals, scale * queries.double())[0]
    # Patch areas from neighbour spacing are within about 15%: 1 inside to that, 0 outside to
    # sampling noise. The scale cancels.
    assert ((w[:3] - 1).abs() < 0.2).all() and (w[3:].abs() < 0.05).all(), w
    torch.testing.assert_close(w, _winding(*_sphere(1500), queries.double())[0])


def test_uneven_density_keeps_the_inside_at_one():
    # A view's near side is sampled far more densely than its flanks: the patch areas follow.
    points, normals = _sphere(6000)
    keep = (points[0, :, 2] > 0) | (torch.arange(6000) % 6 == 0)  # the upper half six times as dense
    points, normals = points[:, keep], normals[:, keep]
    w = _winding(points, normals, torch.tensor([[[0.0, 0, 0.3], [0, 0, -0.3], [0, 0, 2]]]).double(),
                            samples=points.shape[1])
    assert ((w[0, :2] - 1).abs() < 0.2).all() and w[0, 2].abs() < 0.03, w
    # One area for every point would weigh the dense half six times over.
    assert (w[0, 0] - w[0, 1]).abs() < 0.1, w


@pytest.mark.parametrize("family", ["mug", "ring", "u_bracket", "gear_prism", "drilled_block", "egad_like"])
def test_agrees_with_the_meshs_exact_inside_clear_of_the_surface(family):
    vertices, faces = make_object(family, 3)
    points, normals, _ = sample_surface_even(vertices, faces, 1500, seed=0)
    rng = np.random.default_rng(0)
    lo, hi = vertices.min(0), vertices.max(0)
    queries = torch.as_tensor(rng.uniform(lo, hi, (2000, 3)))
    exact = point_mesh_distance(MeshLibrary([Mesh(vertices, faces)], dtype=torch.float64),
                                torch.zeros(2000, dtype=torch.int64), queries)
    w = _winding(torch.as_tensor(points)[None], torch.as_tensor(normals)[None], queries[None])[0]
    clear = exact.distance > 0.1 * np.linalg.norm(hi - lo)  # a few spacings of the 128 dipoles
    assert clear.sum() > 50
    assert torch.equal(w[clear] > 0.5, exact.inside[clear])


def test_dipoles_broadcast_over_leading_dimensions():
    """One object's dipoles against a batch of query sets, and two objects' against one set, equal
    the one-by-one answers: how a collision net reads them against many poses."""
    clouds = [_sphere(300, r) for r in (1.0, 0.5)]
    dipoles = torch.stack([surface_dipoles(p[0], n[0]) for p, n in clouds])  # (2, S, 7)
    queries = torch.randn(3, 5, 3, dtype=torch.float64)
    got = dipole_winding(dipoles[:, None], queries[None])  # (2, 3, 5)
    for i, (p, n) in enumerate(clouds):
        for j in range(3):
            torch.testing.assert_close(got[i, j], _winding(p, n, queries[j][None])[0])


def test_bad_inputs_name_the_argument():
    points, normals = _sphere(64)
    with pytest.raises(ValueError, match="points, normals"):
        _winding(points, normals[:, :10], points)
    with pytest.raises(ValueError, match="dipoles, queries"):
        _winding(points, normals, points[..., :2])
    with pytest.raises(ValueError, match="samples, neighbours"):
        _winding(points, normals, points, samples=0)

"""Point–mesh queries (BVH closest triangle + fast winding number) against the brute-force torch
reference, trimesh's point–triangle closest points, Coal's sphere–mesh distance and a ray-cast
containment oracle, on random and adversarial points; the cut-off, padding, gradients and bad
inputs."""

import numpy as np
import pytest
import torch

from contactnet.geometry import Mesh, MeshLibrary
from contactnet.geometry.triangles import closest_points_on_triangles
from contactnet.ops import point_mesh_distance, point_mesh_signed_distance
from contactnet.ops.point_mesh import mesh_face_triangles
from contactnet.ops.reference.point_mesh import point_mesh_reference
from tests.ops.mesh_cases import box_mesh, bumpy_sphere, random_soup

# Distance tolerance, relative to the mesh size plus the point's coordinates: the library's
# vertices and the points are rounded to the dtype (float32: a few 1e-8 of the coordinates; 1e3 m
# points are 6e-5 m apart), the closest-point arithmetic adds a few ulps.
RTOL = {torch.float64: 1e-12, torch.float32: 5e-7}
# The sign of a point closer to the surface than this (relative to the mesh size) is a coin flip
# (on a face, edge or vertex, or below the dtype's rounding): its winding number is not compared.
ON_SURFACE = {torch.float64: 1e-10, torch.float32: 1e-5}
# Voronoi-region tests cancel on the 1e-6 m thin "slivers" triangles (sharpest-angle sine 2e-5):
# the torch reference is off by ~1.3e-8 of the mesh size in float64 (Coal and the float64 kernel
# agree to 1e-12, test_matches_trimesh_coal_and_ray_containment); in float32 the kernel's
# point–triangle classification (common/distance.h) cannot resolve that sine (sine^2 is below
# float32's epsilon) and may answer from an edge: off by up to the sliver's thickness, 1e-5 of the
# size (trimesh's float64 closest_point is off by 2e-6 of it on the same vertices).
SLIVER_TOL = {torch.float64: 2e-8, torch.float32: 1.2e-5}


def _hemisphere(radius=0.05):
    """Open mesh: the upper half of an icosphere (its winding number is fractional everywhere)."""
    import trimesh

    s = trimesh.creation.icosphere(subdivisions=2, radius=radius)
    keep = s.triangles_center[:, 2] > 0
    return np.asarray(s.vertices), np.asarray(s.faces)[keep]


def _slivers():
    """A fan of near-degenerate triangles (sharpest-angle sines ~1e-5, kept by Mesh) and a fat one."""
    v = [[0, 0, 0], [0.1, 0, 0], [0.05, 1e-6, 0], [0.05, 0, 1e-6], [0.05, 0.05, 0.02]]
    return np.array(v, dtype=np.float64), np.array([[0, 1, 2], [0, 1, 3], [0, 1, 4]])


MESHES = {
    "bumpy": lambda: bumpy_sphere(2, 0.05, seed=1),  # 320 triangles, watertight, non-convex
    "soup": lambda: random_soup(60, seed=3),  # open soup
    "box": lambda: box_mesh((0.1, 0.06, 0.08)),  # 12 triangles, ties at every edge and vertex
    "tiny": lambda: box_mesh((2e-4, 1e-4, 3e-4)),  # a 0.1 mm box
    "one": lambda: (np.array([[0.0, 0, 0], [0.05, 0, 0], [0, 0.04, 0]]), np.array([[0, 1, 2]])),
    "hemisphere": _hemisphere,
    "slivers": _slivers,
}


def make_library(dtype=torch.float64):
    return MeshLibrary([Mesh(*build(), name=name) for name, build in MESHES.items()], dtype=dtype)


@pytest.fixture(scope="module")
def lib64():
    return make_library(torch.float64)


@pytest.fixture(scope="module")
def lib32():
    return make_library(torch.float32)


def _scale(lib, m) -> float:
    t = lib[m].triangles
    return float((t.reshape(-1, 3).max(0).values - t.reshape(-1, 3).min(0).values).max())


def adversarial_points(lib, m, seed=0) -> torch.Tensor:
    """(P, 3) float64 points of mesh m's frame: uniform around it, on its faces, at its vertices and
    edge midpoints, 1e-9 of its size off the faces on both sides, and 1e3 m away."""
    g = torch.Generator().manual_seed(seed)
    tris = lib[m].triangles
    s = _scale(lib, m)
    uniform = (torch.rand(300, 3, generator=g, dtype=torch.float64) - 0.5) * 2 * s
    w = torch.rand(tris.shape[0], 3, generator=g, dtype=torch.float64)
    w = w / w.sum(1, keepdim=True)
    on_face = (w[:, :, None] * tris).sum(1)
    n = torch.linalg.cross(tris[:, 1] - tris[:, 0], tris[:, 2] - tris[:, 0])
    n = n / n.norm(dim=1, keepdim=True)
    off = torch.cat([on_face + 1e-9 * s * n, on_face - 1e-9 * s * n])
    vertices = tris.reshape(-1, 3)
    edges = 0.5 * (tris + tris.roll(1, dims=1)).reshape(-1, 3)
    direction = torch.nn.functional.normalize(torch.randn(20, 3, generator=g, dtype=torch.float64), dim=1)
    far = 1e3 * direction
    return torch.cat([uniform, on_face, off, vertices, edges, far])


def _assert_within(got: torch.Tensor, expected: torch.Tensor, tol: torch.Tensor, what: str) -> None:
    err = (got.double() - expected.double()).abs()
    bad = ~(err <= tol)
    if bad.any():
        i = int((err - tol).argmax())
        raise AssertionError(f"{what}: {int(bad.sum())} of {err.numel()} off; worst at {i}: got "
                             f"{float(got[i])!r}, expected {float(expected[i])!r}, tolerance {float(tol[i]):.3g}")


def _query(lib, m, points, **kw):
    return point_mesh_distance(lib, torch.full((points.shape[0],), m), points.to(lib.dtype), **kw)


# ---- against brute force ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("name", list(MESHES))
def test_matches_brute_force(name, dtype, lib64, lib32):
    """Distance to the brute-force minimum over all faces; the reported face attains it; the
    winding number and inside flag of the exact (all-faces) winding number."""
    lib = lib64 if dtype == torch.float64 else lib32
    m = list(MESHES).index(name)
    points = adversarial_points(lib64, m).to(dtype)
    got = _query(lib, m, points)
    tris = lib[m].triangles.to(dtype)  # the library's own rounding of the vertices
    ref_d, _, ref_w = point_mesh_reference(points.double(), tris.double())
    scale = _scale(lib, m)
    sliver = SLIVER_TOL[dtype] if name == "slivers" else 0.0
    tol = RTOL[dtype] * (scale + points.double().abs().amax(1)) + sliver * scale
    _assert_within(got.distance, ref_d, tol, "distance")
    assert (got.tri >= 0).all() and (got.tri < tris.shape[0]).all()
    face = mesh_face_triangles(lib, torch.full_like(got.tri, m), got.tri).double()
    p64 = points.double()
    own = (p64 - closest_points_on_triangles(p64, face[:, 0], face[:, 1], face[:, 2])).norm(dim=1)
    _assert_within(own, ref_d, tol, "distance to the reported face")  # it is a closest one
    # Fast winding number: exact near the surface, first-order dipoles far away.
    signed = ref_d > (ON_SURFACE[dtype] + sliver) * scale
    torch.testing.assert_close(got.winding.double()[signed], ref_w[signed], atol=0.05, rtol=0)
    clear = signed & ((ref_w - 0.5).abs() > 0.05)
    assert torch.equal(got.inside[clear], (ref_w >= 0.5)[clear])
    assert torch.equal(got.inside, got.winding >= 0.5)


def _coal_distances(mesh: Mesh, points: np.ndarray) -> np.ndarray:
    coal = pytest.importorskip("coal")
    model = coal.BVHModelOBBRSS()
    model.beginModel(mesh.num_faces, mesh.num_vertices)
    model.addVertices(mesh.vertices.numpy())
    model.addTriangles(mesh.faces.numpy().astype(np.int32))
    model.endModel()
    point = coal.Sphere(0.0)
    out = []
    for p in points:
        res = coal.DistanceResult()
        out.append(coal.distance(model, coal.Transform3s(), point, coal.Transform3s(np.eye(3), p),
                                 coal.DistanceRequest(), res))  # fmt: skip
    return np.asarray(out)


def _trimesh_distances(mesh: Mesh, points: np.ndarray) -> np.ndarray:
    """Minimum over faces of trimesh's point–triangle closest point (trimesh.triangles)."""
    import trimesh

    tris = mesh.triangles.numpy()
    f = tris.shape[0]
    closest = trimesh.triangles.closest_point(np.repeat(tris[None], len(points), 0).reshape(-1, 3, 3),
                                              np.repeat(points, f, 0))  # fmt: skip
    return np.linalg.norm(closest - np.repeat(points, f, 0), axis=1).reshape(-1, f).min(1)


def _star_inside(mesh: Mesh, points: np.ndarray) -> np.ndarray:
    """Containment in a mesh star-shaped about its origin: p is inside iff the ray from the origin
    through p leaves the surface beyond p (Möller–Trumbore against every face)."""
    tris = mesh.triangles.numpy()
    a, e1, e2 = tris[:, 0], tris[:, 1] - tris[:, 0], tris[:, 2] - tris[:, 0]
    inside = []
    for p in points:
        d = p / np.linalg.norm(p)
        h = np.cross(d, e2)
        det = (e1 * h).sum(1)
        s = -a
        u = (s * h).sum(1) / det
        q = np.cross(s, e1)
        v = (q @ d) / det
        t = (q * e2).sum(1) / det
        hit = (u >= 0) & (v >= 0) & (u + v <= 1) & (t > 0)
        inside.append(np.linalg.norm(p) < t[hit].min())
    return np.asarray(inside)


def test_matches_trimesh_coal_and_ray_containment(lib64):
    """Independent oracles: trimesh's closest points and Coal's distance (watertight bumpy sphere,
    open soup), and containment by ray casting (the bumpy sphere is star-shaped)."""
    for name in ("bumpy", "soup"):
        m = list(MESHES).index(name)
        points = adversarial_points(lib64, m, seed=5)
        got = _query(lib64, m, points)
        mesh = lib64[m]
        np.testing.assert_allclose(got.distance.numpy(), _trimesh_distances(mesh, points.numpy()), atol=1e-12)
        np.testing.assert_allclose(got.distance.numpy(), _coal_distances(mesh, points.numpy()), atol=1e-9)
    m = list(MESHES).index("slivers")  # where the torch reference and trimesh cancel, Coal does not
    points = adversarial_points(lib64, m, seed=5)
    got = _query(lib64, m, points)
    np.testing.assert_allclose(got.distance.numpy(), _coal_distances(lib64[m], points.numpy()), atol=1e-12)
    m = list(MESHES).index("bumpy")
    g = torch.Generator().manual_seed(3)
    points = (torch.rand(400, 3, generator=g, dtype=torch.float64) - 0.5) * 0.14
    got = _query(lib64, m, points)
    expected = _star_inside(lib64[m], points.numpy())
    assert 50 < expected.sum() < 350
    assert np.array_equal(got.inside.numpy(), expected)


# ---- cut-off, padding, non-finite points -------------------------------------------------------------


def test_max_distance_cuts_off_outside_points_only(lib64):
    m = list(MESHES).index("bumpy")
    points = adversarial_points(lib64, m, seed=2)
    full = _query(lib64, m, points)
    bound = 0.01
    cut = _query(lib64, m, points, max_distance=bound)
    near = full.distance < bound
    assert near.any() and (~near & ~full.inside).any() and (full.inside & (full.distance > bound)).any()
    assert torch.equal(cut.distance[near], full.distance[near]) and torch.equal(cut.tri[near], full.tri[near])
    off = ~near & ~full.inside
    assert (cut.distance[off] == bound).all() and (cut.tri[off] == -1).all()
    deep = full.inside  # inside: always searched in full
    assert torch.equal(cut.distance[deep], full.distance[deep]) and torch.equal(cut.tri[deep], full.tri[deep])
    assert torch.equal(cut.winding, full.winding) and torch.equal(cut.inside, full.inside)
    # Per-query bounds, +inf allowed.
    per = torch.full((points.shape[0],), float("inf"), dtype=torch.float64)
    per[::2] = bound
    mixed = _query(lib64, m, points, max_distance=per)
    even = torch.arange(points.shape[0]) % 2 == 0
    assert torch.equal(mixed.distance[even], cut.distance[even])
    assert torch.equal(mixed.distance[~even], full.distance[~even])
    assert torch.equal(_query(lib64, m, points, max_distance=float("inf")).distance, full.distance)


def test_padding_and_non_finite_points(lib64):
    p = torch.tensor([[0.2, 0.0, 0.0], [0.2, 0.0, 0.0], [float("nan"), 0.0, 0.0], [0.0, float("inf"), 0.0]],
                     dtype=torch.float64)
    got = point_mesh_distance(lib64, torch.tensor([0, -1, 0, 1]), p)
    assert got.distance[0] > 0 and got.tri[0] >= 0
    assert got.distance[1] == float("inf") and got.tri[1] == -1 and got.winding[1] == 0 and not got.inside[1]
    assert got.distance[2:].isnan().all() and got.winding[2:].isnan().all()
    assert (got.tri[2:] == -1).all() and not got.inside[2:].any()
    signed = point_mesh_signed_distance(lib64, torch.tensor([0, -1]), p[:2])
    assert signed[0] == got.distance[0] and signed[1] == float("inf")


def test_zero_queries(lib64):
    got = point_mesh_distance(lib64, torch.zeros(0, dtype=torch.int64), torch.zeros(0, 3, dtype=torch.float64))
    assert got.distance.shape == (0,) and got.tri.shape == (0,) and got.inside.dtype == torch.bool


# ---- boundary conversions ------------------------------------------------------------------------------


def test_int32_faces_ids_and_float32_points_at_the_boundary(lib64):
    """Faces given as int32 build the same library; int32 ids and float32 points are cast once."""
    v, f = bumpy_sphere(2, 0.05, seed=1)
    lib_i32 = MeshLibrary([Mesh(v, f.astype(np.int32))], dtype=torch.float64)
    points = adversarial_points(lib64, 0, seed=9)
    ref = _query(lib64, 0, points)
    got = point_mesh_distance(lib_i32, torch.zeros(points.shape[0], dtype=torch.int32), points)
    assert torch.equal(got.distance, ref.distance) and torch.equal(got.tri, ref.tri)
    p32 = points.float()
    cast = point_mesh_distance(lib64, [0] * points.shape[0], p32)
    assert cast.distance.dtype == torch.float64
    assert torch.equal(cast.distance, _query(lib64, 0, p32.double()).distance)


def test_well_formed_inputs_are_not_copied_nor_read_on_the_cpu(lib64):
    """int64 ids, points of the library's dtype and a (Q,) bound reach the op as they are; the
    values are checked in C++ (ids, bounds) in the pass that reads them."""
    from tests.ops.test_checks import _COPIES, _HOST_READS, Seen

    points = adversarial_points(lib64, 0)[:64].contiguous()
    ids, bound = torch.zeros(64, dtype=torch.int64), torch.full((64,), 0.01, dtype=torch.float64)
    lib64.bvh  # built outside the recording
    with Seen() as seen:
        point_mesh_distance(lib64, ids, points, bound)
        point_mesh_distance(lib64, ids, points)
    assert not _COPIES & set(seen.ops) and not _HOST_READS & set(seen.ops), set(seen.ops)


def test_batch_of_several_meshes_equals_single_queries(lib64):
    g = torch.Generator().manual_seed(4)
    ids = torch.randint(len(lib64), (200,), generator=g)
    points = (torch.rand(200, 3, generator=g, dtype=torch.float64) - 0.5) * 0.15
    batch = point_mesh_distance(lib64, ids, points)
    for k in range(0, 200, 13):
        one = point_mesh_distance(lib64, ids[k:k + 1], points[k:k + 1])
        assert one.distance[0] == batch.distance[k] and one.tri[0] == batch.tri[k]
        assert one.winding[0] == batch.winding[k]


# ---- gradients ---------------------------------------------------------------------------------------


def _off_face_points(lib, m, n, seed, lo=0.002, hi=0.006):
    """Points at signed offsets in +-[lo, hi] along the normals of face interiors (barycentric
    weights >= 0.2), kept where that face is the unique closest one by a margin: smooth points,
    away from the medial axis, on both sides of the surface."""
    g = torch.Generator().manual_seed(seed)
    tris = lib[m].triangles
    f = torch.randint(tris.shape[0], (4 * n,), generator=g)
    w = 0.2 + 0.4 * torch.rand(4 * n, 3, generator=g, dtype=torch.float64)
    w = w / w.sum(1, keepdim=True)
    t = tris[f]
    normal = torch.nn.functional.normalize(torch.linalg.cross(t[:, 1] - t[:, 0], t[:, 2] - t[:, 0]), dim=1)
    offset = (lo + (hi - lo) * torch.rand(4 * n, generator=g, dtype=torch.float64))
    offset = offset * torch.where(torch.rand(4 * n, generator=g) < 0.5, -1.0, 1.0).double()
    p = (w[:, :, None] * t).sum(1) + offset[:, None] * normal
    d, tri, _ = point_mesh_reference(p, tris)
    # unique: every other face is farther by 1e-4 m
    c = torch.stack([point_mesh_reference(p, tris[k:k + 1])[0] for k in range(tris.shape[0])], 1)
    c[torch.arange(p.shape[0]), tri] = float("inf")
    keep = (tri == f) & (c.min(1).values > d + 1e-4)
    return p[keep][:n]


def test_signed_distance_gradcheck_float64(lib64):
    m = list(MESHES).index("bumpy")
    p = _off_face_points(lib64, m, 24, seed=0)
    assert p.shape[0] >= 16
    ids = torch.full((p.shape[0],), m)
    signed = point_mesh_signed_distance(lib64, ids, p)
    assert (signed < 0).any() and (signed > 0).any()
    x = p.clone().requires_grad_(True)
    assert torch.autograd.gradcheck(lambda y: point_mesh_signed_distance(lib64, ids, y), (x,), eps=1e-7, atol=1e-6)
    # The gradient is the unit normal of the closest face, pointing away from the surface.
    point_mesh_signed_distance(lib64, ids, x).sum().backward()
    torch.testing.assert_close(x.grad.norm(dim=1), torch.ones(p.shape[0], dtype=torch.float64))


def test_signed_distance_value_and_float32_gradient(lib32, lib64):
    m = list(MESHES).index("bumpy")
    p = adversarial_points(lib64, m, seed=6)
    got = point_mesh_signed_distance(lib64, torch.full((p.shape[0],), m), p)
    plain = _query(lib64, m, p)
    torch.testing.assert_close(got, torch.where(plain.inside, -plain.distance, plain.distance), atol=1e-15, rtol=0)
    x = p[:300].float().requires_grad_(True)
    out = point_mesh_signed_distance(lib32, torch.full((300,), m), x)
    assert out.dtype == torch.float32
    out.sum().backward()
    assert x.grad.dtype == torch.float32 and torch.isfinite(x.grad).all()


# ---- bad inputs and registration -----------------------------------------------------------------------


def test_bad_inputs_raise_clear_errors(lib64):
    p = torch.zeros(2, 3, dtype=torch.float64)
    with pytest.raises(TypeError, match="lib: expected a contactnet.geometry.MeshLibrary"):
        point_mesh_distance("lib", [0, 0], p)
    with pytest.raises(TypeError, match="ids: expected an integer dtype"):
        point_mesh_distance(lib64, torch.zeros(2), p)
    with pytest.raises(ValueError, match=r"points: expected shape \(Q, 3\)"):
        point_mesh_distance(lib64, [0, 0], torch.zeros(2, 4, dtype=torch.float64))
    with pytest.raises(ValueError, match="points has batch size 2 but ids has 3"):
        point_mesh_distance(lib64, [0, 0, 0], p)
    with pytest.raises(TypeError, match="points: expected dtype float32 or float64"):
        point_mesh_distance(lib64, [0, 0], p.long())
    with pytest.raises(TypeError, match="points: expected a torch.Tensor"):
        point_mesh_distance(lib64, [0, 0], [[0, 0, 0], [0, 0, 0]])
    with pytest.raises(ValueError, match="max_distance: expected a finite number > 0"):
        point_mesh_distance(lib64, [0, 0], p, max_distance=0.0)
    with pytest.raises(ValueError, match=r"max_distance: expected a number or a \(Q,\)"):
        point_mesh_distance(lib64, [0, 0], p, max_distance=torch.ones(3))
    with pytest.raises(ValueError, match="max_distance: expected > 0"):  # values: C++ on the CPU
        point_mesh_distance(lib64, [0, 0], p, max_distance=torch.tensor([1.0, -1.0]))
    with pytest.raises(ValueError, match=r"ids: mesh ids must lie in \[0, 7\) \(or be -1 padding\)"):
        point_mesh_distance(lib64, [0, 7], p)
    with pytest.raises(ValueError, match="ids: mesh ids must lie in"):
        point_mesh_distance(lib64, [-2, 0], p)
    # Direct op calls are checked in C++ too.
    ops = torch.ops.contactnet
    with pytest.raises(RuntimeError, match="ids: expected int64"):
        ops.point_mesh_distance(*lib64.bvh, torch.zeros(2, dtype=torch.int32), p, torch.ones(2).double(), 0.5, 2.0)
    with pytest.raises(RuntimeError, match="points and tris must have the same dtype"):
        ops.point_mesh_distance(*lib64.bvh, torch.zeros(2, dtype=torch.int64), p.float(), torch.ones(2).double(),
                                0.5, 2.0)  # fmt: skip
    with pytest.raises(RuntimeError, match="max_distance: expected size 2"):
        ops.point_mesh_distance(*lib64.bvh, torch.zeros(2, dtype=torch.int64), p, torch.ones(3).double(), 0.5, 2.0)


def test_opcheck_and_compile(lib64):
    ops = torch.ops.contactnet
    p = adversarial_points(lib64, 0)[:50].contiguous()
    ids = torch.zeros(50, dtype=torch.int64)
    ids[::7] = -1
    bound = torch.full((50,), 0.02, dtype=torch.float64)
    tests = ("test_schema", "test_autograd_registration", "test_faketensor")
    torch.library.opcheck(ops.point_mesh_distance, (*lib64.bvh, ids, p, bound, 0.5, 2.0), test_utils=tests)
    compiled = torch.compile(lambda x: point_mesh_signed_distance(lib64, ids, x, bound), backend="eager",
                             fullgraph=True)  # fmt: skip
    torch.testing.assert_close(compiled(p), point_mesh_signed_distance(lib64, ids, p, bound))

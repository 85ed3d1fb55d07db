"""Certified separation of convex hulls (`hulls_separated`, GJK with hill-climbed supports) against
two independent references: strict separability of the posed vertex sets by linear programming
(scipy's HiGHS), and the exact distance and collision of the hulls as meshes (our BVH kernels);
plus hand-made touching, parallel, nested, flat, tiny and far-from-origin cases."""

import math

import numpy as np
import pytest
import torch
import trimesh
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog

from contactnet.geometry import ConvexHulls, Mesh, MeshLibrary, build_convex_hulls, transform_points
from contactnet.ops import mesh_collide, mesh_distance
from contactnet.ops.mesh_query import hulls_separated
from tests.ops.mesh_cases import box_mesh, bumpy_sphere, random_poses


def _strictly_separable(a: np.ndarray, b: np.ndarray) -> bool:
    """A plane n·x = c with n·a <= c - 1 and n·b >= c + 1: feasible iff the hulls are apart."""
    rows = np.concatenate([np.c_[a, -np.ones(len(a))], np.c_[-b, np.ones(len(b))]])
    res = linprog(np.zeros(4), A_ub=rows, b_ub=-np.ones(len(rows)), bounds=[(None, None)] * 4, method="highs")
    return res.status == 0


def _cloud_library(seed: int, scale: float):
    """Five random convex-hull sources: clouds of 4-40 points, stretched, of about `scale` metres."""
    rng = np.random.default_rng(seed)
    clouds = [rng.normal(size=(rng.integers(4, 40), 3)) * rng.uniform(0.2, 1.0, 3) * scale for _ in range(5)]
    meshes = []
    for c in clouds:
        h = trimesh.Trimesh(c).convex_hull
        meshes.append(Mesh(np.asarray(h.vertices), np.asarray(h.faces)))
    return clouds, MeshLibrary(meshes, dtype=torch.float64)


def _compare_with_references(seed: int, scale: float, offset: float) -> torch.Tensor:
    """hulls_separated on 48 random pairs, checked against both references; returns its answers."""
    clouds, lib = _cloud_library(seed, scale)
    n = 48
    g = torch.Generator().manual_seed(seed)
    ids_a, ids_b = torch.randint(5, (n,), generator=g), torch.randint(5, (n,), generator=g)
    poses_a = random_poses(n, 0.0, seed)
    poses_b = random_poses(n, 1.5 * scale, seed + 1)
    poses_a[:, :3] += offset
    poses_b[:, :3] += offset
    got = hulls_separated(lib, ids_a, ids_b, poses_a, poses_b, min_gap=0.0)
    distance = mesh_distance(lib, ids_a, ids_b, poses_a, poses_b).distance
    touching = mesh_collide(lib, ids_a, ids_b, poses_a, poses_b)
    clear = 1e-6 * scale  # farther than rounding can blur
    assert not (got & touching).any()
    assert got[~touching & (distance > clear)].all()
    for q in range(n):
        if touching[q] or distance[q] > clear:
            a = transform_points(poses_a[q], lib.hulls.hull_vertices(int(ids_a[q]))).numpy() - offset
            b = transform_points(poses_b[q], lib.hulls.hull_vertices(int(ids_b[q]))).numpy() - offset
            assert _strictly_separable(a, b) == bool(got[q]), q
    return got


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), scale=st.sampled_from([1e-3, 0.1, 10.0]),
       offset=st.sampled_from([0.0, 1e3]))
def test_matches_linear_programming_and_the_hulls_exact_distance(seed, scale, offset):
    _compare_with_references(seed, scale, offset)


def test_the_random_pairs_hold_both_answers():
    got = torch.cat([_compare_with_references(seed, 0.1, 0.0) for seed in range(3)])
    assert got.any() and (~got).any()


def _boxes(*extents):
    return MeshLibrary([Mesh(*box_mesh(e)) for e in extents], dtype=torch.float64)


def _at(x, y=0.0, z=0.0, quaternion=(1.0, 0.0, 0.0, 0.0)):
    return torch.tensor([[x, y, z, *quaternion]], dtype=torch.float64)


def test_face_to_face_boxes_by_gap_and_min_gap():
    lib = _boxes((1.0, 1.0, 1.0))
    for gap, min_gap, expected in [(0.0, 0.0, False), (-1e-9, 0.0, False), (1e-9, 1e-6, False), (1e-9, 0.0, True),
                                   (1e-5, 1e-6, True), (0.5, 0.49, True), (0.5, 0.51, False)]:
        for origin in (0.0, 1e3, -1e4):
            got = hulls_separated(lib, [0], [0], _at(origin), _at(origin + 1.0 + gap), min_gap=min_gap)
            assert bool(got) == expected, (gap, min_gap, origin)


def test_edge_to_edge_vertex_to_face_tiny_nested_and_identical():
    lib = _boxes((1.0, 1.0, 1.0), (0.1, 0.1, 0.1), (1e-4, 1e-4, 1e-4))
    about_z = (math.cos(math.pi / 8), 0, 0, math.sin(math.pi / 8))  # 45° turns
    about_x = (math.cos(math.pi / 8), math.sin(math.pi / 8), 0, 0)
    # B turned 45° about z: its vertical edge points at A's face (reach sqrt(2)/2 from its centre).
    reach = 0.5 + math.sqrt(0.5)
    for gap, expected in [(1e-4, True), (-1e-4, False)]:
        assert bool(hulls_separated(lib, [0], [0], _at(0.0), _at(reach + gap, quaternion=about_z))) == expected
    # Edge against edge: A turned about x, B about z, B beside A along y: the edges cross.
    both = 2 * math.sqrt(0.5)
    for gap, expected in [(1e-4, True), (-1e-4, False)]:
        got = hulls_separated(lib, [0], [0], _at(0.0, quaternion=about_x), _at(0.0, both + gap, quaternion=about_z))
        assert bool(got) == expected, gap
    # A corner of B against A's face: B turned so its corner (1, 1, 1)/2 points along -x.
    a, b = torch.tensor([1.0, 1.0, 1.0]) / math.sqrt(3), torch.tensor([-1.0, 0.0, 0.0])
    q = torch.cat([(1 + a @ b)[None], torch.linalg.cross(a, b)])
    corner = tuple((q / q.norm()).tolist())
    reach = 0.5 + math.sqrt(3) / 2
    for gap, expected in [(1e-4, True), (-1e-4, False)]:
        assert bool(hulls_separated(lib, [0], [0], _at(0.0), _at(reach + gap, quaternion=corner))) == expected, gap
    # Tiny boxes (0.1 mm) 10 µm apart, far from the origin; a small box inside a big one; the same pose.
    assert bool(hulls_separated(lib, [2], [2], _at(5.0), _at(5.0 + 1e-4 + 1e-5), min_gap=1e-7))
    assert not bool(hulls_separated(lib, [2], [2], _at(5.0), _at(5.0 + 1e-4 - 1e-6), min_gap=0.0))
    assert not bool(hulls_separated(lib, [0], [1], _at(0.0), _at(0.2)))
    assert not bool(hulls_separated(lib, [1], [1], _at(0.3), _at(0.3)))


def test_a_flat_mesh_is_certified_apart_only_where_clearly_apart():
    """A table top as one quad (no volume): hulled from joggled input, so a box well above it is
    certified apart, a box resting on it or crossing it is not; a mesh of 3 vertices has no hull."""
    square = (np.array([[-1, -1, 0], [1, -1, 0], [1, 1, 0], [-1, 1, 0]], dtype=float), np.array([[0, 1, 2], [0, 2, 3]]))
    triangle = (square[0][:3], square[1][:1])
    lib = MeshLibrary([Mesh(*square), Mesh(*box_mesh((0.2, 0.2, 0.2))), Mesh(*triangle)], dtype=torch.float64)
    assert len(lib.hulls.hull_vertices(0)) == 4 and len(lib.hulls.hull_vertices(2)) == 0
    heights = torch.tensor([0.1 + 1e-4, 0.1, 0.0, -0.1 - 1e-4, 2.0])  # box centre above the quad
    poses = torch.zeros(5, 7, dtype=torch.float64)
    poses[:, 2], poses[:, 3] = heights, 1.0
    table = _at(0.0).expand(5, 7)
    assert hulls_separated(lib, [0] * 5, [1] * 5, table, poses).tolist() == [True, False, False, True, True]
    assert not hulls_separated(lib, [2, 1], [1, 2], table[:2], poses[[4, 4]]).any()


def test_hull_vertices_are_mesh_vertices_that_bound_the_mesh_and_the_graph_is_symmetric():
    v, f = bumpy_sphere(3, seed=2)
    hulls = build_convex_hulls([v, torch.as_tensor(v * 2)])
    assert isinstance(hulls, ConvexHulls) and len(hulls) == 2
    h = hulls.hull_vertices(0).numpy()
    assert {tuple(p) for p in h} <= {tuple(p) for p in v}
    from scipy.spatial import ConvexHull

    planes = ConvexHull(h).equations  # outward normals: n·x + c <= 0 inside
    assert (v @ planes[:, :3].T + planes[:, 3]).max() <= 1e-12
    off, nb = hulls.neighbour_offsets, hulls.neighbours
    n0 = len(h)
    edges = {(i, int(j)) for i in range(n0) for j in nb[off[i]:off[i + 1]]}
    assert all((j, i) in edges for i, j in edges) and all(i != j for i, j in edges)
    assert min(int(off[i + 1] - off[i]) for i in range(n0)) >= 3


def test_library_hulls_are_cached_and_move_along():
    lib = MeshLibrary([Mesh(*box_mesh())])
    before = lib.memory_bytes()
    hulls = lib.hulls
    assert lib.hulls is hulls and hulls.vertices.dtype == torch.float64
    assert lib.memory_bytes() > before
    moved = lib.to(dtype=torch.float64)
    assert moved.hulls.vertices.data_ptr() == hulls.vertices.data_ptr()


def test_accepts_numpy_int32_and_float32_and_raises_clear_errors():
    lib = _boxes((1.0, 1.0, 1.0), (0.5, 0.5, 0.5))
    pa, pb = _at(0.0).expand(2, 7), _at(3.0).expand(2, 7)
    want = hulls_separated(lib, torch.tensor([0, 1]), torch.tensor([1, 0]), pa, pb)
    got = hulls_separated(lib.hulls, np.array([0, 1], dtype=np.int32), [1, 0], pa.numpy().astype(np.float32),
                          pb.float())
    assert want.all() and torch.equal(got, want)
    with pytest.raises(TypeError, match="hulls: expected ConvexHulls or a MeshLibrary"):
        hulls_separated("boxes", [0], [0], _at(0.0), _at(1.0))
    with pytest.raises(ValueError, match=r"ids_b: (mesh ids|indices) must lie in \[0, 2\)"):
        hulls_separated(lib, [0], [2], _at(0.0), _at(1.0))
    with pytest.raises(ValueError, match="ids_b has batch size 2 but ids_a has 1"):
        hulls_separated(lib, [0], [0, 1], _at(0.0), _at(1.0))
    with pytest.raises(ValueError, match="poses_b"):
        hulls_separated(lib, [0], [0], _at(0.0), _at(math.nan))
    with pytest.raises(ValueError, match="min_gap"):
        hulls_separated(lib, [0], [0], _at(0.0), _at(3.0), min_gap=-1.0)
    with pytest.raises(ValueError, match="max_iterations"):
        hulls_separated(lib, [0], [0], _at(0.0), _at(3.0), max_iterations=0)
    with pytest.raises(ValueError, match="vertex_sets: item 0 has NaN"):
        build_convex_hulls([np.full((4, 3), math.nan)])
    none = torch.zeros(0, dtype=torch.int64)
    assert hulls_separated(lib, none, none, torch.zeros(0, 7), torch.zeros(0, 7)).shape == (0,)


def test_opcheck():
    lib = _boxes((1.0, 1.0, 1.0), (0.5, 0.5, 0.5))
    poses = torch.cat([_at(0.0), _at(0.6), _at(3.0)])
    args = (*lib.hulls, torch.tensor([0, 1, 0]), torch.tensor([1, 0, 1]), poses, poses.flip(0), 1e-6, 64)
    torch.library.opcheck(torch.ops.contactnet.hulls_separated, args)

"""Mesh queries (BVH distance, collision, BLEM contacts, clustering) against brute force,
python-fcl, Coal, trimesh containment, Klampt, and hand-computed contacts."""

import math

import numpy as np
import pytest
import torch

from contactnet.geometry import Mesh, MeshLibrary, transform_points
from contactnet.ops import blem_contacts, cluster_contacts, mesh_collide, mesh_distance
from tests.ops.mesh_cases import (
    box_mesh,
    bumpy_sphere,
    near_contact_poses,
    random_poses,
    random_soup,
    subdivided_box,
)
from contactnet.ops.reference.mesh_contacts import (
    blem_contacts_reference,
    mesh_distance_reference,
    world_triangles,
)

IDENTITY = [0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0]


def make_library(dtype=torch.float64, device="cpu"):
    meshes = [
        Mesh(*bumpy_sphere(2, 0.05, seed=1), name="bumpy0"),  # 320 triangles, watertight
        Mesh(*bumpy_sphere(1, 0.04, seed=2), name="bumpy1"),  # 80
        Mesh(*random_soup(60, seed=3), name="soup"),  # open soup
        Mesh(*box_mesh((0.1, 0.1, 0.1)), name="box"),
        Mesh(*bumpy_sphere(1, 0.015, seed=4), name="small"),  # fits inside bumpy0
    ]
    return MeshLibrary(meshes, dtype=dtype, device=device)


@pytest.fixture(scope="module")
def lib64():
    return make_library(torch.float64)


def world(lib, i, pose):
    m = lib[i]
    return world_triangles(m.vertices, m.faces, pose.double())


def pair_poses(case: str, seed: int):
    """Pose of B (A at a random pose) for a named proximity case."""
    pa = random_poses(1, 0.02, seed=seed)[0]
    pb = random_poses(1, 0.0, seed=seed + 100)[0]
    offset = {"touching": 0.085, "interpenetrating": 0.06, "nested": 0.0, "far": 0.5}[case]
    direction = torch.nn.functional.normalize(torch.randn(3, generator=torch.Generator().manual_seed(seed), dtype=torch.float64), dim=0)  # noqa: E501
    pb[:3] = pa[:3] + offset * direction
    return pa, pb


# ---- BVH vs brute force ------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_bvh_layout(dtype):
    lib = make_library(dtype)
    bvh = lib.bvh
    for m in range(len(lib)):
        f0, f1 = (int(x) for x in bvh.face_offsets[m : m + 2])
        ids = bvh.tri_ids[f0:f1].long().sort().values
        assert torch.equal(ids, torch.arange(f1 - f0)), "every face exactly once"
        mesh = lib[m]
        assert torch.allclose(bvh.tris[f0:f1].double(), mesh.triangles[bvh.tri_ids[f0:f1].long()])
        n0, n1 = (int(x) for x in bvh.node_offsets[m : m + 2])
        obbs, links = bvh.obbs[n0:n1].double(), bvh.links[n0:n1]
        assert bvh.nodes.dtype == torch.int32 and bvh.nodes.shape[1] == 16, "64-byte node records"

        def subtree(n):  # (first, end) triangle rows of node n's subtree (pre-order layout)
            link = int(links[n])
            if link < 0:
                first, count = bvh.leaf_range(link)
                assert 1 <= count <= 4  # kBvhLeafSize
                return first, first + count
            assert link > n + 1, "left child is the next row, right child after its subtree"
            left, right = subtree(n + 1), subtree(link)
            assert left[1] == right[0], "children cover adjacent triangle rows"
            return left[0], right[1]

        assert subtree(0) == (0, f1 - f0), "the root covers the mesh"
        for n in range(n1 - n0):
            axes, centre, half = obbs[n, :3], obbs[n, 3], obbs[n, 4]
            # float32 axes: orthonormal to well within the 1e-5 relative slack of csrc/common/box.h
            torch.testing.assert_close(axes @ axes.T, torch.eye(3, dtype=axes.dtype), atol=1e-6, rtol=0)
            assert float(torch.linalg.det(axes)) > 0, "right-handed"
            first, end = subtree(n)
            t = bvh.tris[f0 + first : f0 + end].reshape(-1, 3).double()
            local = (t - centre) @ axes.T  # coordinates along the box axes, as stored
            assert (local.abs() <= half).all(), "the node's box holds its subtree's triangles"


@pytest.mark.parametrize("case", ["touching", "interpenetrating", "nested", "far"])
@pytest.mark.parametrize("pair", [(0, 1), (0, 2), (2, 2), (0, 4)])
def test_contacts_equal_brute_force(lib64, case, pair):
    """BVH contact set == all-pairs set (order-free), with the same geometry per contact."""
    ia, ib = pair
    for seed in range(2):
        pa, pb = pair_poses(case, seed)
        ra, rb = 0.004, 0.006
        got = blem_contacts(lib64, [ia], [ib], pa[None], pb[None], ra, rb)
        ref = blem_contacts_reference(world(lib64, ia, pa), world(lib64, ib, pb), ra, rb)
        got_pairs = set(zip(got.tri_a.tolist(), got.tri_b.tolist()))
        ref_pairs = set(zip(ref["tri_a"].tolist(), ref["tri_b"].tolist()))
        assert got_pairs == ref_pairs
        assert len(got_pairs) == got.tri_a.shape[0], "no duplicates"
        if not ref_pairs:
            continue
        order_g = (got.tri_a * 100000 + got.tri_b).argsort()
        order_r = (ref["tri_a"] * 100000 + ref["tri_b"]).argsort()
        torch.testing.assert_close(got.distances[order_g], ref["distance"][order_r], atol=1e-10, rtol=0)
        torch.testing.assert_close(got.depths[order_g], ref["depth"][order_r], atol=1e-10, rtol=0)
        assert torch.equal(got.intersecting[order_g], ref["intersecting"][order_r])
        sep = ~ref["intersecting"][order_r]
        torch.testing.assert_close(got.normals[order_g][sep], ref["normal"][order_r][sep], atol=1e-7, rtol=0)
        torch.testing.assert_close(got.points[order_g][sep], ref["point"][order_r][sep], atol=1e-8, rtol=0)
        assert torch.allclose(got.normals.norm(dim=1), torch.ones(()).double())


@pytest.mark.parametrize("case", ["touching", "interpenetrating", "nested", "far"])
def test_distance_equals_brute_force(lib64, case):
    for pair in [(0, 1), (0, 2), (2, 3), (0, 4)]:
        pa, pb = pair_poses(case, 7)
        got = mesh_distance(lib64, [pair[0]], [pair[1]], pa[None], pb[None])
        d, xa, xb, _, _ = mesh_distance_reference(world(lib64, pair[0], pa), world(lib64, pair[1], pb))
        assert abs(float(got.distance[0]) - d) < 1e-10
        assert abs(float((got.point_a[0] - got.point_b[0]).norm()) - d) < 1e-10
        # the reported triangles realise the distance
        ta = world(lib64, pair[0], pa)[got.tri_a[0]]
        tb = world(lib64, pair[1], pb)[got.tri_b[0]]
        from contactnet.ops.reference.mesh_contacts import triangle_pairs_closest

        assert abs(float(triangle_pairs_closest(ta[None], tb[None])[0][0]) - d) < 1e-10


def test_distance_upper_bound(lib64):
    pa, pb = pair_poses("far", 3)
    full = mesh_distance(lib64, [0], [1], pa[None], pb[None])
    capped = mesh_distance(lib64, [0], [1], pa[None], pb[None], upper_bound=0.05)
    assert float(full.distance[0]) > 0.05
    assert float(capped.distance[0]) == 0.05 and int(capped.tri_a[0]) == -1
    assert torch.isnan(capped.point_a).all()
    loose = mesh_distance(lib64, [0], [1], pa[None], pb[None], upper_bound=10.0)
    assert torch.equal(loose.distance, full.distance)


# ---- agreement with python-fcl and an independent containment test --------------------------


def _fcl_model(mesh):
    import fcl

    m = fcl.BVHModel()
    m.beginModel(mesh.num_vertices, mesh.num_faces)
    m.addSubModel(mesh.vertices.numpy(), mesh.faces.numpy().astype(np.int32))
    m.endModel()
    return m


def _fcl_tf(pose):
    import fcl

    p = pose.double().numpy()
    return fcl.Transform(p[3:], p[:3])


def test_distance_matches_fcl(lib64):
    import fcl

    ids = [0, 1, 3, 4]  # watertight
    models = {i: _fcl_model(lib64[i]) for i in ids}
    rng = np.random.default_rng(0)
    q = 60
    ia = rng.choice(ids, q)
    ib = rng.choice(ids, q)
    pa = random_poses(q, 0.05, seed=1)
    pb = random_poses(q, 0.05, seed=2)
    got = mesh_distance(lib64, torch.tensor(ia), torch.tensor(ib), pa, pb)
    checked = 0
    for k in range(q):
        oa = fcl.CollisionObject(models[ia[k]], _fcl_tf(pa[k]))
        ob = fcl.CollisionObject(models[ib[k]], _fcl_tf(pb[k]))
        res = fcl.DistanceResult()
        d = fcl.distance(oa, ob, fcl.DistanceRequest(enable_nearest_points=True), res)
        if fcl.collide(oa, ob, fcl.CollisionRequest(), fcl.CollisionResult()):
            assert float(got.distance[k]) == 0.0
            continue
        checked += 1
        assert abs(float(got.distance[k]) - d) < 1e-6, (k, float(got.distance[k]), d)
    assert checked > 20


def test_distance_large_meshes_near_contact_matches_fcl():
    """20k-triangle meshes 0.5 mm apart, where the best-first search's fixed heap spills pairs (which
    it finishes depth-first from its distance): still the exact minimum."""
    import fcl

    from tests.ops.mesh_cases import near_contact_poses
    from contactnet.ops.reference.mesh_contacts import triangle_pairs_closest

    meshes = [Mesh(*bumpy_sphere(5, 0.05, seed=1), name="a"), Mesh(*bumpy_sphere(5, 0.05, seed=2), name="b")]
    lib = MeshLibrary(meshes, dtype=torch.float64)
    q = 4
    ia, ib = torch.zeros(q, dtype=torch.int64), torch.ones(q, dtype=torch.int64)
    pa, pb = near_contact_poses(lib, ia, ib, 0.0005, seed=5)
    got = mesh_distance(lib, ia, ib, pa, pb)
    models = [_fcl_model(m) for m in meshes]
    for k in range(q):
        oa = fcl.CollisionObject(models[0], _fcl_tf(pa[k]))
        ob = fcl.CollisionObject(models[1], _fcl_tf(pb[k]))
        d = fcl.distance(oa, ob, fcl.DistanceRequest(), fcl.DistanceResult())
        assert abs(float(got.distance[k]) - d) < 1e-12, (k, float(got.distance[k]), d)
        ta = world(lib, 0, pa[k])[got.tri_a[k]]
        tb = world(lib, 1, pb[k])[got.tri_b[k]]
        assert abs(float(triangle_pairs_closest(ta[None], tb[None])[0][0]) - float(got.distance[k])) < 1e-12


def test_distance_finds_one_bump_among_parallel_faces():
    """Two finely meshed boxes face to face 1 cm apart, one vertex of B's facing side moved 10 um
    towards A: thousands of node pairs with nearly tied bounds fill the best-first heap, which
    spills pairs to finish later; the exact minimum (gap - 10 um, at the bump) must still be
    found, wherever the bump is."""
    v, f = subdivided_box((0.1, 0.1, 0.1), 4)  # 3072 triangles
    v, f = np.asarray(v, dtype=np.float64), np.asarray(f)
    facing = np.flatnonzero((np.abs(v[:, 0] + 0.05) < 1e-12) & (np.abs(v[:, 1:]) < 0.045).all(axis=1))
    bumps = np.random.default_rng(0).choice(facing, 12, replace=False)
    meshes = [Mesh(v, f, name="a")]
    for i in bumps:
        w = v.copy()
        w[i, 0] -= 1e-5
        meshes.append(Mesh(w, f, name=f"bump{i}"))
    lib = MeshLibrary(meshes, dtype=torch.float64)
    q, gap = len(bumps), 0.01
    pa = torch.tensor([IDENTITY] * q, dtype=torch.float64)
    pb = pa.clone()
    pb[:, 0] = 0.1 + gap
    got = mesh_distance(lib, torch.zeros(q, dtype=torch.int64), torch.arange(1, q + 1), pa, pb)
    assert torch.allclose(got.distance, torch.full((q,), gap - 1e-5, dtype=torch.float64), rtol=0, atol=1e-15)


def test_collide_matches_fcl_and_containment(lib64):
    """Thousands of random pairs: ours == fcl surface collision OR warp winding-number
    containment (both independent libraries)."""
    from tests.data.independent_labeller import FclLabeller

    oracle = FclLabeller([m.vertices.numpy() for m in lib64], [m.faces.numpy() for m in lib64])
    ids = [0, 1, 3, 4]  # watertight, so containment has a ground truth
    rng = np.random.default_rng(1)
    q = 2000
    ia = rng.choice(ids, q)
    ib = rng.choice(ids, q)
    pa = random_poses(q, 0.06, seed=3)
    pb = random_poses(q, 0.06, seed=4)
    got = mesh_collide(lib64, torch.tensor(ia), torch.tensor(ib), pa, pb).numpy()
    dist = mesh_distance(lib64, torch.tensor(ia), torch.tensor(ib), pa, pb).distance.numpy()
    surface = oracle.surfaces_intersect(ia, ib, pa, pb)
    contain = ~surface & (oracle.contains_all(ib, pb, ia, pa) | oracle.contains_all(ia, pa, ib, pb))
    compared = surface | (dist >= 1e-7)  # within 1e-7 m of touching: either answer is numerically fair
    wrong = np.flatnonzero(compared & (got != (surface | contain)))
    assert wrong.size == 0, [(int(k), bool(surface[k]), bool(contain[k])) for k in wrong[:10]]
    n_surface, n_contain, n_compared = int(surface.sum()), int(contain[compared].sum()), int(compared.sum())
    assert n_compared > 1900 and n_surface > 100 and n_contain > 20 and n_compared - n_surface - n_contain > 100


# ---- agreement with Coal (the FCL successor) on random and adversarial pairs ----------------


def _coal_model(mesh):
    coal = pytest.importorskip("coal")
    m = coal.BVHModelOBBRSS()
    m.beginModel(mesh.num_faces, mesh.num_vertices)
    m.addVertices(mesh.vertices.numpy())
    m.addTriangles(mesh.faces.numpy().astype(np.int32))
    m.endModel()
    return m


def _coal_query(models, ia, ib, pa, pb):
    """Per query: (Coal's distance, whether Coal finds the surfaces intersecting). Coal's distance
    of intersecting surfaces is not a signed distance (it may be 0 or an estimate of the
    penetration), so only separated pairs' distances compare with ours."""
    import coal

    from contactnet.geometry import quaternion_to_matrix

    def tf(p):
        return coal.Transform3s(quaternion_to_matrix(p[3:].double()).numpy(), p[:3].double().numpy())

    out = []
    for k in range(len(ia)):
        ga, gb, ta, tb = models[int(ia[k])], models[int(ib[k])], tf(pa[k]), tf(pb[k])
        cres = coal.CollisionResult()
        coal.collide(ga, ta, gb, tb, coal.CollisionRequest(), cres)
        d = coal.distance(ga, ta, gb, tb, coal.DistanceRequest(), coal.DistanceResult())
        out.append((d, cres.isCollision()))
    return out


def _check_against_coal(lib, models, ia, ib, pa, pb, tol=1e-9):
    """Where Coal's distance is positive: ours equals it (and our closest points are that far
    apart); where it is not (surfaces crossing): ours is 0 and we collide. Returns how many pairs
    Coal's collision test finds apart and colliding."""
    got = mesh_distance(lib, ia, ib, pa, pb)
    hit = mesh_collide(lib, ia, ib, pa, pb)
    n_sep = n_hit = 0
    for k, (d, coal_hit) in enumerate(_coal_query(models, ia, ib, pa, pb)):
        ours = float(got.distance[k])
        n_hit += coal_hit
        if d <= 0.0:  # Coal's distance query found the surfaces crossing
            assert coal_hit and ours == 0.0 and bool(hit[k]), (k, ours, d)
            continue
        # Coal's collision test accepts surfaces a hair apart (1e-7 m here) as colliding; its
        # distance query still measures them.
        n_sep += not coal_hit
        assert abs(ours - d) <= tol * max(1.0, d), (k, ours, d)
        # the reported points are at the reported distance and on the reported triangles
        assert abs(float((got.point_a[k] - got.point_b[k]).norm()) - ours) <= 1e-12 + 1e-9 * ours
    return n_sep, n_hit


def test_distance_and_collide_match_coal_random_pairs(lib64):
    """Random poses over every pair kind of the test library (soups included): separated, touching,
    intersecting and nested pairs."""
    models = {i: _coal_model(lib64[i]) for i in range(len(lib64))}
    rng = np.random.default_rng(7)
    q = 400
    ia = torch.tensor(rng.integers(0, len(lib64), q))
    ib = torch.tensor(rng.integers(0, len(lib64), q))
    pa = random_poses(q, 0.06, seed=11)
    pb = random_poses(q, 0.06, seed=12)
    n_sep, n_hit = _check_against_coal(lib64, models, ia, ib, pa, pb)
    assert n_sep > 100 and n_hit > 50


def _adversarial_library():
    """Coarse against fine (large triangles, whose leaf boxes are thick, facing a small finely
    meshed object), flat faces against flat faces (many tied pairs), and open soups."""
    meshes = [
        Mesh(*box_mesh((0.4, 0.25, 0.1)), name="big_box"),  # 12 triangles, 40 cm
        Mesh(*bumpy_sphere(4, 0.02, seed=5), name="fine"),  # 5120 triangles, 4 cm
        Mesh(*subdivided_box((0.1, 0.1, 0.1), 2), name="fine_box"),  # 192 triangles
        Mesh(*random_soup(80, 0.2, 0.08, seed=6), name="soup"),
        Mesh(*bumpy_sphere(3, 0.05, seed=7), name="bumpy"),  # 1280 triangles
    ]
    return MeshLibrary(meshes, dtype=torch.float64)


@pytest.mark.parametrize("regime", ["far", "near", "touching", "overlapping"])
def test_distance_and_collide_match_coal_adversarial(regime):
    """Each pair kind at one object size apart (far field), 0.5 mm, 1e-7 m and 1 mm overlapping,
    in both argument orders, against Coal."""
    lib = _adversarial_library()
    models = {i: _coal_model(lib[i]) for i in range(len(lib))}
    pairs = [(0, 1), (1, 0), (0, 2), (2, 2), (0, 0), (3, 1), (1, 3), (4, 4), (4, 0), (2, 1)]
    reps = 6
    ia = torch.tensor([a for a, _ in pairs] * reps)
    ib = torch.tensor([b for _, b in pairs] * reps)
    size = torch.tensor([float((m.bounds()[1] - m.bounds()[0]).max()) for m in (lib[i] for i in range(len(lib)))])
    gap = {"far": 0.5 * (size[ia] + size[ib]), "near": 5e-4, "touching": 1e-7, "overlapping": 5e-4}[regime]
    pa, pb = near_contact_poses(lib, ia, ib, gap, seed=21, spread=1.0)
    if regime == "overlapping":
        res = mesh_distance(lib, ia, ib, pa, pb)
        u = (res.point_a - res.point_b) / res.distance[:, None]
        pb = pb.clone()
        pb[:, :3] += 1.5e-3 * u  # B 1 mm into A
    n_sep, n_hit = _check_against_coal(lib, models, ia, ib, pa, pb)
    if regime == "overlapping":
        assert n_hit > len(ia) // 2
    elif regime != "touching":
        assert n_sep == len(ia)


def test_collide_open_soup_and_winding(lib64):
    """Open soups: collision == surface intersection or exact winding number >= 0.5."""
    from contactnet.ops.reference.mesh_contacts import winding_number_reference

    q = 200
    pa = random_poses(q, 0.06, seed=5)
    pb = random_poses(q, 0.06, seed=6)
    ia = torch.full((q,), 2)
    ib = torch.tensor([0, 2] * (q // 2))
    got = mesh_collide(lib64, ia, ib, pa, pb)
    dist = mesh_distance(lib64, ia, ib, pa, pb).distance
    for k in range(q):
        if float(dist[k]) == 0:
            assert bool(got[k])
            continue
        ta, tb = world(lib64, int(ia[k]), pa[k]), world(lib64, int(ib[k]), pb[k])
        wa = float(winding_number_reference(ta[:1, 0], tb))
        wb = float(winding_number_reference(tb[:1, 0], ta))
        if min(abs(wa - 0.5), abs(wb - 0.5)) < 0.02:
            continue  # the fast winding number's far-field approximation may decide either way
        assert bool(got[k]) == (wa >= 0.5 or wb >= 0.5)


def test_nested_collides(lib64):
    pa = torch.tensor([IDENTITY], dtype=torch.float64)
    assert bool(mesh_collide(lib64, [0], [4], pa, pa)[0])  # small inside bumpy0
    assert bool(mesh_collide(lib64, [4], [0], pa, pa)[0])
    assert float(mesh_distance(lib64, [0], [4], pa, pa).distance[0]) > 0.005
    far = pa.clone()
    far[0, 0] = 1.0
    assert not bool(mesh_collide(lib64, [0], [4], pa, far)[0])


# ---- hand-computed contact formulas -----------------------------------------------------------


def _box_lib():
    return MeshLibrary([Mesh(*box_mesh((0.1, 0.1, 0.1)), name="box")], dtype=torch.float64)


def _quat(axis, angle):
    axis = np.asarray(axis, float) / np.linalg.norm(axis)
    return [math.cos(angle / 2), *(math.sin(angle / 2) * axis)]


def test_boxes_face_to_face():
    lib = _box_lib()
    g, ra, rb = 0.001, 0.002, 0.003
    pa = torch.tensor([[0, 0, 0.1 + g, 1, 0, 0, 0]], dtype=torch.float64)  # A above B
    pb = torch.tensor([IDENTITY], dtype=torch.float64)
    c = blem_contacts(lib, [0], [0], pa, pb, ra, rb)
    assert c.counts.tolist() == [c.tri_a.shape[0]] and c.tri_a.shape[0] > 0
    torch.testing.assert_close(c.normals, torch.tensor([[0, 0, 1.0]], dtype=torch.float64).expand_as(c.normals))
    torch.testing.assert_close(c.depths, torch.full_like(c.depths, ra + rb - g))
    # point z: (0.05 + 0.05 + g) / 2 + (rb - ra) / 2
    torch.testing.assert_close(c.points[:, 2], torch.full_like(c.depths, 0.05 + g / 2 + (rb - ra) / 2))
    assert not c.intersecting.any()
    # A's bottom face (2 triangles) x B's top face (2) are all present
    bottom = set(torch.nonzero(torch.isclose(lib[0].triangles[:, :, 2], torch.tensor(-0.05, dtype=torch.float64)).all(1)).squeeze(1).tolist())
    top = set(torch.nonzero(torch.isclose(lib[0].triangles[:, :, 2], torch.tensor(0.05, dtype=torch.float64)).all(1)).squeeze(1).tolist())
    pairs = set(zip(c.tri_a.tolist(), c.tri_b.tolist()))
    assert {(i, j) for i in bottom for j in top} <= pairs


def test_boxes_edge_on_edge():
    lib = _box_lib()
    g, ra, rb = 0.001, 0.002, 0.002
    h = 0.05 * math.sqrt(2)  # half diagonal: the edge height of a box rolled 45 degrees
    pa = torch.tensor([[0, 0, 2 * h + g, *_quat([1, 0, 0], math.pi / 4)]], dtype=torch.float64)
    pb = torch.tensor([[0, 0, 0, *_quat([0, 1, 0], math.pi / 4)]], dtype=torch.float64)
    c = blem_contacts(lib, [0], [0], pa, pb, ra, rb)
    assert c.tri_a.shape[0] > 0
    deepest = c.depths.argmax()
    torch.testing.assert_close(c.depths[deepest], torch.tensor(ra + rb - g, dtype=torch.float64))
    torch.testing.assert_close(c.normals[deepest], torch.tensor([0, 0, 1.0], dtype=torch.float64))
    torch.testing.assert_close(c.points[deepest], torch.tensor([0, 0, h + g / 2], dtype=torch.float64))
    # crossing edges: each edge has 2 adjacent triangles per box, 4 pairs at distance g
    assert int(torch.isclose(c.distances, torch.tensor(g, dtype=torch.float64)).sum()) == 4


def test_box_vertex_on_face():
    lib = _box_lib()
    g, ra, rb = 0.001, 0.001, 0.003
    # rotate the (1, 1, 1) diagonal onto -z so a vertex points straight down
    d = np.array([1, 1, 1]) / math.sqrt(3)
    axis = np.cross(d, [0, 0, -1])
    angle = math.acos(np.dot(d, [0, 0, -1]))
    s = 0.05 * math.sqrt(3)
    pa = torch.tensor([[0, 0, 0.05 + s + g, *_quat(axis, angle)]], dtype=torch.float64)
    pb = torch.tensor([IDENTITY], dtype=torch.float64)
    c = blem_contacts(lib, [0], [0], pa, pb, ra, rb)
    near = torch.isclose(c.distances, torch.tensor(g, dtype=torch.float64), atol=1e-12)
    assert near.sum() >= 3  # the vertex's triangles against the top face
    torch.testing.assert_close(c.normals[near], torch.tensor([[0, 0, 1.0]], dtype=torch.float64).expand(int(near.sum()), 3))
    torch.testing.assert_close(c.points[near], torch.tensor([[0, 0, 0.05 + g / 2 + (rb - ra) / 2]], dtype=torch.float64).expand(int(near.sum()), 3))


def test_intersecting_triangles_retraction():
    """Boxes overlapping by e along z: every intersecting pair retracts by at most e, and the
    deepest contacts push A straight up."""
    lib = _box_lib()
    e = 0.004
    pa = torch.tensor([[0.01, 0.02, 0.1 - e, 1, 0, 0, 0]], dtype=torch.float64)
    pb = torch.tensor([IDENTITY], dtype=torch.float64)
    c = blem_contacts(lib, [0], [0], pa, pb, 0.001, 0.001)
    inter = c.intersecting
    assert inter.any()
    assert (c.distances[inter] <= 0).all() and (c.distances[inter] >= -e - 1e-12).all()
    up = torch.isclose(c.normals[inter], torch.tensor([0, 0, 1.0], dtype=torch.float64)).all(1)
    assert up.any()


# ---- Hauser's invariances ---------------------------------------------------------------------


def test_contacts_continuous_under_small_displacement(lib64):
    pa, pb = pair_poses("touching", 11)
    ra = rb = 0.004
    base = blem_contacts(lib64, [0], [1], pa[None], pb[None], ra, rb)
    assert base.tri_a.shape[0] > 0 and not base.intersecting.any()
    delta = 1e-7
    moved = pb.clone()
    moved[:3] += delta * torch.tensor([0.3, -0.5, 0.8], dtype=torch.float64)
    after = blem_contacts(lib64, [0], [1], pa[None], moved[None], ra, rb)
    key = lambda c: {(a, b): k for k, (a, b) in enumerate(zip(c.tri_a.tolist(), c.tri_b.tolist()))}  # noqa: E731
    kb, ka = key(base), key(after)
    for pair in set(kb) ^ set(ka):  # pairs that appear/disappear sit at the layer's edge
        c, k = (base, kb[pair]) if pair in kb else (after, ka[pair])
        assert abs(float(c.depths[k])) < 10 * delta
    for pair in set(kb) & set(ka):
        i, j = kb[pair], ka[pair]
        assert abs(float(base.depths[i] - after.depths[j])) <= 2 * delta
        assert float((base.normals[i] - after.normals[j]).norm()) < 1e-3
        assert float((base.points[i] - after.points[j]).norm()) < 1e-3


def test_contacts_invariant_to_retriangulation():
    coarse = Mesh(*box_mesh((0.1, 0.1, 0.1)), name="coarse")
    fine = Mesh(*subdivided_box((0.1, 0.1, 0.1), 2), name="fine")
    lib = MeshLibrary([coarse, fine], dtype=torch.float64)
    g, r = 0.001, 0.002
    pa = torch.tensor([[0.03, -0.02, 0.1 + g, *_quat([0, 0, 1], 0.3)]], dtype=torch.float64)
    pb = torch.tensor([IDENTITY], dtype=torch.float64)
    res = [blem_contacts(lib, [0], [b], pa, pb, r, r) for b in (0, 1)]
    regions = []
    for c in res:
        assert not c.intersecting.any()
        # the deepest contacts are the face-on-face (and rim) ones at the gap g, pushing A up
        torch.testing.assert_close(c.depths.max(), torch.tensor(2 * r - g, dtype=torch.float64))
        assert (c.depths <= 2 * r - g + 1e-12).all()
        face = torch.isclose(c.depths, torch.tensor(2 * r - g, dtype=torch.float64), atol=1e-12, rtol=0)
        torch.testing.assert_close(c.normals[face], torch.tensor([[0, 0, 1.0]], dtype=torch.float64).expand(int(face.sum()), 3))
        regions.append((c.points[face].min(0).values, c.points[face].max(0).values))
    # the same contact region (the overlap of the two faces); the finer mesh only adds shallow
    # contacts at the rim, inside the boundary layer
    torch.testing.assert_close(regions[0][0], regions[1][0], atol=1e-9, rtol=0)
    torch.testing.assert_close(regions[0][1], regions[1][1], atol=1e-9, rtol=0)
    # clustered to k contacts: the cap holds and the deepest penetration is kept in both
    k = [blem_contacts(lib, [0], [b], pa, pb, r, r, max_contacts=4) for b in (0, 1)]
    assert k[0].counts.tolist() == k[1].counts.tolist() == [4]
    torch.testing.assert_close(k[0].depths.max(), k[1].depths.max(), atol=1e-12, rtol=0)


# ---- Klampt -------------------------------------------------------------------------------------


def _klampt_geom(mesh):
    from klampt import Geometry3D, TriangleMesh

    m = TriangleMesh()
    m.setVertices(mesh.vertices.numpy())
    m.setIndices(mesh.faces.numpy().astype(np.int32))
    return Geometry3D(m)


def _klampt_place(g, pose):
    from contactnet.geometry import quaternion_to_matrix

    r = quaternion_to_matrix(pose[3:].double()).numpy()
    g.setCurrentTransform(r.T.reshape(-1).tolist(), pose[:3].double().tolist())  # column-major


@pytest.mark.parametrize("pair", [(0, 1), (1, 3), (0, 2)])
def test_klampt_contacts(lib64, pair):
    """Klampt prunes to about one partner per triangle (PQP_ToleranceAll keeps one pair per
    triangle, not always the closest one, and drops some triangles whose partners lie in the
    outer part of the layer), so its contact set is a SUBSET of ours. Every contact it does
    report equals ours for the same triangle pair: same depth, opposite normal (Klampt's points
    from A to B; ours from B to A), and the midpoint of its points1/points2 (which sit on the
    expanded surfaces) is our contact point. The deepest contact is always in both."""
    ia, ib = pair
    ra, rb = 0.003, 0.002
    checked = 0
    for seed in range(4):
        pa, pb = near_contact_poses(lib64, [ia], [ib], 0.002, seed=20 + seed)
        pa, pb = pa[0], pb[0]
        ours = blem_contacts(lib64, [ia], [ib], pa[None], pb[None], ra, rb)
        ga, gb = _klampt_geom(lib64[ia]), _klampt_geom(lib64[ib])
        _klampt_place(ga, pa)
        _klampt_place(gb, pb)
        kr = ga.contacts(gb, ra, rb)
        k_a, k_b = list(kr.elems1), list(kr.elems2)
        if ours.intersecting.any():
            continue  # Klampt's handling of intersecting triangles differs (see the module notes)
        our_pairs = {(a, b): k for k, (a, b) in enumerate(zip(ours.tri_a.tolist(), ours.tri_b.tolist()))}
        assert set(zip(k_a, k_b)) <= set(our_pairs)
        assert set(k_a) <= set(ours.tri_a.tolist()) and set(k_b) <= set(ours.tri_b.tolist())
        depths = list(kr.depths)
        normals = np.array([list(n) for n in kr.normals])
        mids = (np.array([list(p) for p in kr.points1]) + np.array([list(p) for p in kr.points2])) / 2
        for n, (a, b) in enumerate(zip(k_a, k_b)):
            k = our_pairs[(a, b)]
            assert abs(depths[n] - float(ours.depths[k])) < 1e-9
            np.testing.assert_allclose(-normals[n], ours.normals[k].numpy(), atol=1e-6)
            np.testing.assert_allclose(mids[n], ours.points[k].numpy(), atol=1e-9)
        # the deepest contact (the closest triangle pair) is always among Klampt's
        assert abs(max(depths) - float(ours.depths.max())) < 1e-9
        checked += 1
    assert checked >= 2


# ---- clustering ---------------------------------------------------------------------------------


@pytest.mark.parametrize("k", [1, 3, 8, 40])
def test_clustering_honours_cap(lib64, k):
    pa, pb = pair_poses("interpenetrating", 5)
    raw = blem_contacts(lib64, [0, 0], [1, 2], pa[None].repeat(2, 1), pb[None].repeat(2, 1), 0.003, 0.003)
    clustered = blem_contacts(lib64, [0, 0], [1, 2], pa[None].repeat(2, 1), pb[None].repeat(2, 1),
                              0.003, 0.003, max_contacts=k)  # fmt: skip
    assert (clustered.counts <= k).all()
    assert (clustered.counts == torch.clamp(raw.counts, max=k)).all()
    assert clustered.points.shape[0] == int(clustered.offsets[-1])
    assert torch.allclose(clustered.normals.norm(dim=1), torch.ones(()).double())
    # max depth is preserved per query, and every cluster point lies within the raw points' box
    for q in range(2):
        r0, r1 = raw.offsets[q : q + 2].tolist()
        c0, c1 = clustered.offsets[q : q + 2].tolist()
        if r1 == r0:
            continue
        assert abs(float(raw.depths[r0:r1].max() - clustered.depths[c0:c1].max())) < 1e-12
        lo, hi = raw.points[r0:r1].min(0).values, raw.points[r0:r1].max(0).values
        assert ((clustered.points[c0:c1] >= lo - 1e-12) & (clustered.points[c0:c1] <= hi + 1e-12)).all()
    # deterministic
    again = blem_contacts(lib64, [0, 0], [1, 2], pa[None].repeat(2, 1), pb[None].repeat(2, 1),
                          0.003, 0.003, max_contacts=k)  # fmt: skip
    assert torch.equal(again.points, clustered.points)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("k", [1, 4, 16])
def test_clustered_path_equals_clustering_the_raw_contacts(dtype, k):
    """blem_contacts(max_contacts=k) writes only what clustering reads and recomputes the kept
    rows: it must give cluster_contacts(blem_contacts(...), k) bit for bit, on touching,
    interpenetrating and nested pairs, small sets (hierarchical) and large ones (k-means)."""
    lib = make_library(dtype)
    cases = [pair_poses(case, seed) for seed, case in enumerate(["touching", "interpenetrating", "nested"])]
    pa = torch.stack([c[0] for c in cases] * 2).to(dtype)
    pb = torch.stack([c[1] for c in cases] * 2).to(dtype)
    ia, ib = [0, 0, 0, 0, 2, 3], [1, 1, 4, 2, 2, 0]
    raw = blem_contacts(lib, ia, ib, pa, pb, 0.004, 0.002)
    assert raw.intersecting.any() and int(raw.counts.max()) > 64  # both clustering regimes
    want = cluster_contacts(raw, k)
    got = blem_contacts(lib, ia, ib, pa, pb, 0.004, 0.002, max_contacts=k)
    for name, a, b in zip(want._fields, want, got):
        assert a.dtype == b.dtype and torch.equal(a, b), name


def test_compact_contacts_and_recomputed_rows(lib64):
    """The compact raw output holds the full output's points, normals and depths and the pairs'
    BVH leaf rows; blem_contact_rows recomputes every field of any row bit for bit."""
    ops = torch.ops.contactnet
    pa, pb = pair_poses("interpenetrating", 3)
    pa, pb = pa[None].repeat(2, 1), pb[None].repeat(2, 1)
    ia, ib = torch.tensor([0, 2]), torch.tensor([1, 0])
    r = torch.full((2,), 0.003, dtype=torch.float64)
    bvh = tuple(lib64.bvh)
    full = ops.blem_contacts_raw(*bvh, ia, ib, pa, pb, r, r)
    compact = ops.blem_contacts_raw(*bvh, ia, ib, pa, pb, r, r, True)
    n = full[0].shape[0]
    assert n > 0 and int(full[8].sum()) > 0
    for i in (0, 1, 2, 9):  # points, normals, depths, offsets
        assert torch.equal(full[i], compact[i])
    for i in (3, 4, 5, 8):  # distances, points_a, points_b, intersecting: not written
        assert compact[i].shape[0] == 0
    query = torch.repeat_interleave(torch.arange(2), full[9][1:] - full[9][:-1])
    tri_ids, face_offsets = bvh[1], bvh[5]
    for rows, ids, faces in ((compact[6], ia, full[6]), (compact[7], ib, full[7])):
        assert torch.equal(tri_ids[face_offsets[ids[query]] + rows].long(), faces)
    again = ops.blem_contact_rows(*bvh, ia, ib, pa, pb, r, r, query, compact[6], compact[7])
    for i, t in enumerate(again):
        assert torch.equal(t, full[i]), i
    pick = torch.tensor([n - 1, 0, n // 2])
    some = ops.blem_contact_rows(*bvh, ia, ib, pa, pb, r, r, query[pick], compact[6][pick], compact[7][pick])
    for i, t in enumerate(some):
        assert torch.equal(t, full[i][pick]), i
    empty = ops.blem_contact_rows(*bvh, ia, ib, pa, pb, r, r, *(torch.zeros(0, dtype=torch.int64),) * 3)
    assert [tuple(t.shape) for t in empty] == [(0, 3), (0, 3), (0,), (0,), (0, 3), (0, 3), (0,), (0,), (0,)]
    # rows out of range are refused, naming the argument
    one = torch.tensor([0])
    with pytest.raises(ValueError, match="query"):
        ops.blem_contact_rows(*bvh, ia, ib, pa, pb, r, r, torch.tensor([2]), one, one)
    with pytest.raises(ValueError, match="row_a"):
        ops.blem_contact_rows(*bvh, ia, ib, pa, pb, r, r, one, torch.tensor([lib64[0].num_faces]), one)
    with pytest.raises(ValueError, match="row_b"):
        ops.blem_contact_rows(*bvh, ia, ib, pa, pb, r, r, one, one, torch.tensor([-1]))
    with pytest.raises(RuntimeError, match="row_a: expected int64"):
        ops.blem_contact_rows(*bvh, ia, ib, pa, pb, r, r, one, one.int(), one)


def test_clustering_kmeans_and_hierarchical_separate_blobs():
    """Three well-separated groups of contacts are recovered by both methods."""
    from contactnet.ops.mesh_query import Contacts

    torch.manual_seed(0)
    for n_per in (10, 60):  # 30 contacts -> hierarchical, 180 -> k-means
        centres = torch.tensor([[0.0, 0, 0], [1.0, 0, 0], [0, 1.0, 0]], dtype=torch.float64)
        pts = (centres[:, None] + 0.01 * torch.randn(3, n_per, 3).double()).reshape(-1, 3)
        n = pts.shape[0]
        nrm = torch.tensor([[0, 0, 1.0]], dtype=torch.float64).expand(n, 3).contiguous()
        dep = torch.rand(n).double()
        z = torch.zeros(n).double()
        c = Contacts(pts, nrm, dep, z, pts, pts, torch.arange(n), torch.arange(n),
                     torch.zeros(n, dtype=torch.bool), torch.tensor([n]), torch.tensor([0, n]))  # fmt: skip
        out = cluster_contacts(c, 3)
        assert out.counts.tolist() == [3]
        found = sorted(out.points[:, :2].round(decimals=1).tolist())
        assert found == [[0.0, 0.0], [0.0, 1.0], [1.0, 0.0]]
        for i in range(3):
            members = (pts - out.points[i]).norm(dim=1) < 0.2
            assert abs(float(out.depths[i]) - float(dep[members].max())) < 1e-12


def _plain_kmeans_labels(feat: list, depths: list, k: int, sample: int) -> list:
    """k-means as documented in `cluster_contacts`, with a full scan of every centre for every
    contact in every iteration: the oracle for the bound-accelerated kernel. Lloyd runs on the
    stride sample of m = min(n, sample) contacts; then, if m < n, every contact joins its nearest
    centre."""

    def dist2(a, b):
        return sum((x - y) ** 2 for x, y in zip(a, b))

    def nearest(f, cent):
        return min(range(len(cent)), key=lambda c: (dist2(f, cent[c]), c))

    n = len(feat)
    m = min(n, sample)
    sub = [feat[i * n // m] for i in range(m)]
    first = max(range(n), key=lambda i: (depths[i], -i))
    cent = [list(feat[first])]
    mind = [dist2(f, cent[0]) for f in sub]
    for _ in range(1, k):
        far = max(range(m), key=lambda i: (mind[i], -i))
        cent.append(list(sub[far]))
        mind = [min(d, dist2(f, cent[-1])) for d, f in zip(mind, sub)]
    labels = [-1] * m
    for _ in range(k):
        new = [nearest(f, cent) for f in sub]
        if new == labels:
            break
        labels = new
        for c in range(k):
            members = [sub[i] for i in range(m) if labels[i] == c]
            if members:
                sums = [0.0] * 7
                for f in members:
                    sums = [s + x for s, x in zip(sums, f)]
                cent[c] = [s / len(members) for s in sums]
    return labels if m == n else [nearest(f, cent) for f in feat]


def _smooth_contacts(counts: list, seed: int):
    """Packed synthetic contacts on a wavy 5 x 3 cm patch with tilted normals: continuous sets
    whose cluster boundaries keep moving during Lloyd."""
    from contactnet.ops.mesh_query import Contacts

    g = torch.Generator().manual_seed(seed)
    n = sum(counts)
    u = torch.rand(n, 2, generator=g, dtype=torch.float64)
    pts = torch.stack([u[:, 0] * 0.05, u[:, 1] * 0.03, 0.002 * torch.sin(40 * u[:, 0])], 1) + 0.3
    nrm = torch.nn.functional.normalize(torch.randn(n, 3, generator=g, dtype=torch.float64) * 0.2
                                        + torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64), dim=1)  # fmt: skip
    dep = torch.rand(n, generator=g, dtype=torch.float64) * 0.002
    offsets = torch.tensor([0, *torch.tensor(counts).cumsum(0).tolist()])
    z = torch.zeros(n, dtype=torch.float64)
    return Contacts(pts, nrm, dep, z, pts, pts, torch.arange(n), torch.arange(n),
                    torch.zeros(n, dtype=torch.bool), torch.tensor(counts), offsets)  # fmt: skip


# sample >= every set: Lloyd on all contacts; 64: on a stride sample, then one full assignment
# of every contact (a scan of all centres in blocks of 16; k = 2, 5, 12 give part blocks)
@pytest.mark.parametrize("k, sample", [(2, 10**9), (5, 10**9), (12, 10**9), (2, 64), (5, 64), (12, 64)])
def test_kmeans_matches_plain_scan(k, sample):
    """The k-means kernel skips contacts by distance bounds; its clusters must be exactly those of
    a full scan, on smooth (continuous) contact sets where boundaries keep moving."""
    counts = [90, 150, 200]
    c = _smooth_contacts(counts, seed=k)
    pts, nrm, dep, offsets = c.points, c.normals, c.depths, c.offsets
    out = cluster_contacts(c, k, normal_weight=0.1, depth_weight=1.0, kmeans_sample=sample)
    for q in range(len(counts)):
        r0, r1 = offsets[q].item(), offsets[q + 1].item()
        feat = [[*pts[i].tolist(), *(0.1 * nrm[i]).tolist(), float(dep[i])] for i in range(r0, r1)]
        labels = _plain_kmeans_labels(feat, dep[r0:r1].tolist(), k, sample)
        want_src, want_pts = [], []
        for lab in sorted(set(labels)):
            members = [i for i in range(r1 - r0) if labels[i] == lab]
            deepest = max(members, key=lambda i: (float(dep[r0 + i]), -i))
            want_src.append(r0 + deepest)
            want_pts.append(pts[[r0 + i for i in members]].mean(0))
        o0, o1 = out.offsets[q].item(), out.offsets[q + 1].item()
        assert out.tri_a[o0:o1].tolist() == want_src
        torch.testing.assert_close(out.points[o0:o1], torch.stack(want_pts), atol=1e-12, rtol=0)


def _within_cluster_cost(c, out, normal_weight=0.1) -> float:
    """Sum over contacts of the squared weighted 7-D distance to the nearest output contact."""
    f = torch.cat([c.points, normal_weight * c.normals, c.depths[:, None]], 1)
    g = torch.cat([out.points, normal_weight * out.normals, out.depths[:, None]], 1)
    return float(torch.cdist(f, g).square().min(1).values.sum())


@pytest.mark.parametrize("k", [4, 16])
def test_kmeans_sample_keeps_cluster_quality(k):
    """Lloyd on a stride sample then one full assignment represents the contacts about as well as
    Lloyd on all of them (measured on the benchmark pairs: within 5%)."""
    c = _smooth_contacts([20000], seed=3)
    full = cluster_contacts(c, k, kmeans_sample=10**9)
    sampled = cluster_contacts(c, k, kmeans_sample=1024)
    assert sampled.counts.tolist() == [k]
    assert _within_cluster_cost(c, sampled) <= 1.1 * _within_cluster_cost(c, full)
    assert float(sampled.depths.max()) == float(c.depths.max())


def test_kmeans_sample_is_checked():
    c = _smooth_contacts([100], seed=0)
    with pytest.raises(ValueError, match="kmeans_sample"):
        cluster_contacts(c, 8, kmeans_sample=4)


# ---- dtypes, devices, batches -----------------------------------------------------------------


def test_float32_matches_float64(device):
    lib64 = make_library(torch.float64, device)
    lib32 = lib64.to(dtype=torch.float32)
    q = 64
    ia = torch.randint(0, 5, (q,), generator=torch.Generator().manual_seed(0))
    ib = torch.randint(0, 5, (q,), generator=torch.Generator().manual_seed(1))
    pa = random_poses(q, 0.04, seed=8).to(device)
    pb = random_poses(q, 0.04, seed=9).to(device)
    d64 = mesh_distance(lib64, ia, ib, pa, pb).distance
    d32 = mesh_distance(lib32, ia, ib, pa.float(), pb.float()).distance
    torch.testing.assert_close(d32.double(), d64, atol=2e-6, rtol=0)
    assert torch.equal(mesh_collide(lib64, ia, ib, pa, pb), mesh_collide(lib32, ia, ib, pa.float(), pb.float()))
    c64 = blem_contacts(lib64, ia, ib, pa, pb, 0.002, 0.002)
    c32 = blem_contacts(lib32, ia, ib, pa.float(), pb.float(), 0.002, 0.002)
    # same set, except pairs within float32 rounding of the layer edge
    s64 = set(zip(c64.query_index().tolist(), c64.tri_a.tolist(), c64.tri_b.tolist()))
    s32 = set(zip(c32.query_index().tolist(), c32.tri_a.tolist(), c32.tri_b.tolist()))
    edge = {k for k, d in zip(zip(c64.query_index().tolist(), c64.tri_a.tolist(), c64.tri_b.tolist()), c64.depths.tolist()) if abs(d) < 1e-5}  # noqa: E501
    assert (s64 ^ s32) <= edge | (s32 - s64)
    assert len(s32 - s64) <= len(edge) + 5


def test_meshes_far_from_their_frame_origin():
    """Box tests run in float32 (csrc/common/box.h): mesh frames whose vertices sit 10 km from
    the origin must not break the pruning (its slack scales with the box centres' offsets). Same
    meshes, vertices shifted by `o` in their own frames and poses shifted back: same answers."""
    o = torch.tensor([1e4, -7e3, 3e3], dtype=torch.float64)
    meshes = [Mesh(*bumpy_sphere(3, 0.05, seed=s), name=f"b{s}") for s in (1, 2)]
    lib = MeshLibrary(meshes, dtype=torch.float64)
    far = MeshLibrary([Mesh(m.vertices + o, m.faces, name=m.name) for m in meshes], dtype=torch.float64)
    q = 16
    ia, ib = torch.zeros(q, dtype=torch.int64), torch.ones(q, dtype=torch.int64)
    pa, pb = near_contact_poses(lib, ia, ib, 1e-5, seed=3)
    pb_in = pb.clone()
    pb_in[:, :3] -= 2e-5 * torch.nn.functional.normalize(pb[:, :3] - pa[:, :3], dim=1)
    for qa, qb in ((pa, pb), (pa, pb_in)):
        # world pose of the shifted frame: x_world = R (v + o) + t', so t' = t - R o
        fa, fb = qa.clone(), qb.clone()
        for f, p in ((fa, qa), (fb, qb)):
            rotation = torch.cat([torch.zeros(q, 3, dtype=torch.float64), p[:, 3:]], 1)
            f[:, :3] -= transform_points(rotation, o.expand(q, 3))
        d, d_far = mesh_distance(lib, ia, ib, qa, qb), mesh_distance(far, ia, ib, fa, fb)
        torch.testing.assert_close(d_far.distance, d.distance, atol=1e-9, rtol=0)
        assert torch.equal(mesh_collide(far, ia, ib, fa, fb), mesh_collide(lib, ia, ib, qa, qb))


def test_batch_matches_single_queries(lib64):
    q = 12
    ia = torch.tensor([0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 2])
    ib = torch.tensor([1, 2, 3, 4, 0, 0, 2, 2, 1, 4, 3, 0])
    pa = random_poses(q, 0.03, seed=10)
    pb = random_poses(q, 0.03, seed=11)
    batch = blem_contacts(lib64, ia, ib, pa, pb, 0.003, 0.001)
    dist = mesh_distance(lib64, ia, ib, pa, pb)
    for k in range(q):
        one = blem_contacts(lib64, ia[k : k + 1], ib[k : k + 1], pa[k : k + 1], pb[k : k + 1], 0.003, 0.001)
        r0, r1 = batch.offsets[k : k + 2].tolist()
        assert torch.equal(batch.tri_a[r0:r1], one.tri_a) and torch.equal(batch.points[r0:r1], one.points)
        d1 = mesh_distance(lib64, ia[k : k + 1], ib[k : k + 1], pa[k : k + 1], pb[k : k + 1])
        assert float(d1.distance[0]) == float(dist.distance[k])


def test_contact_collection_paths_agree():
    """The CPU op collects contacts into growable columns: with one task for all queries they
    become the outputs as they are (columns past 2 MB in their own growing mapping), with several
    tasks they are copied into place. Both must give the rows of single-query calls, in order."""
    big = MeshLibrary([Mesh(*bumpy_sphere(5, 0.05, seed=1)), Mesh(*bumpy_sphere(5, 0.05, seed=2))])
    q = 2
    ia, ib = torch.zeros(q, dtype=torch.int64), torch.ones(q, dtype=torch.int64)
    pa, pb = near_contact_poses(big, ia, ib, 0.0005, seed=5)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one_task = blem_contacts(big, ia, ib, pa, pb, 0.004, 0.004)
        torch.set_num_threads(2)
        tasks = blem_contacts(big, ia, ib, pa, pb, 0.004, 0.004)
    finally:
        torch.set_num_threads(threads)
    assert int(one_task.counts.max()) * 24 > 2 << 20  # a points column past 2 MB: mapped
    for a, b in zip(one_task, tasks):
        assert torch.equal(a, b)
    for k in range(q):
        single = blem_contacts(big, ia[k : k + 1], ib[k : k + 1], pa[k : k + 1], pb[k : k + 1], 0.004, 0.004)
        r0, r1 = one_task.offsets[k : k + 2].tolist()
        for name in ("points", "normals", "depths", "distances", "points_a", "points_b", "tri_a", "tri_b",
                     "intersecting"):  # fmt: skip
            assert torch.equal(getattr(one_task, name)[r0:r1], getattr(single, name)), name


def test_per_query_radii(lib64):
    pa, pb = pair_poses("touching", 2)
    r_a = torch.tensor([0.001, 0.004], dtype=torch.float64)
    c = blem_contacts(lib64, [0, 0], [1, 1], pa[None].repeat(2, 1), pb[None].repeat(2, 1), r_a, 0.001)
    assert int(c.counts[0]) <= int(c.counts[1])
    assert (c.depths <= torch.repeat_interleave(r_a + 0.001, c.counts) + 1e-12).all()


# ---- bad input --------------------------------------------------------------------------------


def test_bad_input(lib64):
    p = torch.tensor([IDENTITY], dtype=torch.float64)
    with pytest.raises(ValueError, match="poses_a"):
        mesh_distance(lib64, [0], [1], torch.full((1, 7), float("nan")).double(), p)
    with pytest.raises(ValueError, match="batch size"):
        mesh_distance(lib64, [0, 1], [1, 1], p, p)
    with pytest.raises(ValueError, match="batch size"):
        mesh_collide(lib64, [0], [1], p.repeat(2, 1), p)
    with pytest.raises(ValueError, match="ids_b"):
        blem_contacts(lib64, [0], [9], p, p)
    with pytest.raises(TypeError, match="dtype"):  # (float32 poses are cast, integers are refused)
        mesh_distance(lib64, [0], [1], p.long(), p.long())
    with pytest.raises(ValueError, match="poses_b"):
        mesh_distance(lib64, [0], [1], p, torch.zeros(1, 6).double())
    with pytest.raises(ValueError, match="quaternion"):
        mesh_distance(lib64, [0], [1], p, torch.zeros(1, 7).double())
    with pytest.raises(ValueError, match="r_a"):
        blem_contacts(lib64, [0], [1], p, p, -1.0, 0.0)
    with pytest.raises(ValueError, match="max_contacts"):
        blem_contacts(lib64, [0], [1], p, p, 0.0, 0.0, max_contacts=0)
    with pytest.raises(TypeError, match="lib"):
        mesh_distance("lib", [0], [1], p, p)
    with pytest.raises((RuntimeError, ValueError), match="mesh ids"):  # direct op calls are checked in C++ too
        torch.ops.contactnet.mesh_distance(*lib64.bvh, torch.tensor([7]), torch.tensor([0]), p, p, 1.0)


def test_zero_queries(lib64):
    e = torch.zeros(0, 7, dtype=torch.float64)
    ids = torch.zeros(0, dtype=torch.int64)
    assert mesh_distance(lib64, ids, ids, e, e).distance.shape == (0,)
    assert mesh_collide(lib64, ids, ids, e, e).shape == (0,)
    c = blem_contacts(lib64, ids, ids, e, e, 0.01, 0.01, max_contacts=4)
    assert c.points.shape == (0, 3) and c.offsets.tolist() == [0]


def test_quaternions_are_normalised(lib64):
    pa, pb = pair_poses("touching", 4)
    scaled = pb.clone()
    scaled[3:] *= 3.0
    d1 = mesh_distance(lib64, [0], [1], pa[None], pb[None]).distance
    d2 = mesh_distance(lib64, [0], [1], pa[None], scaled[None]).distance
    torch.testing.assert_close(d1, d2)


# ---- opcheck ----------------------------------------------------------------------------------


def test_opcheck(lib64):
    ops = torch.ops.contactnet
    pa, pb = pair_poses("touching", 1)
    pa, pb = pa[None].contiguous(), pb[None].contiguous()
    ids_a, ids_b = torch.tensor([0]), torch.tensor([1])
    bvh = tuple(lib64.bvh)
    tests = ("test_schema", "test_autograd_registration", "test_faketensor")
    torch.library.opcheck(ops.mesh_distance, (*bvh, ids_a, ids_b, pa, pb, 1.0), test_utils=tests)
    torch.library.opcheck(ops.mesh_collide, (*bvh, ids_a, ids_b, pa, pb, 0.5, 2.0), test_utils=tests)
    r = torch.tensor([0.003], dtype=torch.float64)
    torch.library.opcheck(ops.blem_contacts_raw, (*bvh, ids_a, ids_b, pa, pb, r, r), test_utils=tests)
    compact = ops.blem_contacts_raw(*bvh, ids_a, ids_b, pa, pb, r, r, True)
    torch.library.opcheck(ops.blem_contacts_raw, (*bvh, ids_a, ids_b, pa, pb, r, r, True), test_utils=tests)
    query = torch.zeros_like(compact[6])
    torch.library.opcheck(ops.blem_contact_rows, (*bvh, ids_a, ids_b, pa, pb, r, r, query, compact[6], compact[7]),
                          test_utils=tests)  # fmt: skip
    raw = blem_contacts(lib64, ids_a, ids_b, pa, pb, 0.003, 0.003)
    torch.library.opcheck(ops.cluster_contacts, (raw.points, raw.normals, raw.depths, raw.offsets, 3, 0.1, 1.0, 64, 4096), test_utils=tests)
    m = lib64[1]
    torch.library.opcheck(ops.build_mesh_bvh, (m.vertices, m.faces, torch.tensor([0, m.num_vertices]), torch.tensor([0, m.num_faces])), test_utils=("test_schema", "test_faketensor"))  # noqa: E501

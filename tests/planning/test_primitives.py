"""cuRobo's primitives: analytic sphere distances against python-fcl (and Coal when installed) at
random rotated poses, the inside branch against closed forms, and the tessellations' containment
(every face plane beyond the shape's support) and tolerance."""

import numpy as np
import pytest
import torch

from contactnet.data.pairs import random_quaternions
from contactnet.geometry.poses import quaternion_to_matrix
from contactnet.planning import CollisionWorld, PrimitiveKind, sphere_signed_distance
from contactnet.planning.primitives import primitive_params, primitive_signed_distance, tessellate

fcl = pytest.importorskip("fcl")

SHAPES = {  # name -> (world adder kwargs, fcl geometry, coal geometry factory)
    "cuboid": (dict(dims=[0.2, 0.4, 0.1]), lambda: fcl.Box(0.2, 0.4, 0.1), ("Box", (0.2, 0.4, 0.1))),
    "sphere": (dict(radius=0.12), lambda: fcl.Sphere(0.12), ("Sphere", (0.12,))),
    "capsule": (dict(radius=0.05, base=[0, 0, -0.15], tip=[0, 0, 0.15]), lambda: fcl.Capsule(0.05, 0.3),
                ("Capsule", (0.05, 0.3))),
    "cylinder": (dict(radius=0.1, height=0.25), lambda: fcl.Cylinder(0.1, 0.25), ("Cylinder", (0.1, 0.25))),
}


def _world_with(kind, pose):
    w = CollisionWorld(max_obstacles=2, num_points=32, dtype=torch.float64)
    getattr(w, f"add_{kind}")("o", **SHAPES[kind][0], pose=pose)
    return w


def _random_outside_spheres(n, seed):
    g = torch.Generator().manual_seed(seed)
    centres = (torch.rand(n, 3, generator=g, dtype=torch.float64) - 0.5) * 1.0
    radii = torch.rand(n, 1, generator=g, dtype=torch.float64) * 0.03 + 0.005
    return torch.cat([centres, radii], 1)


@pytest.mark.parametrize("kind", list(SHAPES))
def test_sphere_distance_matches_fcl(kind):
    g = torch.Generator().manual_seed(3)
    pose = torch.cat([torch.tensor([0.05, -0.02, 0.03], dtype=torch.float64), random_quaternions(1, g)[0]])
    w = _world_with(kind, pose)
    spheres = _random_outside_spheres(300, seed=4)
    ours = sphere_signed_distance(w, spheres[None, None])[0, 0]
    obstacle = fcl.CollisionObject(SHAPES[kind][1](), fcl.Transform(pose[3:].numpy(), pose[:3].numpy()))
    checked = 0
    for s, d in zip(spheres.numpy(), ours.tolist()):
        if d < 1e-3:  # fcl's distance is 0 or unreliable once they touch; the inside branch is tested below
            continue
        query = fcl.CollisionObject(fcl.Sphere(s[3]), fcl.Transform(s[:3]))
        ref = fcl.distance(obstacle, query, fcl.DistanceRequest(), fcl.DistanceResult())
        assert d == pytest.approx(ref, abs=1e-6), (kind, s, d, ref)
        checked += 1
    assert checked > 200


@pytest.mark.parametrize("kind", list(SHAPES))
def test_sphere_distance_matches_coal(kind):
    coal = pytest.importorskip("coal")
    pose = torch.tensor([0.1, 0.0, -0.05, 0.9, 0.1, -0.3, 0.2], dtype=torch.float64)
    pose[3:] /= pose[3:].norm()
    w = _world_with(kind, pose)
    spheres = _random_outside_spheres(100, seed=5)
    ours = sphere_signed_distance(w, spheres[None, None])[0, 0]
    name, args = SHAPES[kind][2]
    rot = coal.Quaternion(*pose[3:].tolist()).toRotationMatrix()
    tf = coal.Transform3s(rot, pose[:3].numpy())
    for s, d in zip(spheres.numpy(), ours.tolist()):
        req, res = coal.DistanceRequest(), coal.DistanceResult()
        ref = coal.distance(getattr(coal, name)(*args), tf, coal.Sphere(s[3]), coal.Transform3s(np.eye(3), s[:3]),
                            req, res)
        # Coal reports penetration as a negative distance for these convex pairs.
        assert d == pytest.approx(ref, abs=1e-6), (kind, s, d, ref)


def test_inside_branch_closed_forms():
    kinds = torch.tensor([PrimitiveKind.CUBOID, PrimitiveKind.SPHERE, PrimitiveKind.CAPSULE, PrimitiveKind.CYLINDER])
    params = torch.tensor([primitive_params(PrimitiveKind.CUBOID, dims=[0.2, 0.4, 0.1]),
                           primitive_params(PrimitiveKind.SPHERE, radius=0.12),
                           primitive_params(PrimitiveKind.CAPSULE, radius=0.05, base=[0, 0, -0.15], tip=[0, 0, 0.15]),
                           primitive_params(PrimitiveKind.CYLINDER, radius=0.1, height=0.25)], dtype=torch.float64)
    points = torch.tensor([[0.0, 0.15, 0.0], [0.02, 0.0, 0.0], [0.01, 0.0, 0.1], [0.0, 0.0, 0.1]], dtype=torch.float64)
    # Depths: box to its y face 0.05; ball 0.12 - 0.02; capsule r - 0.01; cylinder to its cap 0.025.
    expected = torch.tensor([-0.05, -0.10, -0.04, -0.025], dtype=torch.float64)
    torch.testing.assert_close(primitive_signed_distance(points, kinds, params), expected, atol=1e-12, rtol=0)


def _support(kind, p, n):
    """max over the true primitive of n . x, for unit normals n (F, 3)."""
    if kind == PrimitiveKind.CUBOID:
        return (np.abs(n) * p[:3]).sum(1)
    if kind == PrimitiveKind.SPHERE:
        return np.full(len(n), p[0])
    if kind == PrimitiveKind.CAPSULE:
        return p[0] + np.maximum(n @ p[1:4], n @ p[4:7])
    return np.abs(n[:, 2]) * p[1] + p[0] * np.linalg.norm(n[:, :2], axis=1)


@pytest.mark.parametrize("kind", list(PrimitiveKind))
@pytest.mark.parametrize("tol", [1e-3, 1e-4])
def test_tessellation_contains_the_shape_within_tol(kind, tol):
    name = kind.name.lower()
    p = np.asarray(primitive_params(kind, **SHAPES[name][0]))
    v, f, deviation = tessellate(kind, p, tol)
    tri = v[f]
    n = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    n /= np.linalg.norm(n, axis=1, keepdims=True)
    offset = (n * tri[:, 0]).sum(1)
    outward = np.sign(offset)  # convex and centred: the origin is inside
    n, offset = n * outward[:, None], offset * outward
    # Contains the shape: no part of it beyond any face plane.
    assert (_support(kind, p, n) <= offset + 1e-12).all()
    # Within tol: every vertex (the farthest points of a convex polytope) is at most tol outside.
    kinds = torch.full((len(v),), int(kind))
    sd = primitive_signed_distance(torch.from_numpy(v), kinds, torch.from_numpy(p).expand(len(v), 7))
    assert float(sd.min()) >= -1e-12 and float(sd.max()) <= deviation + 1e-12 and deviation <= tol


def test_mesh_backends_see_the_tessellation_conservatively():
    from contactnet.planning import CollisionChecker

    w = CollisionWorld(max_obstacles=2, num_points=32, dtype=torch.float64, tessellation_tol=1e-3)
    w.add_mesh("probe", (np.array([[0, 0, 0], [0.02, 0, 0], [0, 0.02, 0], [0, 0, 0.02]], dtype=np.float64),
                         np.array([[0, 2, 1], [0, 1, 3], [0, 3, 2], [1, 2, 3]], dtype=np.int32)))
    w.add_cuboid("box", [0.2, 0.2, 0.2])
    w.add_sphere("ball", 0.1, [0, 1, 0, 1, 0, 0, 0])
    checker = CollisionChecker(w, backend="exact")
    # The probe's vertex nearest each obstacle is at -0.01 on every axis from its frame origin (AABB centre).
    at_box = torch.tensor([[0.2 + 0.01, 0.01, 0.01, 1, 0, 0, 0]], dtype=torch.float64)
    per = checker.world_query("probe", at_box).per_obstacle[0]
    assert float(per[0]) == pytest.approx(0.1, abs=1e-9)  # a cuboid's mesh view is exact
    at_ball = torch.tensor([[0.15 + 0.01, 1.01, 0.01, 1, 0, 0, 0]], dtype=torch.float64)
    d = float(checker.world_query("probe", at_ball).per_obstacle[0, 1])
    assert 0.05 - 1e-3 <= d <= 0.05  # never farther than the true shape, at most tol nearer


def test_capsule_off_centre_segment_is_moved_into_the_pose():
    """A capsule given with base/tip away from its frame origin, rotated, equals fcl's centred
    capsule placed at the segment's midpoint with the axis rotated onto base -> tip."""
    q = torch.tensor([0.8, 0.2, -0.5, 0.26], dtype=torch.float64)
    pose = torch.cat([torch.tensor([0.1, -0.2, 0.05], dtype=torch.float64), q / q.norm()])
    w = CollisionWorld(max_obstacles=1, num_points=32, dtype=torch.float64)
    base, tip = np.array([0.1, 0.05, 0.0]), np.array([0.1, 0.05, 0.3])  # along the frame's z, shifted
    w.add_capsule("cap", 0.04, base, tip, pose)
    spheres = _random_outside_spheres(200, seed=6)
    ours = sphere_signed_distance(w, spheres[None, None])[0, 0]
    midpoint = torch.tensor([0.1, 0.05, 0.15], dtype=torch.float64)
    centre = (pose[:3] + quaternion_to_matrix(pose[3:]) @ midpoint).numpy()
    obstacle = fcl.CollisionObject(fcl.Capsule(0.04, 0.3), fcl.Transform(pose[3:].numpy(), centre))
    for s, d in zip(spheres.numpy(), ours.tolist()):
        if d > 1e-3:
            ref = fcl.distance(obstacle, fcl.CollisionObject(fcl.Sphere(s[3]), fcl.Transform(s[:3])),
                               fcl.DistanceRequest(), fcl.DistanceResult())
            assert d == pytest.approx(ref, abs=1e-6)

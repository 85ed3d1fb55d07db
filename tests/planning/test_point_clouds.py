"""Point-cloud obstacles: depth image -> cloud round trip on a rendered scene (points on the true
surface, distances and normals), the mesh view the other backends see, the inputs users already
have, `describe` and `save_world_as_mesh`."""

import numpy as np
import pytest
import torch
import trimesh

from contactnet.data.procedural import make_object
from contactnet.geometry.depth_views import look_at, pinhole_intrinsics, render_depth
from contactnet.geometry.poses import matrix_to_pose
from contactnet.planning import CollisionChecker, CollisionWorld, sphere_signed_distance
from contactnet.planning.primitives import PrimitiveKind, primitive_signed_distance

BOX = np.array([0.3, 0.2, 0.1])  # a table-top block centred at the origin


@pytest.fixture(scope="module")
def scene():
    tm = trimesh.creation.box(extents=BOX)
    camera = look_at([0.6, -0.5, 0.5], [0, 0, 0])
    k = pinhole_intrinsics(160, 128, 200.0)  # pixels of about 4.6 mm on the block
    depth = render_depth(np.asarray(tm.vertices), np.asarray(tm.faces), k, camera, 160, 128)
    w = CollisionWorld(max_obstacles=2, num_points=256, dtype=torch.float64)
    # The camera pose as a (7,) [x, y, z, qw, qx, qy, qz] pose, float32, as a driver would give it.
    pose7 = matrix_to_pose(torch.from_numpy(camera)).float()
    w.add_point_cloud("seen", depth=depth, intrinsics=k, camera_pose=pose7, point_radius=0.004)
    return w, camera


def _box_distance(x):
    params = torch.tensor([*(BOX / 2), 0, 0, 0, 0], dtype=torch.float64).expand(len(x), 7)
    return primitive_signed_distance(x, torch.zeros(len(x), dtype=torch.int64), params)


def test_depth_round_trip_lands_on_the_surface(scene):
    w, camera = scene
    cloud, radius = w._clouds[0]
    pose = w.tables["point_cloud"].pose[0, 0]
    world_points = cloud + pose[:3]
    assert cloud.shape[0] > 500 and radius == 0.004
    assert float(_box_distance(world_points).abs().max()) < 1e-5  # float32 ray casting
    # Only the three faces the camera sees (x > 0, y < 0, z > 0) returned points.
    on = (world_points.abs() > torch.from_numpy(BOX / 2) - 1e-5)
    assert not bool((on[:, 0] & (world_points[:, 0] < 0)).any())


def test_cloud_distances_and_normals(scene):
    w, camera = scene
    g = torch.Generator().manual_seed(0)
    # Query spheres on the camera's side of the block, 2-8 cm off its visible faces.
    direction = torch.tensor([0.6, -0.5, 0.5], dtype=torch.float64)
    x = (torch.rand(200, 3, generator=g, dtype=torch.float64) - 0.5) * torch.from_numpy(BOX) \
        + direction / direction.norm() * (0.12 + 0.06 * torch.rand(200, 1, generator=g, dtype=torch.float64))
    # Keep those whose nearest block point is on a face the camera saw (never beyond an unseen face).
    half = torch.from_numpy(BOX / 2)
    x = x[(x[:, 0] > -half[0]) & (x[:, 1] < half[1]) & (x[:, 2] > -half[2]) & (_box_distance(x) > 0.01)]
    assert len(x) > 100
    spheres = torch.cat([x, torch.full((len(x), 1), 0.01, dtype=torch.float64)], 1)
    d = sphere_signed_distance(w, spheres[None, None])[0, 0]
    truth = _box_distance(x) - 0.004 - 0.01
    # Never nearer than the true surface; farther by at most the sampling gap (pixels of < 7 mm
    # at the grazing angles here).
    assert float((d - truth).min()) > -1e-5 and float((d - truth).max()) < 7e-3
    # Normals (the learned models' input): those of the faces the points lie on, towards the camera.
    mid = w.mesh_names.index("_point_cloud/seen")
    pts = w.points[mid].double() + w.mesh_offset("_point_cloud/seen")
    normals = w.normals[mid].double()
    face = torch.from_numpy(BOX / 2) - pts.abs()
    axis = face.argmin(1)
    expected = torch.zeros_like(pts)
    expected[torch.arange(len(pts)), axis] = torch.sign(pts[torch.arange(len(pts)), axis])
    cos = (normals * expected).sum(1)
    # Points within the neighbourhood radius of an edge get blended normals; the rest are exact.
    assert float(cos.median()) > 0.999 and float((cos > 0.9).double().mean()) > 0.85
    assert float((cos > 0).double().mean()) > 0.98  # oriented towards the camera


def test_mesh_view_contains_the_cloud_for_the_exact_backend(scene):
    w, _ = scene
    w.add_mesh("probe", trimesh.creation.box(extents=[0.02, 0.02, 0.02]))
    checker = CollisionChecker(w, backend="exact")
    inside = torch.tensor([[BOX[0] / 2 + 0.005, 0.0, 0.0, 1, 0, 0, 0]], dtype=torch.float64)  # touches the x face
    far = torch.tensor([[BOX[0] / 2 + 0.03, 0.0, 0.0, 1, 0, 0, 0]], dtype=torch.float64)
    assert bool(checker.world_query("probe", inside).colliding)
    assert not bool(checker.world_query("probe", far).colliding)


def test_user_inputs_describe_and_save(tmp_path):
    v, f = make_object("l_bracket", 0)
    path = tmp_path / "bracket.obj"
    trimesh.Trimesh(v, f, process=False).export(path)
    w = CollisionWorld(num_envs=2, max_obstacles=4, num_points=32)
    w.add_mesh("from_trimesh", trimesh.Trimesh(v, f, process=False))
    w.add_mesh("torch_int32", (torch.from_numpy(v).float(), torch.from_numpy(f).int()))
    w.add_mesh("numpy_int64", (v, f.astype(np.int64)))
    w.add_mesh("from_path", path)
    lib = w.library
    for i in range(1, 4):
        torch.testing.assert_close(lib[i].vertices, lib[0].vertices, atol=1e-6, rtol=0)
    w.add_obstacle("m", "from_path", np.array([0.5, 0, 0, 1, 0, 0, 0], dtype=np.float64))
    w.add_cuboid("table", [1.0, 1.0, 0.05], torch.tensor([0, 0, -0.1, 1, 0, 0, 0], dtype=torch.float64))
    w.add_capsule("pole", 0.02, [0, 0, 0], [0, 0, 0.4], env=1)
    text = w.describe()
    for needle in ("2 environment(s)", "primitive slots: [1, 1] used of 4", "mesh slots: [1, 0] used of 4",
                   "table: cuboid, env 0", "pole: capsule, env 1", "m: mesh, env 0", "memory:"):
        assert needle in text, needle
    out = tmp_path / "world.obj"
    w.save_world_as_mesh(out)
    saved = trimesh.load(out, force="mesh", process=False)
    assert len(saved.faces) == len(f) + 12
    half = (v.max(0) - v.min(0)) / 2  # the bracket, recentred, at x = 0.5
    lower = np.minimum([-0.5, -0.5, -0.125], [0.5, 0, 0] - half)
    upper = np.maximum([0.5, 0.5, -0.075], [0.5, 0, 0] + half)
    np.testing.assert_allclose(saved.bounds, [lower, upper], atol=1e-5)
    with pytest.raises(ValueError, match="mesh: expected a Mesh, a trimesh.Trimesh"):
        w.add_mesh("bad", 3)
    with pytest.raises(ValueError, match="points: expected a \\(P, 3\\) array"):
        w.add_point_cloud("c", np.zeros((4, 2)))
    with pytest.raises(ValueError, match="camera_pose: expected a unit quaternion"):
        w.add_point_cloud("c", depth=np.ones((4, 4)), intrinsics=np.eye(3), camera_pose=[0, 0, 0, 0.5, 0, 0, 0])
    assert PrimitiveKind.CUBOID == 0


def test_a_completed_view_feeds_the_learned_models_and_boxes_their_grid(tmp_path):
    from contactnet.models.completion import FORMAT, ViewCompletion
    from contactnet.planning.point_clouds import completed_samples

    tm = trimesh.creation.box(extents=BOX)
    camera = look_at([0.6, -0.5, 0.5], [0, 0, 0])
    k = pinhole_intrinsics(160, 128, 200.0)
    depth = render_depth(np.asarray(tm.vertices), np.asarray(tm.faces), k, camera, 160, 128)
    torch.manual_seed(0)
    net = ViewCompletion(predicted=128, inputs=64, width=32)
    path = tmp_path / "completion.pt"
    torch.save({"format": FORMAT, "config": net.config, "state_dict": net.state_dict()}, path)
    plain = CollisionWorld(max_obstacles=1, num_points=256)
    plain.add_point_cloud("seen", depth=depth, intrinsics=k, camera_pose=camera)
    done = CollisionWorld(max_obstacles=1, num_points=256)
    done.add_point_cloud("seen", depth=depth, intrinsics=k, camera_pose=camera, completion=str(path))
    offset = done._offsets[0].numpy().astype(np.float32)
    expected, expected_normals = completed_samples(net, plain.points[0].numpy() + offset, plain.normals[0].numpy())
    np.testing.assert_allclose(done.points[0].numpy(), expected - offset, atol=1e-6)
    np.testing.assert_allclose(done.normals[0].numpy(), expected_normals, atol=1e-6)
    # The grid's box holds the predicted points as well as the visible ones.
    assert (done.aabb[0, 0] <= done.points[0].amin(0)).all() and (done.aabb[0, 1] >= done.points[0].amax(0)).all()
    assert (done.aabb[0, 0] <= plain.aabb[0, 0]).all() and (done.aabb[0, 1] >= plain.aabb[0, 1]).all()
    with pytest.raises(ValueError, match="completion"):
        done.add_point_cloud("bare", points=np.random.rand(50, 3), completion=str(path))

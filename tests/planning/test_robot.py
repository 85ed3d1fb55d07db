"""Robots from URDF: forward kinematics against an independent numpy composition, collision bodies
against the URDF geometry built with trimesh, joint-space gradients against finite differences,
self-collision pairs (adjacency, ignore list) against python-fcl, attached objects, bad inputs."""

import numpy as np
import pytest
import torch
import trimesh

from contactnet.planning import CollisionChecker, CollisionWorld
from contactnet.planning.robot import Robot, RobotChecker
from contactnet.planning.urdf import load_urdf
from tests.planning.robots import (PACKAGES, URDF, fcl_collide, joint_space_fd, placed_vertices,
                                   random_q, three_link_world)
from tests.planning.scenes import tiny_net
from tests.planning.urdf_reference import link_transforms, origin


@pytest.fixture(scope="module")
def scene():
    return three_link_world()


def _same_points(a, b, atol=1e-6):
    """Every point of a has one of b within atol, and vice versa (sets, not order)."""
    d = np.linalg.norm(a[:, None] - b[None], axis=-1)
    return d.min(1).max() < atol and d.min(0).max() < atol


def test_fk_matches_numpy_composition(scene):
    world, robot = scene
    q = random_q(robot, 16, seed=1)
    t = robot.link_transforms(q)
    text = URDF.read_text()
    for k in range(len(q)):
        ref = link_transforms(text, dict(zip(robot.joint_names, q[k].tolist())))
        assert set(ref) == set(robot.link_names)
        for link, frame in robot.chain.frame_to_idx.items():
            np.testing.assert_allclose(t[k, frame].numpy(), ref[link], atol=2e-7)


def test_bodies_match_urdf_geometry_built_with_trimesh(scene):
    world, robot = scene
    q = random_q(robot, 4, seed=2)
    for k in range(len(q)):
        ref = link_transforms(URDF.read_text(), dict(zip(robot.joint_names, q[k].tolist())))
        base = trimesh.creation.box(extents=[0.2, 0.2, 0.1]).apply_transform(ref["base"] @ origin_xyz(0, 0, 0.05))
        finger = trimesh.creation.box(extents=[0.02, 0.02, 0.06]).apply_transform(
            ref["finger"] @ origin_xyz(0, 0, 0.03))
        bar = trimesh.creation.box(extents=[0.3, 0.04, 0.04]).apply_transform(
            ref["fore"] @ _origin(xyz="0.15 0 0", rpy="0.3 0 0"))
        tip = trimesh.load(PACKAGES["test_robot"] / "tip.obj", process=False)
        tip.apply_scale(0.01)
        tip.apply_transform(ref["fore"] @ _origin(xyz="0.33 0 0", rpy="0 0 0.5"))
        assert _same_points(placed_vertices(robot, "base", q[k]), base.vertices)
        assert _same_points(placed_vertices(robot, "finger", q[k]), finger.vertices)
        assert _same_points(placed_vertices(robot, "fore", q[k]), np.concatenate([bar.vertices, tip.vertices]))
        # The cylinder: a prism around the upper arm's x axis from 0 to 25 cm whose corners lie
        # within the tessellation tolerance (1 mm) outside the 3 cm radius (or a cap's centre, on
        # the axis), and whose sides touch the true cylinder (edge midpoints at 3 cm).
        up = placed_vertices(robot, "upper", q[k])
        local = (up - ref["upper"][:3, 3]) @ ref["upper"][:3, :3]
        radius = np.linalg.norm(local[:, 1:], axis=1)
        rim = radius > 0.01
        assert radius[~rim].max() < 1e-6 and 0.03 < radius[rim].min() and radius[rim].max() < 0.031
        corners = local[rim & (local[:, 0] > 0.125)][:, 1:]
        angles = np.sort(np.arctan2(corners[:, 1], corners[:, 0]))
        assert np.allclose(radius[rim].max() * np.cos(np.diff(angles) / 2), 0.03, atol=1e-6)
        assert local[:, 0].min() > -1e-6 and local[:, 0].max() < 0.25 + 1e-6


def origin_xyz(x, y, z):
    t = np.eye(4)
    t[:3, 3] = [x, y, z]
    return t


def _origin(xyz, rpy):
    import xml.etree.ElementTree as ET

    return origin(ET.Element("origin", xyz=xyz, rpy=rpy))


def test_package_paths_resolve_from_folders_and_ancestors(tmp_path):
    # A package folder named like the package, found through package_dirs as a list.
    pkg = tmp_path / "test_robot"
    pkg.mkdir()
    (pkg / "tip.obj").write_text((PACKAGES["test_robot"] / "tip.obj").read_text())
    model = load_urdf(URDF, package_dirs=[tmp_path])
    assert set(model.collision) == {"base", "upper", "fore", "finger"}
    with pytest.raises(FileNotFoundError, match="test_robot"):
        load_urdf(URDF.read_text())


def _near_configurations(rc, n, seed):
    """Configurations with some cost (within eta of an obstacle or a self pair) but no contact, so the
    cost is smooth there."""
    q = random_q(rc.robot, 600, seed=seed)
    cost = rc.cost(q[None])[0]
    free = ~rc.query(q[None]).colliding[0]
    keep = (cost > 1e-6) & free
    assert keep.sum() >= n
    return q[keep][:n]


def test_exact_robot_cost_gradient_matches_finite_differences(scene):
    world, robot = scene
    rc = RobotChecker(robot, CollisionChecker(world, "exact", eta=0.05))
    q = _near_configurations(rc, 6, seed=3)[None]
    cost, grad = rc.robot_cost(q)
    assert cost.shape == (1, 6) and grad.shape == (1, 6, robot.dof)
    assert bool((grad.abs().sum(-1) > 0).all())
    fd = joint_space_fd(lambda x: rc.cost(x), q)
    torch.testing.assert_close(grad, fd, atol=2e-6, rtol=1e-4)


def test_exact_self_cost_gradient_matches_finite_differences():
    world, robot = three_link_world(obstacles=False)
    rc = RobotChecker(robot, CollisionChecker(world, "exact", eta=0.08), world_collision=False)
    q = _near_configurations(rc, 4, seed=4)[None]
    _, grad = rc.robot_cost(q)
    torch.testing.assert_close(grad, joint_space_fd(lambda x: rc.cost(x), q), atol=2e-6, rtol=1e-4)


def test_learned_robot_cost_gradient_matches_finite_differences():
    # Global-OCN's cost is smooth in the pose between the kinks of its ReLU MLP, which its unitless
    # placement inputs cross within a few mrad: central differences in float64 (net and world) with
    # a 1e-4 rad step. LOCC's cell selection (a hard mask) makes its cost piecewise smooth, so finite
    # differences across a switch mean nothing: LOCC is checked against its unchecked path below.
    world64, robot = three_link_world(dtype=torch.float64)
    rc = RobotChecker(robot, CollisionChecker(world64, "global_ocn", tiny_net("global_ocn").double()))
    q = random_q(robot, 5, seed=5)[None].double()
    cost, grad = rc.robot_cost(q)
    assert bool((cost > 0).all())  # softplus: never exactly 0
    fd = joint_space_fd(lambda x: rc.cost(x), q, h=1e-4)
    torch.testing.assert_close(grad, fd, atol=1e-9, rtol=1e-5)
    assert float(grad.abs().max()) > 1e-4
    world, robot = three_link_world(dtype=torch.float32)
    q = q.float()
    net = tiny_net("locc")
    rc = RobotChecker(robot, CollisionChecker(world, "locc", net))
    cost, grad = rc.robot_cost(q)
    # The unchecked hot path (validate=False) computes the same thing.
    fast = RobotChecker(robot, CollisionChecker(world, "locc", net, validate=False))
    torch.testing.assert_close(fast.robot_cost(q)[1], grad)


def test_self_pairs_follow_the_adjacency_rule():
    world, robot = three_link_world(obstacles=False)
    # finger's parent link `tool` has no geometry: its nearest collision ancestor is `fore`.
    assert robot.adjacent("fore", "finger") and robot.adjacent("base", "upper") and robot.adjacent("upper", "fore")
    assert not robot.adjacent("base", "fore")
    assert robot.self_pairs == [("base", "fore"), ("base", "finger"), ("upper", "finger")]
    robot.ignore("finger", "base")
    assert robot.self_pairs == [("base", "fore"), ("upper", "finger")]
    _, ignoring = three_link_world(obstacles=False, ignore=[("upper", "finger")])
    assert ignoring.self_pairs == [("base", "fore"), ("base", "finger")]


def test_self_collision_verdicts_match_fcl():
    world, robot = three_link_world(obstacles=False)
    rc = RobotChecker(robot, CollisionChecker(world, "exact"), world_collision=False)
    q = random_q(robot, 300, seed=6)
    # The elbow folded back (|angle| in [1.7, 2.5]) brings the forearm down onto the base.
    g = torch.Generator().manual_seed(0)
    q[:, 1] = torch.sign(q[:, 1]) * (1.7 + 0.8 * torch.rand(300, generator=g, dtype=torch.float64))
    got = rc.query(q[None]).self_colliding[0]
    assert got.any() and not got.all()
    meshes = {n: world.library[int(robot.body_mesh[i])] for i, n in enumerate(robot.body_names)}
    for k in range(len(q)):
        for p, (a, b) in enumerate(robot.self_pairs):
            expected = fcl_collide(placed_vertices(robot, a, q[k]), meshes[a].faces.numpy(),
                                   placed_vertices(robot, b, q[k]), meshes[b].faces.numpy())
            assert bool(got[k, p]) == expected, (k, a, b)


def test_world_verdicts_match_fcl(scene):
    world, robot = scene
    rc = RobotChecker(robot, CollisionChecker(world, "exact"), self_collision=False)
    q = random_q(robot, 120, seed=7)
    got = rc.query(q[None]).world_colliding[0]
    assert got.any()
    obstacles = [(world.library[int(world.obstacle_mesh[0, s])], world.obstacle_pose[0, s]) for s in range(2)]
    from contactnet.geometry.poses import transform_points

    for k in range(len(q)):
        for i, body in enumerate(robot.body_names):
            mesh = world.library[int(robot.body_mesh[i])]
            hits = [fcl_collide(placed_vertices(robot, body, q[k]), mesh.faces.numpy(),
                                transform_points(pose, m.vertices).numpy(), m.faces.numpy()) for m, pose in obstacles]
            assert bool(got[k, i]) == any(hits), (k, body)


def test_attached_object_follows_its_link_and_is_checked():
    world, robot = three_link_world()
    mug = trimesh.creation.cylinder(radius=0.04, height=0.1, sections=16)
    mug.apply_translation([0.3, 0.1, 0.2])  # off-centre: its frame is the one its vertices are given in
    pose = [0.0, 0.0, 0.08, 0.9238795, 0.0, 0.3826834, 0.0]  # 45 degrees about y
    robot.attach("mug", (mug.vertices, mug.faces), "finger", pose, ignore=["fore"])
    assert robot.body_names[-1] == "mug" and robot.body_links[-1] == "finger"
    assert ("base", "mug") in robot.self_pairs and ("upper", "mug") in robot.self_pairs
    assert not any("mug" in p and ("finger" in p or "fore" in p) for p in robot.self_pairs)
    q = random_q(robot, 5, seed=8)
    m = np.eye(4)
    m[:3, :3] = trimesh.transformations.quaternion_matrix(pose[3:])[:3, :3]
    m[:3, 3] = pose[:3]
    for k in range(len(q)):
        finger = link_transforms(URDF.read_text(), dict(zip(robot.joint_names, q[k].tolist())))["finger"]
        expected = trimesh.Trimesh(mug.vertices, mug.faces).apply_transform(finger @ m).vertices
        assert _same_points(placed_vertices(robot, "mug", q[k]), expected)
    # Checked against the world: somewhere the mug alone hits an obstacle.
    rc = RobotChecker(robot, CollisionChecker(world, "exact"), self_collision=False)
    hits = rc.query(random_q(robot, 200, seed=9)[None]).world_colliding[0]
    assert bool((hits[:, -1] & ~hits[:, :-1].any(-1)).any())
    robot.detach("mug")
    assert robot.body_names == ["base", "upper", "fore", "finger"]
    assert robot.self_pairs == [("base", "fore"), ("base", "finger"), ("upper", "finger")]


def test_environments_per_batch():
    world, robot = three_link_world(num_envs=2)
    rc = RobotChecker(robot, CollisionChecker(world, "exact"), self_collision=False)
    q = random_q(robot, 200, seed=10)
    both = q[None].expand(2, -1, -1)
    res = rc.query(both, env_idx=torch.tensor([0, 1]))
    assert res.colliding[0].any() and not res.colliding[1].any()  # environment 1 is empty
    cost = rc.cost(both, env_idx=torch.tensor([1, 0]))
    torch.testing.assert_close(cost[1], rc.cost(q[None])[0])
    assert bool((cost[0] == 0).all())


def test_numpy_and_list_joint_angles_are_taken_as_tensors(scene):
    world, robot = scene
    rc = RobotChecker(robot, CollisionChecker(world, "exact"))
    q = torch.linspace(-1, 1, 2 * 3 * robot.dof, dtype=world.dtype).reshape(2, 3, robot.dof)
    torch.testing.assert_close(rc.cost(q.numpy()), rc.cost(q))
    assert torch.equal(rc.query(q.tolist()).colliding, rc.query(q).colliding)
    for got, want in zip(rc.robot_cost(q.numpy()), rc.robot_cost(q)):
        torch.testing.assert_close(got, want)


def test_bad_inputs_raise_clear_errors(scene):
    world, robot = scene
    rc = RobotChecker(robot, CollisionChecker(world, "exact"))
    q = torch.zeros(1, 2, robot.dof, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"q: expected shape \(batch, horizon, 3\)"):
        rc.robot_cost(torch.zeros(1, 2, 4, dtype=torch.float64))
    with pytest.raises(ValueError, match="q: contains NaN"):
        rc.robot_cost(q.clone().index_fill_(2, torch.tensor([1]), float("nan")))
    with pytest.raises(ValueError, match="q: expected a float tensor"):
        rc.cost(torch.zeros(1, 2, 3, dtype=torch.int64))
    with pytest.raises(ValueError, match="link: unknown link 'hand'"):
        robot.attach("cup", (np.eye(3), [[0, 1, 2]]), "hand")
    with pytest.raises(ValueError, match="b: unknown link or body 'nope'"):
        robot.ignore("base", "nope")
    with pytest.raises(ValueError, match="ignore: unknown collision body"):
        robot.attach("cup", (np.eye(3), [[0, 1, 2]]), "fore", ignore=["nope"])
    with pytest.raises(ValueError, match=r"pose: expected a unit quaternion, got norm 2.*qw, qx, qy, qz"):
        robot.attach("cup", (np.eye(3), [[0, 1, 2]]), "fore", [0, 0, 0, 2, 0, 0, 0])
    with pytest.raises(ValueError, match="base_pose: expected a unit quaternion"):
        Robot(URDF, CollisionWorld(dtype=torch.float64), package_dirs=PACKAGES, base_pose=[0, 0, 0, 0, 0, 0.5, 0])
    with pytest.raises(ValueError, match="base_pose: contains NaN"):
        Robot(URDF, CollisionWorld(dtype=torch.float64), package_dirs=PACKAGES,
              base_pose=[float("nan"), 0, 0, 1, 0, 0, 0])
    empty, bare = three_link_world(obstacles=False)
    with pytest.raises(ValueError, match="world: has no obstacle"):
        RobotChecker(bare, CollisionChecker(empty, "exact")).robot_cost(q)
    # Self-collision only is fine on an empty world.
    RobotChecker(bare, CollisionChecker(empty, "exact"), world_collision=False).robot_cost(q)
    with pytest.raises(ValueError, match="checker: checks a different CollisionWorld"):
        RobotChecker(robot, CollisionChecker(empty, "exact"))
    with pytest.raises(ValueError, match="env_idx: expected an int or shape"):
        rc.cost(q, env_idx=torch.tensor([0, 0]))
    with pytest.raises(ValueError, match="urdf: no link has <collision>"):
        Robot('<robot name="r"><link name="a"/></robot>', CollisionWorld())
    with pytest.raises(ValueError, match="unsupported collision shape <capsule>"):
        load_urdf('<robot name="r"><link name="a"><collision><geometry><capsule radius="1" length="1"/>'
                  '</geometry></collision></link></robot>')


def test_learned_hot_path_traces_without_graph_breaks():
    # fullgraph=True fails on any graph break: a host sync (.item(), nonzero, a Python branch on a
    # tensor) would be one. FK, the body gather, the world slots and the self pairs are all dense.
    world, robot = three_link_world(dtype=torch.float32)
    rc = RobotChecker(robot, CollisionChecker(world, "locc", tiny_net("locc"), validate=False))
    q = random_q(robot, 6, seed=1).reshape(2, 3, 3)
    env = torch.zeros(2, dtype=torch.long)
    compiled = torch.compile(lambda x: rc.cost(x, env), backend="eager", fullgraph=True)
    x = q.clone().requires_grad_()
    cost = compiled(x)
    (grad,) = torch.autograd.grad(cost.sum(), x)
    eager_cost, eager_grad = rc.robot_cost(q, env)
    torch.testing.assert_close(cost.detach(), eager_cost)
    torch.testing.assert_close(grad, eager_grad)


# ---- <mimic> joints ---------------------------------------------------------------------------------
MIMIC_URDF = URDF.parent / "mimic_gripper.urdf"


def _mimic_world(obstacle: bool = True):
    """The mimic gripper, with (obstacle) a post beside the fingers' tips (y in [-0.095, -0.075], z
    in [0.09, 0.2]): finger_b, at y = -0.03 - 1.5 finger_a + 0.01, comes within 3 cm of it for
    finger_a in [0.015, 0.025]; finger_a, the palm and the base stay farther."""
    world = CollisionWorld(max_obstacles=2, dtype=torch.float64, num_points=64)
    robot = Robot(MIMIC_URDF, world)
    if obstacle:
        world.add_cuboid("post", [0.03, 0.02, 0.11], [0.0, -0.085, 0.145, 1, 0, 0, 0])
    return world, robot


def test_mimic_joints_are_parsed_and_composed():
    model = load_urdf(MIMIC_URDF)
    assert model.mimic == {"finger_b_joint": ("finger_a_joint", -1.5, 0.01)}
    chained = MIMIC_URDF.read_text().replace(
        '<link name="finger_b">', '<link name="thumb"/><link name="finger_b">').replace(
        "</robot>", '<joint name="thumb_joint" type="prismatic"><parent link="palm"/><child link="thumb"/>'
                    '<axis xyz="1 0 0"/><limit lower="0" upper="1" effort="1" velocity="1"/>'
                    '<mimic joint="finger_b_joint" multiplier="2" offset="0.5"/></joint></robot>')
    # thumb = 2 * (-1.5 a + 0.01) + 0.5 = -3 a + 0.52
    assert load_urdf(chained).mimic["thumb_joint"] == pytest.approx(("finger_a_joint", -3.0, 0.52))
    with pytest.raises(ValueError, match="finger_b_joint' mimics 'nope', which is not a movable joint"):
        load_urdf(MIMIC_URDF.read_text().replace('mimic joint="finger_a_joint"', 'mimic joint="nope"'))
    looped = chained.replace('<mimic joint="finger_a_joint"', '<mimic joint="thumb_joint"')
    with pytest.raises(ValueError, match="<mimic> joints form a loop"):
        load_urdf(looped)


def test_mimic_follower_tracks_its_leader():
    world, robot = _mimic_world(obstacle=False)
    assert robot.joint_names == ["wrist", "finger_a_joint"] and robot.dof == 2
    assert robot.full_joint_names == ["wrist", "finger_a_joint", "finger_b_joint"]
    torch.testing.assert_close(robot.joint_limits, torch.tensor([[-1.5, 1.5], [0.0, 0.04]], dtype=torch.float64))
    q = random_q(robot, 6, seed=11)
    torch.testing.assert_close(robot.full_q(q)[:, 2], -1.5 * q[:, 1] + 0.01)
    t = robot.link_transforms(q)
    text = MIMIC_URDF.read_text()
    for k in range(len(q)):
        ref = link_transforms(text, dict(zip(robot.joint_names, q[k].tolist())))  # reads <mimic> itself
        for link, frame in robot.chain.frame_to_idx.items():
            np.testing.assert_allclose(t[k, frame].numpy(), ref[link], atol=1e-12)


def test_mimic_cost_gradient_reaches_the_leader():
    # Only finger_b (the follower) comes near the post, so d cost / d finger_a is the follower's
    # contribution carried back through the multiplier: it must match finite differences.
    world, robot = _mimic_world()
    rc = RobotChecker(robot, CollisionChecker(world, "exact", eta=0.03), self_collision=False)
    q = torch.tensor([[[0.1, 0.015], [-0.05, 0.02], [0.2, 0.025]]], dtype=torch.float64)
    world_cost, _ = rc.body_costs(q)
    follower = robot.body_names.index("finger_b")
    assert bool((world_cost[..., follower] > 0).all())
    assert bool((world_cost.sum(-1) == world_cost[..., follower]).all())  # nothing else is near the post
    assert not bool(rc.query(q).colliding.any())
    cost, grad = rc.robot_cost(q)
    # Opening finger_a moves finger_b (multiplier -1.5) towards the post: the cost grows with it.
    assert bool((grad[..., 1] > 0).all())
    torch.testing.assert_close(grad, joint_space_fd(lambda x: rc.cost(x), q), atol=2e-6, rtol=1e-4)


def test_wrong_dof_names_the_independent_joints_and_the_mimic_rule():
    world, robot = _mimic_world()
    rc = RobotChecker(robot, CollisionChecker(world, "exact"))
    with pytest.raises(ValueError, match=r"q: expected shape \(batch, horizon, 2\) with the joints \['wrist', "
                                         r"'finger_a_joint'\], got \(1, 1, 3\) \(mimic joints are not in q; "
                                         r"they follow: finger_b_joint = -1.5 \* finger_a_joint \+ 0.01\)"):
        rc.robot_cost(torch.zeros(1, 1, 3, dtype=torch.float64))

"""Swept collision between waypoints: the conservative-advancement verdict catches a thin wall crossed
between two free waypoints, never calls free a segment that dense sampling finds colliding, rests on
a motion bound that holds; the speed-weighted cost integrates along the path."""

import pytest
import torch
import trimesh

from contactnet.geometry.poses import transform_points
from contactnet.planning import CollisionChecker
from contactnet.planning.robot import RobotChecker
from contactnet.planning.swept import motion_bounds, swept_check, swept_cost
from tests.planning.robots import random_q, three_link_world


def _wall_scene(thickness=0.004, kind="mesh"):
    """The test arm and a thin wall in the plane y = 0 in front of it (x in [0.2, 0.5]): the upper
    arm points at yaw 0.2 + q_shoulder, so it lies in the wall's plane at q_shoulder = -0.2. The
    wall is a mesh obstacle, or (kind "cuboid") a cuboid primitive."""
    world, robot = three_link_world(obstacles=False)
    pose = [0.35, 0.0, 0.15, 1, 0, 0, 0]
    if kind == "cuboid":
        world.add_cuboid("wall", [0.3, thickness, 0.2], pose)
        return world, robot
    wall = trimesh.creation.box(extents=[0.3, thickness, 0.2])
    world.add_mesh("wall", (wall.vertices, wall.faces))
    world.add_obstacle("wall", "wall", pose)
    return world, robot


@pytest.mark.parametrize("kind", ["mesh", "cuboid"])
def test_thin_wall_crossed_between_free_waypoints_is_caught(kind):
    world, robot = _wall_scene(kind=kind)
    rc = RobotChecker(robot, CollisionChecker(world, "exact"))
    q = torch.tensor([[[-0.7, 0.0, 0.0], [0.3, 0.0, 0.0], [1.5, 0.0, 0.0]]], dtype=torch.float64)
    assert not rc.query(q).colliding.any()  # every waypoint is free
    # The crossing is real: dense samples of the first segment hit the wall.
    t = torch.linspace(0, 1, 201, dtype=torch.float64)[:, None]
    dense = q[0, 0] + t * (q[0, 1] - q[0, 0])
    assert rc.query(dense[None]).colliding.any()
    res = swept_check(rc, q)
    assert res.colliding.tolist() == [[True, False]]
    # Contact where the arm's leading side meets the wall, well inside the segment (the plane at
    # q = -0.2 is halfway; the 3 cm arm radius at up to 0.6 m reach touches it a little earlier).
    assert 0.3 < float(res.time[0, 0]) < 0.5 and torch.isnan(res.time[0, 1])
    # A sampled check with coarse sub-steps misses it: that is why the verdict is swept.
    coarse = q[0, 0] + torch.linspace(0, 1, 4, dtype=torch.float64)[:, None] * (q[0, 1] - q[0, 0])
    assert not rc.query(coarse[None]).colliding.any()


def test_swept_verdict_is_conservative_against_dense_sampling():
    world, robot = three_link_world()
    rc = RobotChecker(robot, CollisionChecker(world, "exact"))
    a, b = random_q(robot, 24, seed=11), random_q(robot, 24, seed=12)
    b = a + 0.35 * (b - a)  # segments of moderate length: a mix of free and colliding ones
    res = swept_check(rc, torch.stack([a, b], 1))
    t = torch.linspace(0, 1, 121, dtype=torch.float64)
    dense = a[:, None] + t[None, :, None] * (b - a)[:, None]
    sampled = rc.query(dense).colliding.any(1)
    assert sampled.any() and (~res.colliding[:, 0]).any()
    assert not bool((sampled & ~res.colliding[:, 0]).any())  # never a miss


def test_motion_bound_holds():
    world, robot = three_link_world()
    robot.attach("rod", (trimesh.creation.box(extents=[0.2, 0.01, 0.01]).vertices,
                         trimesh.creation.box(extents=[0.2, 0.01, 0.01]).faces), "finger",
                 [0.1, 0.0, 0.05, 1, 0, 0, 0])
    a, b = random_q(robot, 32, seed=13), random_q(robot, 32, seed=14)
    mu = motion_bounds(robot, a, b)  # (32, L)
    t = torch.linspace(0, 1, 201, dtype=torch.float64)
    qs = a[:, None] + t[None, :, None] * (b - a)[:, None]
    poses = robot.body_poses(qs)  # (32, 201, L, 7)
    for i in range(len(robot.body_names)):
        v = robot.world.library[int(robot.body_mesh[i])].vertices.double()
        x = transform_points(poses[:, :, i, None, :], v)  # (32, 201, V, 3)
        speed = (x[:, 1:] - x[:, :-1]).norm(dim=-1).amax((1, 2)) / (t[1] - t[0])
        assert bool((speed <= mu[:, i] * (1 + 1e-9)).all()), robot.body_names[i]
        assert bool((speed >= 0.2 * mu[:, i]).any())  # and is not absurdly loose


def test_swept_cost_integrates_along_the_path():
    world, robot = _wall_scene()
    rc = RobotChecker(robot, CollisionChecker(world, "exact", eta=0.02))
    q = torch.tensor([[[-0.7, 0.0, 0.0], [0.3, 0.0, 0.0]]], dtype=torch.float64, requires_grad=True)
    assert float(rc.cost(q.detach()).sum()) == 0  # nothing at the waypoints
    cost = swept_cost(rc, q, substeps=64)
    assert float(cost.detach()) > 0
    (grad,) = torch.autograd.grad(cost.sum(), q)
    assert bool(torch.isfinite(grad).all()) and float(grad.abs().sum()) > 0
    # An integral along the path: finer sampling converges to the same value (a per-sample sum
    # would double), and a segment costs the sum of its halves (same sample points).
    finer = swept_cost(rc, q.detach(), substeps=128)
    torch.testing.assert_close(finer, cost.detach(), rtol=0.05, atol=0)
    mid = q.detach().mean(1, keepdim=True)
    halves = swept_cost(rc, torch.cat([q.detach()[:, :1], mid, q.detach()[:, 1:]], 1), substeps=32)
    torch.testing.assert_close(halves.sum(), cost.detach().sum(), rtol=1e-12, atol=0)


def test_swept_bad_inputs():
    world, robot = _wall_scene()
    rc = RobotChecker(robot, CollisionChecker(world, "exact"))
    with pytest.raises(ValueError, match=r"q: expected shape \(batch, horizon >= 2, 3\)"):
        swept_check(rc, torch.zeros(1, 1, 3, dtype=torch.float64))
    with pytest.raises(ValueError, match="clearance: expected a distance > 0"):
        swept_check(rc, torch.zeros(1, 2, 3, dtype=torch.float64), clearance=0)
    with pytest.raises(ValueError, match="q: contains NaN"):
        swept_check(rc, torch.full((1, 2, 3), float("nan"), dtype=torch.float64))
    empty, bare = three_link_world(obstacles=False)
    with pytest.raises(ValueError, match="world: has no obstacle"):
        swept_check(RobotChecker(bare, CollisionChecker(empty, "exact")), torch.zeros(1, 2, 3, dtype=torch.float64))
    bare.ignore("base", "fore")
    bare.ignore("base", "finger")
    bare.ignore("upper", "finger")  # nothing left to check: every segment is free
    res = swept_check(RobotChecker(bare, CollisionChecker(empty, "exact"), world_collision=False),
                      torch.zeros(2, 3, 3, dtype=torch.float64))
    assert res.colliding.shape == (2, 2) and not res.colliding.any()
    with pytest.raises(ValueError, match="substeps: expected an int >= 1"):
        swept_cost(rc, torch.zeros(1, 2, 3, dtype=torch.float64), substeps=0)


def test_swept_check_warns_that_voxel_grids_are_not_in_its_verdict():
    import warnings

    from contactnet.planning import VoxelGrid

    world, robot = _wall_scene()
    rc = RobotChecker(robot, CollisionChecker(world, "exact"))
    q = torch.zeros(1, 2, 3, dtype=torch.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no grid: no warning
        swept_check(rc, q)
    world.add_voxel_grid("esdf", VoxelGrid(torch.ones(2, 2, 2, dtype=torch.float64), [5, 5, 5], 0.1))
    with pytest.warns(UserWarning, match="voxel grids are not part of the swept verdict"):
        swept_check(rc, q)
    world.remove_obstacle("esdf")
    assert world.grid_slots == 0

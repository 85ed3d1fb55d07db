import numpy as np
import pytest
import torch

from contactnet.data.procedural import make_object
from contactnet.geometry import Mesh
from contactnet.planning import CollisionWorld


def test_meshes_are_recentred_and_sampled():
    v, f = make_object("l_bracket", 0)
    shifted = v + np.array([0.5, -0.2, 0.1])
    world = CollisionWorld(num_points=64)
    assert world.add_mesh("a", Mesh(shifted, f)) == 0
    assert world.add_mesh("b", (v, f)) == 1
    torch.testing.assert_close(world.mesh_offset("a"), torch.tensor([0.5, -0.2, 0.1], dtype=torch.float64))
    lib = world.library
    torch.testing.assert_close(lib[0].aabb_center(), torch.zeros(3, dtype=torch.float64), atol=1e-12, rtol=0)
    assert world.points.shape == (2, 64, 3) and world.normals.shape == (2, 64, 3) and world.aabb.shape == (2, 2, 3)
    assert world.mesh_ids([["a", "b"], [1, "a"]]).tolist() == [[0, 1], [1, 0]]
    assert world.version == 2


def test_obstacles_update_in_place():
    world = CollisionWorld(num_envs=2, max_obstacles=3, num_points=16)
    world.add_mesh("m", make_object("gear_prism", 0))
    ptrs = [t.data_ptr() for t in world.buffers()]
    assert world.add_obstacle("x", "m", [1, 2, 3, 1.0004, 0, 0, 0], env=1) == 0  # rounding: normalised
    assert world.add_obstacle("y", "m", env=1, enabled=False) == 1
    torch.testing.assert_close(world.obstacle_pose[1, 0], torch.tensor([1.0, 2, 3, 1, 0, 0, 0]))
    assert world.obstacle_enabled.tolist() == [[False] * 3, [True, False, False]]
    world.set_pose("x", [0, 0, 0, 0, 0, 0, 1])
    world.enable("y")
    world.remove_obstacle("x")
    assert world.add_obstacle("z", "m", env=1) == 0  # the freed slot is reused
    assert world.obstacle_enabled.tolist() == [[False] * 3, [True, True, False]]
    world.set_poses(["y", "z"], [[0, 0, 1, 1, 0, 0, 0], [0, 0, 2, 0, 0, 0, 0.9995]])
    torch.testing.assert_close(world.obstacle_pose[1, [1, 0]],  # y is in slot 1, z in slot 0
                               torch.tensor([[0.0, 0, 1, 1, 0, 0, 0], [0, 0, 2, 0, 0, 0, 1]]))
    with pytest.raises(ValueError, match="poses: expected shape"):
        world.set_poses(["y"], [[0, 0, 0, 1, 0, 0, 0]] * 2)
    with pytest.raises(ValueError, match="name: unknown obstacle 'x'"):
        world.set_poses(["x"], [[0, 0, 0, 1, 0, 0, 0]])
    assert [t.data_ptr() for t in world.buffers()] == ptrs


def test_world_errors_name_the_argument():
    world = CollisionWorld(num_envs=1, max_obstacles=1, num_points=16)
    with pytest.raises(ValueError, match="no mesh registered"):
        world.library
    world.add_mesh("m", make_object("gear_prism", 0))
    with pytest.raises(ValueError, match="name: a mesh named 'm'"):
        world.add_mesh("m", make_object("gear_prism", 0))
    with pytest.raises(ValueError, match="mesh: unknown mesh 'nope'"):
        world.add_obstacle("o", "nope")
    with pytest.raises(ValueError, match="env"):
        world.add_obstacle("o", "m", env=3)
    with pytest.raises(ValueError, match="pose: contains NaN"):
        world.add_obstacle("o", "m", [float("nan"), 0, 0, 1, 0, 0, 0])
    with pytest.raises(ValueError, match="pose: expected shape"):
        world.add_obstacle("o2", "m", [0, 0, 0, 1])
    assert world.obstacle_names == []  # failed adds leave nothing behind
    world.add_obstacle("o", "m")
    with pytest.raises(ValueError, match="env: environment 0 is full"):
        world.add_obstacle("p", "m")
    with pytest.raises(ValueError, match="name: unknown obstacle 'q'"):
        world.set_pose("q", [0, 0, 0, 1, 0, 0, 0])
    with pytest.raises(ValueError, match="names: mesh ids must lie"):
        world.mesh_ids(torch.tensor([0, 5]))
    with pytest.raises(ValueError, match="num_envs"):
        CollisionWorld(num_envs=0)


def _pose_entries():
    """Every way a constant pose enters the planning package, as (name, call(pose))."""
    from contactnet.planning import VoxelGrid
    from contactnet.planning.robot import Robot
    from tests.planning.robots import PACKAGES, URDF

    world = CollisionWorld(num_envs=1, max_obstacles=12, num_points=16, dtype=torch.float64)
    world.add_mesh("m", make_object("gear_prism", 0))
    world.add_obstacle("placed", "m")
    world.add_cuboid("box", [0.1, 0.1, 0.1])
    grid = VoxelGrid(torch.zeros(2, 2, 2, dtype=torch.float64), [0, 0, 0], 0.1)
    robot = Robot(URDF, world, package_dirs=PACKAGES)
    tri = (np.eye(3), [[0, 1, 2]])
    return world, {
        "add_obstacle": lambda p: world.add_obstacle("o", "m", p),
        "add_cuboid": lambda p: world.add_cuboid("c", [0.1, 0.2, 0.3], p),
        "add_sphere": lambda p: world.add_sphere("s", 0.1, p),
        "add_capsule": lambda p: world.add_capsule("k", 0.1, [0, 0, 0], [0, 0, 0.1], p),
        "add_cylinder": lambda p: world.add_cylinder("y", 0.1, 0.2, p),
        "add_voxel_grid": lambda p: world.add_voxel_grid("g", grid, p),
        "set_pose mesh": lambda p: world.set_pose("placed", p),
        "set_pose primitive": lambda p: world.set_pose("box", p),
        "set_poses": lambda p: world.set_poses(["placed", "box"], [[0, 0, 0, 1, 0, 0, 0], p]),
        "camera_pose": lambda p: world.add_point_cloud("cam", depth=np.ones((4, 4)), intrinsics=np.eye(3),
                                                       camera_pose=p),
        "base_pose": lambda p: Robot(URDF, world, package_dirs=PACKAGES, name="r2", base_pose=p),
        "attach": lambda p: robot.attach("cup", tri, "fore", p),
    }


@pytest.mark.parametrize("entry", ["add_obstacle", "add_cuboid", "add_sphere", "add_capsule", "add_cylinder",
                                   "add_voxel_grid", "set_pose mesh", "set_pose primitive", "set_poses",
                                   "camera_pose", "base_pose", "attach"])
@pytest.mark.parametrize("quaternion", [[0, 0, 0, 1], [2, 0, 0, 0], [0, 0, 0, 0], [1, 0, 0, 0.1]])
def test_every_pose_entry_refuses_a_non_unit_quaternion(entry, quaternion):
    # [0, 0, 0, 1] is the identity in the wrong order (x, y, z, w): as unit as the right one, so it
    # passes here (nothing can tell); norms 2, 0 and 1.005 are refused, by one rule, with the order.
    world, entries = _pose_entries()
    pose = [0.0, 0.0, 0.0, *quaternion]
    if quaternion == [0, 0, 0, 1]:
        entries[entry](pose)
        return
    arg = {"set_poses": "poses", "camera_pose": "camera_pose", "base_pose": "base_pose"}.get(entry, "pose")
    with pytest.raises(ValueError, match=rf"{arg}: expected a unit quaternion, got norm .*within 0.001 of 1.*"
                                         r"\[x, y, z, qw, qx, qy, qz\]"):
        entries[entry](pose)


def test_a_quaternion_within_the_tolerance_is_normalised():
    world, entries = _pose_entries()
    entries["add_cuboid"]([0.1, 0.2, 0.3, 0, 0, 0, 1.0008])
    entries["set_pose mesh"]([0.1, 0.2, 0.3, 0.9993, 0, 0, 0])
    table, env, slot = world._views["c"]
    torch.testing.assert_close(world.tables[table].pose[env, slot],
                               torch.tensor([0.1, 0.2, 0.3, 0, 0, 0, 1], dtype=torch.float64))
    env, slot = world.obstacle("placed")
    torch.testing.assert_close(world.obstacle_pose[env, slot],
                               torch.tensor([0.1, 0.2, 0.3, 1, 0, 0, 0], dtype=torch.float64))

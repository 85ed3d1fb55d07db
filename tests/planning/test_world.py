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
    assert world.add_obstacle("x", "m", [1, 2, 3, 2, 0, 0, 0], env=1) == 0
    assert world.add_obstacle("y", "m", env=1, enabled=False) == 1
    torch.testing.assert_close(world.obstacle_pose[1, 0], torch.tensor([1.0, 2, 3, 1, 0, 0, 0]))
    assert world.obstacle_enabled.tolist() == [[False] * 3, [True, False, False]]
    world.set_pose("x", [0, 0, 0, 0, 0, 0, 1])
    world.enable("y")
    world.remove_obstacle("x")
    assert world.add_obstacle("z", "m", env=1) == 0  # the freed slot is reused
    assert world.obstacle_enabled.tolist() == [[False] * 3, [True, True, False]]
    world.set_poses(["y", "z"], [[0, 0, 1, 1, 0, 0, 0], [0, 0, 2, 0, 0, 0, 3]])
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

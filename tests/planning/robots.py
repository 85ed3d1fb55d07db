"""Input builders for the robot tests and the benchmark: the tiny three-link test arm (box, cylinder
and mesh collision geometry) in a world with two obstacles, and python-fcl as an independent oracle."""

from pathlib import Path

import numpy as np
import torch
import trimesh

from contactnet.planning import CollisionWorld
from contactnet.planning.robot import Robot

DATA = Path(__file__).parent / "data"
URDF = DATA / "three_link.urdf"
PACKAGES = {"test_robot": DATA}


def three_link_world(dtype=torch.float64, obstacles: bool = True, num_envs: int = 1, **robot_kwargs):
    """(world, robot): the test arm at the origin; with `obstacles`, a pillar beside the elbow's reach
    and a slab above the base, in environment 0."""
    world = CollisionWorld(num_envs=num_envs, max_obstacles=4, dtype=dtype, num_points=128)
    robot = Robot(URDF, world, package_dirs=PACKAGES, **robot_kwargs)
    if obstacles:
        pillar = trimesh.creation.box(extents=[0.1, 0.1, 0.3])
        world.add_mesh("pillar", (pillar.vertices, pillar.faces))
        world.add_obstacle("pillar", "pillar", [0.45, 0.3, 0.15, 1, 0, 0, 0])
        slab = trimesh.creation.box(extents=[0.2, 0.3, 0.02])
        world.add_mesh("slab", (slab.vertices, slab.faces))
        world.add_obstacle("slab", "slab", [-0.3, -0.2, 0.25, 1, 0, 0, 0])
    return world, robot


def random_q(robot: Robot, n: int, seed: int = 0) -> torch.Tensor:
    """(n, dof) joint angles uniform within the joint limits, in the world's dtype."""
    g = torch.Generator().manual_seed(seed)
    lim = robot.joint_limits.double()
    q = lim[:, 0] + torch.rand(n, robot.dof, generator=g, dtype=torch.float64) * (lim[:, 1] - lim[:, 0])
    return q.to(robot.world.dtype)


def placed_vertices(robot: Robot, body: str, q: torch.Tensor) -> np.ndarray:
    """(V, 3) world vertices of `body`'s registered mesh at joint angles q (dof,)."""
    i = robot.body_names.index(body)
    pose = robot.body_poses(q[None])[0, i].double()
    mesh = robot.world.library[int(robot.body_mesh[i])]
    from contactnet.geometry.poses import transform_points

    return transform_points(pose, mesh.vertices.double()).numpy()


def fcl_collide(va, fa, vb, fb) -> bool:
    """python-fcl's verdict on two world-placed triangle soups (surfaces only: no containment)."""
    import fcl

    def model(v, f):
        m = fcl.BVHModel()
        m.beginModel(len(v), len(f))
        m.addSubModel(np.asarray(v, dtype=np.float64), np.asarray(f, dtype=np.int32))
        m.endModel()
        return fcl.CollisionObject(m, fcl.Transform())

    return fcl.collide(model(va, fa), model(vb, fb), fcl.CollisionRequest()) > 0


def joint_space_fd(fn, q, h=1e-6):
    """Central finite differences of a scalar-per-configuration `fn` in every joint of q (..., dof)."""
    g = torch.zeros_like(q)
    for j in range(q.shape[-1]):
        e = torch.zeros_like(q)
        e[..., j] = h
        g[..., j] = (fn(q + e) - fn(q - e)) / (2 * h)
    return g

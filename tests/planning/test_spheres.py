"""cuRobo-layout sphere queries against every obstacle kind: the mesh branch against the C++
point-triangle kernel and the winding-number reference, cuRobo's cost and its gradients (gradcheck
in float64), per-batch environments, in-place updates, and bad inputs."""

import numpy as np
import pytest
import torch

from contactnet.data.pairs import random_quaternions
from contactnet.data.procedural import make_object
from contactnet.geometry.poses import transform_points
from contactnet.ops import point_triangle_distance
from contactnet.ops.reference.mesh_contacts import winding_number_reference
from contactnet.planning import (CollisionWorld, collision_cost, sphere_cost, sphere_signed_distance,
                                 voxel_grid_from_world)


def _every_kind_world(dtype=torch.float64):
    w = CollisionWorld(num_envs=2, max_obstacles=8, num_points=32, dtype=dtype,
                       cache={"primitive": 4, "mesh": 1, "point_cloud": 1, "voxel_grid": 1})
    w.add_mesh("star", make_object("star_prism", 0))
    w.add_cuboid("box", [0.2, 0.3, 0.1], [0.0, 0.0, 0.0, 0.9238795, 0.0, 0.0, 0.3826834])
    w.add_sphere("ball", 0.08, [0.4, 0.0, 0.0, 1, 0, 0, 0])
    w.add_capsule("cap", 0.05, [0, 0, -0.1], [0.05, 0, 0.1], [0.0, 0.4, 0.0, 1, 0, 0, 0])
    w.add_cylinder("cyl", 0.06, 0.2, [0.0, -0.4, 0.0, 0.7071068, 0.7071068, 0, 0])
    w.add_obstacle("star_o", "star", [0.4, 0.4, 0.0, 1, 0, 0, 0])
    g = np.random.default_rng(0)
    w.add_point_cloud("cloud", g.uniform(-0.05, 0.05, (300, 3)) + [-0.4, 0.0, 0.0], point_radius=0.01)
    return w


CENTRES = {"box": (0, 0, 0), "ball": (0.4, 0, 0), "cap": (0, 0.4, 0), "cyl": (0, -0.4, 0), "star_o": (0.4, 0.4, 0),
           "cloud": (-0.4, 0, 0)}


def _spheres_near_surfaces(world, n, seed, eta, around=(0, 0, 0), env=0):
    """Spheres near `around` whose distance to the world lies within (-eta, eta) but not within 2e-3
    of 0 (where the cost's second piece starts)."""
    g = torch.Generator().manual_seed(seed)
    jitter = torch.rand(10 * n, 3, generator=g, dtype=torch.float64) - 0.5
    c = torch.tensor(around, dtype=torch.float64) + 0.3 * jitter
    s = torch.cat([c, torch.full((10 * n, 1), 0.02, dtype=torch.float64)], 1)
    d = sphere_signed_distance(world, s[None, None], torch.tensor([env]))[0, 0]
    keep = (d.abs() < eta) & ((d.abs() > 2e-3))
    return s[keep][:n]


def test_mesh_branch_matches_kernel_and_winding_reference():
    w = CollisionWorld(max_obstacles=2, num_points=32, dtype=torch.float64)
    w.add_mesh("gear", make_object("gear_prism", 1))
    g = torch.Generator().manual_seed(0)
    pose = torch.cat([torch.tensor([0.1, 0.0, 0.05], dtype=torch.float64), random_quaternions(1, g)[0]])
    w.add_obstacle("o", "gear", pose)
    centres = pose[:3] + (torch.rand(200, 3, generator=g, dtype=torch.float64) - 0.5) * 0.3
    spheres = torch.cat([centres, torch.full((200, 1), 0.01, dtype=torch.float64)], 1)
    ours = sphere_signed_distance(w, spheres[None, None])[0, 0]
    tris = transform_points(pose, w.library[0].triangles.reshape(-1, 3)).reshape(-1, 3, 3)
    f = tris.shape[0]
    ref = point_triangle_distance(centres.repeat_interleave(f, 0), tris.repeat(200, 1, 1)).distance
    ref = ref.reshape(200, f).min(1).values
    inside = winding_number_reference(centres, tris) >= 0.5
    ref = torch.where(inside, -ref, ref) - 0.01
    assert inside.any() and (~inside).any()
    torch.testing.assert_close(ours, ref, atol=1e-10, rtol=0)
    # Stepping through the pairs (here 7 spheres per step) changes nothing.
    stepped = sphere_signed_distance(w, spheres[None, None], max_pairs=7 * tris.shape[0])[0, 0]
    torch.testing.assert_close(stepped, ours, atol=0, rtol=0)


def test_cost_is_curobos_formula_summed_over_obstacles():
    w = _every_kind_world()
    spheres = torch.cat([_spheres_near_surfaces(w, 10, seed=1, eta=0.05, around=c) for c in CENTRES.values()])
    per = torch.stack([sphere_signed_distance(w, spheres[None, None])[0, 0]])
    cost = sphere_cost(w, spheres[None, None], eta=0.05)[0, 0]
    # With one obstacle per environment the sum is the cost of the minimum distance.
    lone = CollisionWorld(max_obstacles=1, num_points=32, dtype=torch.float64)
    lone.add_cuboid("box", [0.2, 0.3, 0.1])
    s = torch.tensor([[0.15, 0, 0, 0.02], [0.11, 0, 0, 0.02], [0.0, 0, 0, 0.01], [1.0, 0, 0, 0.1]], dtype=torch.float64)
    d = torch.tensor([0.03, -0.01, -0.06, 0.8], dtype=torch.float64)
    torch.testing.assert_close(sphere_signed_distance(lone, s[None, None])[0, 0], d, atol=1e-12, rtol=0)
    torch.testing.assert_close(sphere_cost(lone, s[None, None], eta=0.05)[0, 0], collision_cost(d, 0.05))
    assert (cost >= collision_cost(per[0], 0.05) - 1e-12).all()  # a sum over obstacles bounds the nearest's


@pytest.mark.parametrize("kind", ["box", "ball", "cap", "cyl", "star_o", "cloud", "grid"])
def test_cost_gradcheck_float64(kind):
    w = _every_kind_world()
    if kind == "grid":
        grid = voxel_grid_from_world(w, [-0.6, -0.6, -0.2], [0.6, 0.6, 0.2], 0.05)
        w.add_voxel_grid("grid", grid, env=1)
    for name in w.obstacle_names:
        if name != kind:
            w.disable(name)
    env = 1 if kind == "grid" else 0
    if kind == "grid":
        w.enable("grid")
    spheres = _spheres_near_surfaces(w, 12, seed=2, eta=0.05, around=CENTRES.get(kind, (0.4, 0, 0)), env=env)
    assert spheres.shape[0] >= 8, "not enough spheres near the surface"
    x = spheres[None, None].clone().requires_grad_(True)
    env_idx = torch.tensor([env])
    assert float(sphere_cost(w, x.detach(), env_idx, eta=0.05).sum()) > 0
    assert torch.autograd.gradcheck(lambda s: sphere_cost(w, s, env_idx, eta=0.05), (x,), eps=1e-7, atol=1e-6)


def test_per_batch_environment_and_in_place_updates():
    w = CollisionWorld(num_envs=2, max_obstacles=2, num_points=32)
    w.add_cuboid("a", [0.2, 0.2, 0.2], env=0)
    w.add_sphere("b", 0.1, [0.0, 0.0, 1.0, 1, 0, 0, 0], env=1)
    ptrs = [t.data_ptr() for t in w.buffers()]
    x = torch.zeros(2, 1, 1, 4)
    x[..., 3] = 0.1
    # cuRobo's batched-environment example: the same sphere collides in env 0 only.
    d = sphere_signed_distance(w, x, torch.tensor([0, 1], dtype=torch.int32))
    torch.testing.assert_close(d.flatten(), torch.tensor([-0.2, 0.8]))
    w.set_pose("b", [0.0, 0.0, 0.15, 1, 0, 0, 0])
    w.disable("a")
    torch.testing.assert_close(sphere_signed_distance(w, x, torch.tensor([0, 1])).flatten(),
                               torch.tensor([float("inf"), -0.05]))
    assert float(sphere_cost(w, x, torch.tensor([0, 0]), eta=0.02).abs().sum()) == 0  # disabled: no cost
    w.set_poses(["b"], [[0.0, 0.0, 0.3, 1, 0, 0, 0]])
    torch.testing.assert_close(sphere_signed_distance(w, x, torch.tensor([1, 1])).flatten(), torch.tensor([0.1, 0.1]))
    w.remove_obstacle("b")
    assert [t.data_ptr() for t in w.buffers()] == ptrs


def test_dtype_is_cast_once_and_returned_in_the_spheres_dtype():
    w = CollisionWorld(max_obstacles=1, num_points=32, dtype=torch.float64)
    w.add_cuboid("a", [0.2, 0.2, 0.2], np.array([0, 0, 0, 1, 0, 0, 0], dtype=np.float32))
    x = torch.tensor([[[[0.3, 0, 0, 0.1]]]], dtype=torch.float32, requires_grad=True)
    c = sphere_cost(w, x, eta=0.2)
    assert c.dtype == torch.float32
    c.sum().backward()
    assert x.grad.dtype == torch.float32 and float(x.grad[..., 0]) < 0


def test_bad_inputs_raise_clear_errors():
    empty = CollisionWorld(num_points=32)
    with pytest.raises(ValueError, match="world: it has no obstacle"):
        sphere_cost(empty, torch.zeros(1, 1, 1, 4))
    w = CollisionWorld(num_envs=2, max_obstacles=1, num_points=32)
    w.add_cuboid("a", [0.2, 0.2, 0.2])
    with pytest.raises(ValueError, match=r"spheres: expected shape \(batch, horizon, n, 4\)"):
        sphere_cost(w, torch.zeros(1, 3, 4))
    with pytest.raises(ValueError, match="spheres: contains NaN"):
        sphere_cost(w, torch.full((1, 1, 1, 4), float("nan")))
    with pytest.raises(ValueError, match="radius"):
        sphere_cost(w, torch.tensor([[[[0.0, 0, 0, -1]]]]))
    with pytest.raises(ValueError, match=r"env_idx: expected shape \(2,\)"):
        sphere_cost(w, torch.zeros(2, 1, 1, 4), torch.tensor([0]))
    with pytest.raises(ValueError, match="env_idx: environment indices must lie in"):
        sphere_cost(w, torch.zeros(2, 1, 1, 4), torch.tensor([0, 2]))
    with pytest.raises(ValueError, match="eta"):
        sphere_cost(w, torch.zeros(1, 1, 1, 4), eta=0)
    with pytest.raises(ValueError, match=r"pose: expected a unit quaternion.*qw, qx, qy, qz"):
        w.add_sphere("s", 0.1, [0, 0, 0, 2, 0, 0, 0], env=1)
    with pytest.raises(ValueError, match=r"pose: contains NaN.*qw, qx, qy, qz"):
        w.add_sphere("s", 0.1, [0, 0, float("nan"), 1, 0, 0, 0], env=1)
    with pytest.raises(ValueError, match=r"pose: expected shape \(7,\) \[x, y, z, qw"):
        w.add_sphere("s", 0.1, [0, 0, 0, 1], env=1)
    with pytest.raises(ValueError, match="radius: expected a finite number > 0"):
        w.add_sphere("s", -0.1, env=1)
    with pytest.raises(ValueError, match="dims: expected 3 finite side lengths"):
        w.add_cuboid("c", [0.1, 0.1], env=1)
    with pytest.raises(ValueError, match="env: environment 0 is full"):
        w.add_cylinder("c", 0.1, 0.1)
    with pytest.raises(ValueError, match="name: an obstacle named 'a' already exists"):
        w.add_capsule("a", 0.1, [0, 0, 0], [0, 0, 1], env=1)
    assert w.obstacle_names == ["a"]  # failed adds leave nothing behind


def _small_every_kind_world(device="cpu"):
    w = CollisionWorld(num_envs=2, max_obstacles=6, num_points=32, device=device,
                       cache={"primitive": 4, "mesh": 1, "point_cloud": 1, "voxel_grid": 1})
    w.add_mesh("star", make_object("star_prism", 0))
    w.add_cuboid("box", [0.2, 0.3, 0.1])
    w.add_sphere("ball", 0.08, [0.4, 0, 0, 1, 0, 0, 0])
    w.add_capsule("cap", 0.05, [0, 0, -0.1], [0, 0, 0.1], [0, 0.4, 0, 1, 0, 0, 0])
    w.add_cylinder("cyl", 0.06, 0.2, [0, -0.4, 0, 1, 0, 0, 0])
    w.add_obstacle("star_o", "star", [0.4, 0.4, 0, 1, 0, 0, 0])
    w.add_point_cloud("cloud", np.random.default_rng(0).uniform(-0.05, 0.05, (100, 3)) + [-0.4, 0, 0])
    w.add_voxel_grid("grid", voxel_grid_from_world(w, [-0.5] * 3, [0.5] * 3, 0.1), env=1)
    w.sphere_store  # packed once, before the hot path
    return w


def test_hot_path_traces_without_graph_breaks():
    """validate=False: fullgraph tracing fails on any host read (.item(), bool(tensor)), so this
    shows the sphere path never synchronises."""
    w = _small_every_kind_world()
    g = torch.Generator().manual_seed(0)
    x = torch.rand(2, 3, 4, 4, generator=g) * torch.tensor([1.0, 1.0, 1.0, 0.05]) - torch.tensor([0.5, 0.5, 0.5, 0])
    env = torch.tensor([0, 1])
    eager = sphere_cost(w, x, env, eta=0.05, validate=False)
    compiled = torch.compile(lambda s: sphere_cost(w, s, env, eta=0.05, validate=False), backend="eager",
                             fullgraph=True)
    torch.testing.assert_close(compiled(x), eager)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_graph_without_syncs_agrees_with_cpu():
    cpu, gpu = _small_every_kind_world(), _small_every_kind_world("cuda")
    g = torch.Generator().manual_seed(1)
    x = torch.rand(4, 3, 8, 4, generator=g) * torch.tensor([1.0, 1.0, 1.0, 0.05]) - torch.tensor([0.5, 0.5, 0.5, 0])
    env = torch.tensor([0, 1, 1, 0])
    xs, envs = x.cuda(), env.cuda()
    torch.cuda.set_sync_debug_mode("error")
    try:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            sphere_cost(gpu, xs, envs, eta=0.05, validate=False)  # warm-up
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = sphere_cost(gpu, xs, envs, eta=0.05, validate=False)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    gpu.set_pose("box", [0.05, 0, 0, 1, 0, 0, 0])  # written in place: the replay reads it
    cpu.set_pose("box", [0.05, 0, 0, 1, 0, 0, 0])
    graph.replay()
    torch.testing.assert_close(out.cpu(), sphere_cost(cpu, x, env, eta=0.05), atol=1e-5, rtol=1e-4)

"""cuRobo-layout sphere queries against every obstacle kind: the mesh branch (BVH op) against the
C++ point-triangle kernel and the winding-number reference and against the brute-force torch path it
replaced (values and gradients), the cost's cut-off, cuRobo's cost and its gradients (gradcheck in
float64), per-batch environments, in-place updates, and bad inputs."""

import numpy as np
import pytest
import torch

from contactnet.data.pairs import random_quaternions
from contactnet.data.procedural import make_object
from contactnet.geometry.poses import transform_points
from contactnet.geometry.triangles import closest_points_on_triangles, winding_numbers
from contactnet.ops import point_triangle_distance
from contactnet.ops.reference.mesh_contacts import winding_number_reference
from contactnet.planning import (CollisionWorld, collision_cost, sphere_cost, sphere_signed_distance,
                                 voxel_grid_from_world)
from contactnet.planning import spheres as sphere_queries
from tests.ops.mesh_cases import random_soup


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


# ---- the BVH path against the brute-force torch path it replaced --------------------------------------


def _guarded_norm(x: torch.Tensor) -> torch.Tensor:
    sq = (x * x).sum(-1)
    return torch.where(sq > 0, sq.clamp_min(1e-30).sqrt(), torch.zeros_like(sq))


def brute_force_mesh_distances(world, centres: torch.Tensor, env: torch.Tensor) -> torch.Tensor:
    """(B, S, Nm) signed distance of centres (B, S, 3) to each mesh slot of their environment, the
    way spheres.py computed it before the BVH op: the closest point over every triangle of the
    slot's mesh (the sphere store's padded triangles), signed by the exact winding number over all
    of them, the gradient through the closest point held fixed. Disabled slots are computed too
    (the caller masks them)."""
    table, store = world.tables["mesh"], world.sphere_store
    local = sphere_queries._to_local(centres, table.pose[env])  # (B, S, Nm, 3)
    tris = store["triangles"][table.ids[env]][:, None]  # (B, 1, Nm, F, 3, 3)
    valid = store["face_valid"][table.ids[env]][:, None]  # (B, 1, Nm, F)
    with torch.no_grad():
        lp = local[..., None, :]
        closest = closest_points_on_triangles(lp, tris[..., 0, :], tris[..., 1, :], tris[..., 2, :])
        sq = ((lp - closest) ** 2).sum(-1).masked_fill(~valid, float("inf"))
        best = sq.argmin(-1)
        nearest = torch.gather(closest, -2, best[..., None, None].expand(*best.shape, 1, 3)).squeeze(-2)
        inside = winding_numbers(local, tris, valid) >= 0.5
    dist = _guarded_norm(local - nearest)
    return torch.where(inside, -dist, dist)


def _mesh_world(dtype=torch.float64):
    """2 environments of mesh obstacles: closed non-convex prisms, an open soup (int32 faces), a
    mesh placed twice, disabled and empty slots, and a cuboid (the primitive table's own slot)."""
    w = CollisionWorld(num_envs=2, max_obstacles=8, num_points=32, dtype=dtype,
                       cache={"primitive": 1, "mesh": 4, "point_cloud": 1, "voxel_grid": 1})
    w.add_mesh("star", make_object("star_prism", 0))
    w.add_cuboid("box", [0.1, 0.1, 0.1], [0.0, -0.3, 0.0, 1, 0, 0, 0])  # a mesh view between mesh rows
    w.add_mesh("gear", make_object("gear_prism", 1))
    v, f = random_soup(40, size=0.12, seed=2)
    w.add_mesh("soup", (v, f.astype(np.int32)))
    g = torch.Generator().manual_seed(5)

    def pose(x, y):
        return torch.cat([torch.tensor([x, y, 0.0], dtype=torch.float64), random_quaternions(1, g)[0]])

    w.add_obstacle("star0", "star", pose(0.0, 0.0), env=0)
    w.add_obstacle("gear0", "gear", pose(0.25, 0.0), env=0)
    w.add_obstacle("soup0", "soup", pose(0.0, 0.25), env=0)
    w.add_obstacle("gear1", "gear", pose(0.0, 0.0), env=1)
    w.add_obstacle("star1", "star", pose(0.2, 0.1), env=1)
    w.add_obstacle("off1", "soup", pose(-0.2, 0.0), env=1, enabled=False)
    return w


def _mixed_spheres(n: int, seed: int, dtype=torch.float64) -> torch.Tensor:
    """(2, 1, n, 4): centres around both environments' obstacles (inside, near and between them),
    a few 1e3 m away, radii 0.005 .. 0.03."""
    g = torch.Generator().manual_seed(seed)
    around = torch.tensor([[0.0, 0.0, 0.0], [0.25, 0.0, 0.0], [0.0, 0.25, 0.0], [0.2, 0.1, 0.0]], dtype=torch.float64)
    c = around[torch.randint(4, (2, 1, n), generator=g)]
    c = c + (torch.rand(2, 1, n, 3, generator=g, dtype=torch.float64) - 0.5) * 0.16
    c[:, :, :4] = 1e3 * torch.nn.functional.normalize(c[:, :, :4], dim=-1)
    r = 0.005 + 0.025 * torch.rand(2, 1, n, 1, generator=g, dtype=torch.float64)
    return torch.cat([c, r], -1).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_mesh_slots_match_the_brute_force_path_values_and_gradients(dtype):
    w = _mesh_world(dtype)
    spheres = _mixed_spheres(300, seed=0, dtype=dtype)
    env = torch.tensor([0, 1])
    centres = spheres[..., :3].reshape(2, -1, 3)
    x = centres.clone().requires_grad_(True)
    y = centres.clone().requires_grad_(True)
    ours = sphere_queries._mesh_distances(w, x, env, None, 1 << 22)
    ref = brute_force_mesh_distances(w, y, env)
    enabled = w.tables["mesh"].enabled[env][:, None, :].expand(ours.shape)
    assert (ours[~enabled] == float("inf")).all()
    assert (ref[enabled] < 0).sum() > 30 and (ref[enabled] > 0).sum() > 500
    tol = dict(atol=1e-12, rtol=1e-12) if dtype == torch.float64 else dict(atol=2e-6, rtol=1e-5)
    torch.testing.assert_close(ours[enabled], ref[enabled], **tol)
    upstream = torch.randn(ours.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64).to(dtype)
    upstream = upstream.masked_fill(~enabled, 0) / (1 + ref.detach().abs())  # the far spheres' grads are O(1) too
    (ours.masked_fill(~enabled, 0) * upstream).sum().backward()
    (ref.masked_fill(~enabled, 0) * upstream).sum().backward()
    torch.testing.assert_close(x.grad, y.grad, **tol)
    # In the public queries: the minimum over the obstacles, and the steps (here 5 spheres each).
    d = sphere_signed_distance(w, spheres, env)
    stepped = sphere_signed_distance(w, spheres, env, max_pairs=5 * 4 * 2 * sphere_queries._QUERY_PAIRS)
    # Rounding only: batched products of other sizes may take other kernels (seen: 1 ulp on this CPU).
    torch.testing.assert_close(stepped, d, **tol)


def test_cost_cut_off_changes_nothing():
    """sphere_cost stops the search of centres outside at radius + 2 eta: the cost and its gradient
    equal those of the uncut distances, for spheres near, inside (however deep) and far away."""
    w = _mesh_world()
    spheres = _mixed_spheres(300, seed=3)
    spheres[0, 0, 4:8, :3] = 0.0  # in the middle of env 0's star (deep inside)
    env = torch.tensor([0, 1])
    x = spheres.clone().requires_grad_(True)
    y = spheres.clone().requires_grad_(True)
    cost = sphere_cost(w, x, env, eta=0.02)
    uncut = collision_cost(sphere_queries._distances(w, y, env, True, 1 << 22), 0.02).sum(-1)
    assert (cost[0, 0, 4:8] > 0.02).all() and (cost == 0).sum() > 100 and ((cost > 0) & (cost < 0.01)).any()
    torch.testing.assert_close(cost, uncut, atol=0, rtol=0)
    cost.sum().backward()
    uncut.sum().backward()
    torch.testing.assert_close(x.grad, y.grad, atol=0, rtol=0)


def test_open_mesh_cost_gradcheck_float64():
    """Spheres off the faces of the open soup, on both sides, where the closest face is unique."""
    from tests.ops.test_point_mesh import _off_face_points

    w = _mesh_world()
    for name in w.obstacle_names:
        if name != "soup0":
            w.disable(name)
    mid = w.mesh_names.index("soup")
    local = _off_face_points(w.library, mid, 12, seed=1, lo=0.004, hi=0.012)
    assert local.shape[0] >= 8
    pose = w.tables["mesh"].pose[0, 2]
    centres = transform_points(pose[None], local)
    spheres = torch.cat([centres, torch.full((centres.shape[0], 1), 0.002, dtype=torch.float64)], 1)[None, None]
    x = spheres.clone().requires_grad_(True)
    assert float(sphere_cost(w, x.detach(), eta=0.02).sum()) > 0
    assert torch.autograd.gradcheck(lambda s: sphere_cost(w, s, eta=0.02), (x,), eps=1e-7, atol=1e-6)


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
    sphere_signed_distance(w, torch.zeros(1, 1, 1, 4, device=device))  # packs, builds the BVHs: before the hot path
    return w


def test_hot_path_traces_without_graph_breaks():
    """validate=False: fullgraph tracing fails on any host read (.item(), bool(tensor)), so this
    shows the sphere path never synchronises. Other worlds queried before and still alive change
    nothing (the per-world mesh-row cache lives in each world's own store)."""
    others = [_small_every_kind_world() for _ in range(2)]  # noqa: F841 (kept alive)
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

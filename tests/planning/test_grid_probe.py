"""Mesh queries (and so robot links) against voxel grids, through probes (grid_probe.py): the probe
covers its mesh as documented, a link against a grid built from a cuboid gets the cuboid's own
verdict away from the documented tolerance (distance bounds included), containment is seen, the
cost's joint-space gradient matches finite differences, every backend adds the same grid term,
and the learned path stays traceable."""

import math

import numpy as np
import pytest
import torch
import trimesh

from contactnet.planning import CollisionChecker, CollisionWorld, VoxelGrid, voxel_grid_from_world
from contactnet.planning.grid_probe import interior_lattice, mesh_probe, surface_cover
from contactnet.planning.primitives import PrimitiveKind, primitive_params, primitive_signed_distance
from contactnet.planning.robot import RobotChecker
from tests.planning.robots import joint_space_fd, random_q, three_link_world
from tests.planning.scenes import tiny_net

VOXEL = 0.01
GRID_ERROR = math.sqrt(3) / 2 * VOXEL  # trilinear of exact signed distances (grid_probe.py)
BLOCK_DIMS = [0.12, 0.1, 0.3]
BLOCK_POSE = [0.4, 0.25, 0.15, math.cos(math.pi / 12), 0, 0, math.sin(math.pi / 12)]  # 30 deg about z


def test_surface_cover_radius_holds_on_dense_samples():
    mesh = trimesh.creation.cylinder(radius=0.05, height=0.3, sections=12)  # long slivers on the sides
    v, f = np.asarray(mesh.vertices), np.asarray(mesh.faces)
    points, radius = surface_cover(v, f, 0.02)
    assert radius <= 0.02 / math.sqrt(3) + 1e-12 and len(points) > len(v)
    dense, _ = trimesh.sample.sample_surface(mesh, 5000, seed=0)
    gap = np.linalg.norm(dense[:, None] - points[None], axis=-1).min(1)
    assert gap.max() <= radius + 1e-12
    assert gap.max() > 0.5 * radius  # the bound is not loose by orders of magnitude


def test_interior_lattice_and_probe_budget():
    box = trimesh.creation.box(extents=[0.1, 0.06, 0.04])
    inside = interior_lattice(box.vertices, box.faces, 0.02)
    assert len(inside) == 5 * 3 * 2  # cell centres of a 2 cm lattice over the box
    assert bool((np.abs(inside) < [0.05, 0.03, 0.02]).all())
    points, radius, spacing = mesh_probe(box.vertices, box.faces, 0.002, max_points=500)
    assert len(points) <= 500 and spacing > 0.002 and radius <= spacing / math.sqrt(3) + 1e-12


def _block_only(dims=BLOCK_DIMS, pose=BLOCK_POSE):
    """A world holding only the cuboid, to build grids from (the sphere queries that fill a grid
    read every registered mesh: a robot's links would only cost time)."""
    w = CollisionWorld(max_obstacles=1, dtype=torch.float64, num_points=16, cache={"mesh": 1})
    w.add_cuboid("block", dims, pose)
    return w


def _worlds():
    """(cuboid world, grid world, robot in each): the test arm beside a rotated block, and the same
    arm beside a 1 cm voxel grid built from that block."""
    block_world, block_robot = three_link_world(obstacles=False)
    block_world.add_cuboid("block", BLOCK_DIMS, BLOCK_POSE)
    grid = voxel_grid_from_world(_block_only(), [0.2, 0.0, -0.05], [0.6, 0.5, 0.35], VOXEL)
    grid_world, grid_robot = three_link_world(obstacles=False)
    grid_world.add_voxel_grid("esdf", grid)
    return block_world, block_robot, grid_world, grid_robot


@pytest.fixture(scope="module")
def worlds():
    return _worlds()


def _block_depth(robot, q, body):
    """Signed distance of the cuboid at the deepest of 4000 dense surface samples of `body` and its
    vertices, per configuration (independent of the probe)."""
    i = robot.body_names.index(body)
    mesh = robot.world.library[int(robot.body_mesh[i])]
    tm = trimesh.Trimesh(mesh.vertices.numpy(), mesh.faces.numpy(), process=False)
    samples = np.concatenate([trimesh.sample.sample_surface(tm, 4000, seed=1)[0], tm.vertices])
    from contactnet.geometry.poses import pose_to_matrix

    poses = robot.body_poses(q)[:, i]  # (C, 7)
    block = torch.linalg.inv(pose_to_matrix(torch.tensor(BLOCK_POSE, dtype=torch.float64)))
    local = torch.einsum("ij,cjk,sk->csi", block, pose_to_matrix(poses),
                         torch.cat([torch.as_tensor(samples), torch.ones(len(samples), 1, dtype=torch.float64)], 1))
    params = torch.tensor(primitive_params(PrimitiveKind.CUBOID, dims=BLOCK_DIMS), dtype=torch.float64)
    sd = primitive_signed_distance(local[..., :3], torch.zeros(local.shape[:2], dtype=torch.int64),
                                   params.expand(*local.shape[:2], 7))
    return sd.min(1).values


def test_link_against_grid_gets_the_cuboids_verdict_away_from_the_tolerance(worlds):
    block_world, block_robot, grid_world, grid_robot = worlds
    exact = RobotChecker(block_robot, CollisionChecker(block_world, "exact"), self_collision=False)
    probed = RobotChecker(grid_robot, CollisionChecker(grid_world, "exact"), self_collision=False)
    # Configurations with a link within 8 cm of the block (colliding or not), from a uniform pool.
    pool = random_q(block_robot, 1500, seed=21)
    near_block = exact.checker.world_query(block_robot.body_mesh.expand(len(pool), -1),
                                           block_robot.body_poses(pool)).signed_distance.min(-1).values < 0.08
    q = pool[near_block][:150]
    assert len(q) == 150
    truth = exact.query(q[None]).world_colliding[0]  # (C, L)
    got = probed.query(q[None]).world_colliding[0]
    assert truth.any() and (~truth).any()
    radius = grid_world.probe_store["radius"][grid_robot.body_mesh]  # (L,)
    # Distances: d - e <= d_hat <= d + r + e for separated pairs.
    c_block, c_grid = exact.checker, probed.checker
    poses = block_robot.body_poses(q)  # (C, L, 7); the same in both worlds
    d = c_block.world_query(block_robot.body_mesh.expand(len(q), -1), poses).signed_distance
    res = c_grid.world_query(grid_robot.body_mesh.expand(len(q), -1), poses)
    d_hat = res.per_grid[..., 0]
    torch.testing.assert_close(res.signed_distance, d_hat)  # the only obstacle
    apart = d > 0
    assert bool((d_hat[apart] >= d[apart] - GRID_ERROR - 1e-9).all())
    # The upper bound needs the contact inside the grid's box (outside it the grid's value is an
    # upper bound only): within 5 cm of the block, which lies 5 cm or more inside the box.
    near = apart & (d < 0.05)
    assert int(near.sum()) > 50
    assert bool((d_hat[near] <= d[near] + radius.expand_as(d)[near] + GRID_ERROR + 1e-9).all())
    # Verdicts: free beyond e agrees; colliding deeper than r + e (measured on dense surface
    # samples with the analytic cuboid, independently of the probe) agrees.
    assert bool((~got[d > GRID_ERROR]).all())
    deep = torch.stack([_block_depth(block_robot, q, b) < -(float(radius[i]) + GRID_ERROR)
                        for i, b in enumerate(block_robot.body_names)], 1)
    assert bool(deep.any()) and bool(got[deep].all()) and bool(truth[deep].all())
    decided = (d > GRID_ERROR) | deep
    assert bool((got[decided] == truth[decided]).all())
    assert float(decided.double().mean()) > 0.9  # the undecided band is thin


def test_containment_is_seen_through_the_interior_points():
    # A 5 cm cube wholly inside the 20 x 20 x 10 cm base box: every probe surface point is 2.5 cm
    # or more from it. Its inscribed ball (2.5 cm) exceeds sqrt(3) / 2 * spacing (1.73 cm) + the
    # grid's error (0.43 cm), so a lattice point lies inside it (grid_probe.py's bound).
    world, robot = three_link_world(obstacles=False)
    source = _block_only([0.05, 0.05, 0.05], [0.0, 0.0, 0.05, 1, 0, 0, 0])
    world.add_voxel_grid("esdf", voxel_grid_from_world(source, [-0.1, -0.1, 0.0], [0.1, 0.1, 0.1], 0.005))
    rc = RobotChecker(robot, CollisionChecker(world, "exact"), self_collision=False)
    q = torch.zeros(1, 1, robot.dof, dtype=torch.float64)
    res = rc.query(q)
    base = robot.body_names.index("base")
    assert bool(res.world_colliding[0, 0, base]) and not bool(res.world_colliding[0, 0, base + 1:].any())
    assert float(rc.cost(q)) > 0
    mesh = world.library[int(robot.body_mesh[base])]  # recentred: its frame is 5 cm above the base's
    surface, _ = surface_cover(mesh.vertices.numpy(), mesh.faces.numpy(), world.probe_spacing)
    assert float(world._grids[0](torch.as_tensor(surface) + torch.tensor([0, 0, 0.05])).min()) > 0.02


def _near_free(rc, n, seed):
    q = random_q(rc.robot, 150, seed=seed)
    cost = rc.cost(q[None])[0]
    keep = (cost > 1e-6) & ~rc.query(q[None]).colliding[0]
    assert int(keep.sum()) >= n
    return q[keep][:n]


def test_grid_cost_gradient_matches_finite_differences(worlds):
    _, _, grid_world, grid_robot = worlds
    rc = RobotChecker(grid_robot, CollisionChecker(grid_world, "exact", eta=0.05), self_collision=False)
    q = _near_free(rc, 6, seed=22)[None]
    _, grad = rc.robot_cost(q)
    assert bool((grad.abs().sum(-1) > 0).all())
    # The trilinear field is smooth inside a cell and the argmin point is locally fixed: a tiny step.
    torch.testing.assert_close(grad, joint_space_fd(lambda x: rc.cost(x), q, 1e-7), atol=1e-6, rtol=1e-4)


def test_every_backend_adds_the_same_grid_term(worlds):
    # A float32 copy of the grid world: the learned nets run in float32.
    _, _, grid_world, _ = worlds
    grid = grid_world._grids[0]
    world, robot = three_link_world(dtype=torch.float32)  # its pillar and slab are mesh obstacles
    world.add_voxel_grid("esdf", VoxelGrid(grid.values.float(), grid.origin.float(), grid.voxel_size))
    q = random_q(robot, 64, seed=23)[None]
    exact = RobotChecker(robot, CollisionChecker(world, "exact", eta=0.05), self_collision=False)
    learned = RobotChecker(robot, CollisionChecker(world, "locc", tiny_net("locc"), eta=0.05, validate=False),
                           self_collision=False)
    e, l_ = exact.checker, learned.checker
    poses = robot.body_poses(q)
    ids = robot.body_mesh.expand(poses.shape[:-1])
    torch.testing.assert_close(e.world_query(ids, poses).per_grid, l_.world_query(ids, poses).per_grid)
    grid_hit = e.world_query(ids, poses).per_grid[..., 0] < 0
    assert bool(grid_hit.any()) and bool(l_.world_query(ids, poses).colliding[grid_hit].all())
    # The hybrid deferring everything is the exact backend, grid included.
    hybrid = CollisionChecker(world, "hybrid", tiny_net("locc"), tau=float("inf"))
    torch.testing.assert_close(hybrid.world_query(ids, poses).colliding, e.world_query(ids, poses).colliding)
    # The costs differ by the mesh-obstacle terms only: removing those leaves the same grid cost.
    world.disable("pillar")
    world.disable("slab")
    torch.testing.assert_close(exact.cost(q), learned.cost(q), atol=1e-5, rtol=1e-5)
    world.enable("pillar")
    world.enable("slab")
    # And the learned path with a grid still traces without a graph break (no host sync).
    compiled = torch.compile(lambda x: learned.cost(x), backend="eager", fullgraph=True)
    torch.testing.assert_close(compiled(q), learned.cost(q))


def test_probe_of_a_mesh_with_more_vertices_than_the_budget_is_thinned_and_still_covers():
    sphere = trimesh.creation.icosphere(subdivisions=4, radius=0.1)  # 2562 vertices
    points, radius, spacing = mesh_probe(sphere.vertices, sphere.faces, 0.02, max_points=1000)
    assert len(points) <= 1000 < len(sphere.vertices)
    dense, _ = trimesh.sample.sample_surface(sphere, 5000, seed=2)
    assert np.linalg.norm(dense[:, None] - points[None], axis=-1).min(1).max() <= radius


def test_other_obstacles_mesh_views_get_an_empty_probe():
    world = CollisionWorld(max_obstacles=2, num_points=16, dtype=torch.float64)
    world.add_cuboid("box", [0.1, 0.1, 0.1])
    world.add_mesh("query", trimesh.creation.box(extents=[0.05, 0.05, 0.05]))
    store = world.probe_store
    assert int(store["valid"][0].sum()) == 0 and float(store["radius"][0]) == float("inf")
    assert int(store["valid"][1].sum()) > 0

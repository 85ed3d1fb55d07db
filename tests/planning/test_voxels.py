"""Voxel grids of signed distance: trilinear interpolation is exact on affine fields (values and
gradients), and a grid built from a world reproduces that world's distances and gradients."""

import pytest
import torch

from contactnet.planning import CollisionWorld, VoxelGrid, sphere_signed_distance, voxel_grid_from_world


def test_trilinear_reproduces_affine_fields_and_their_gradient():
    a, b = torch.tensor([0.3, -0.7, 0.5], dtype=torch.float64), 0.05
    axes = [0.1 * torch.arange(n, dtype=torch.float64) - 0.2 for n in (5, 6, 7)]
    lattice = torch.stack(torch.meshgrid(*axes, indexing="ij"), -1)
    grid = VoxelGrid(lattice @ a + b, [-0.2, -0.2, -0.2], 0.1)
    g = torch.Generator().manual_seed(0)
    x = (torch.rand(500, 3, generator=g, dtype=torch.float64) * torch.tensor([0.4, 0.5, 0.6]) - 0.2).requires_grad_()
    value = grid(x)
    torch.testing.assert_close(value, x.detach() @ a + b, atol=1e-12, rtol=0)
    (grad,) = torch.autograd.grad(value.sum(), x)
    torch.testing.assert_close(grad, a.expand(500, 3), atol=1e-12, rtol=0)


def test_outside_the_grid_adds_the_distance_to_its_box():
    grid = VoxelGrid(torch.zeros(3, 3, 3, dtype=torch.float64), [0, 0, 0], 0.5)
    x = torch.tensor([[2.0, 0.5, 0.5], [-0.3, -0.4, 0.5]], dtype=torch.float64)
    torch.testing.assert_close(grid(x), torch.tensor([1.0, 0.5], dtype=torch.float64))


@pytest.fixture(scope="module")
def world():
    w = CollisionWorld(num_envs=2, max_obstacles=3, num_points=32, dtype=torch.float64)
    w.add_sphere("ball", 0.15, [0.2, 0.0, 0.0, 1, 0, 0, 0])
    w.add_cuboid("box", [0.2, 0.2, 0.2], [-0.25, 0.0, 0.0, 0.9238795, 0.3826834, 0.0, 0.0])
    return w


def test_grid_from_world_matches_it(world):
    h = 0.01
    grid = voxel_grid_from_world(world, [-0.5, -0.3, -0.3], [0.5, 0.3, 0.3], h)
    g = torch.Generator().manual_seed(1)
    x = (torch.rand(2000, 3, generator=g, dtype=torch.float64) - 0.5) * torch.tensor([0.9, 0.5, 0.5])
    spheres = torch.cat([x, torch.zeros(2000, 1, dtype=torch.float64)], 1)[None, None].requires_grad_()
    exact = sphere_signed_distance(world, spheres)[0, 0]
    (exact_grad,) = torch.autograd.grad(exact.sum(), spheres)
    xs = x.clone().requires_grad_()
    value = grid(xs)
    (grad,) = torch.autograd.grad(value.sum(), xs)
    # A 1-Lipschitz field interpolated from its samples: off by at most the cell's half-diagonal.
    err = (value - exact).detach().abs()
    assert float(err.max()) <= 3 ** 0.5 * h / 2 and float(err.mean()) < h / 10
    # Gradients: where the field is smooth over the cell (one obstacle nearest, away from edges and
    # the medial surface between them), the cell's gradient is the field's to O(h).
    smooth = (exact.detach() - 0).abs() > 0.03
    cos = torch.nn.functional.cosine_similarity(grad, exact_grad[0, 0, :, :3], dim=1)
    assert float(torch.quantile(cos[smooth], 0.9)) > 0.999 and float(cos[smooth].median()) > 0.9999


def test_grid_as_an_obstacle_of_another_world(world):
    grid = voxel_grid_from_world(world, [-0.5, -0.3, -0.3], [0.5, 0.3, 0.3], 0.02)
    w = CollisionWorld(num_envs=2, max_obstacles=1, num_points=32, dtype=torch.float64)
    shift = torch.tensor([1.0, 2.0, 0.0, 1, 0, 0, 0], dtype=torch.float64)
    w.add_voxel_grid("esdf", grid, shift, env=1)
    assert w.obstacle_kind("esdf") == "voxel_grid" and "esdf: voxel_grid, env 1" in w.describe()
    x = torch.tensor([[0.3, 0.1, 0.0, 0.05], [-0.1, 0.0, 0.1, 0.0]], dtype=torch.float64)
    moved = x.clone()
    moved[:, :3] += shift[:3]
    d = sphere_signed_distance(w, moved[None, None], torch.tensor([1]))[0, 0]
    torch.testing.assert_close(d, grid(x[:, :3]) - x[:, 3])
    mesh = w.world_mesh(env=1)
    assert len(mesh.faces) > 0 and mesh.bounds[0][0] > 0.4  # occupied cubes moved with the pose
    with pytest.raises(ValueError, match="values: expected a"):
        VoxelGrid(torch.zeros(1, 3, 3), [0, 0, 0], 0.1)
    with pytest.raises(ValueError, match="voxel_size"):
        VoxelGrid(torch.zeros(2, 2, 2), [0, 0, 0], 0.0)

"""Voxel grids of signed distance (cuRobo's ESDF `VoxelGrid`): samples on a regular lattice in the
grid's frame, read back by trilinear interpolation with its exact (piecewise-constant in each cell)
gradient through autograd.

Layout: values (X, Y, Z) in metres; sample (i, j, k) sits at origin + voxel_size * (i, j, k) in the
grid's frame (the first sample is a corner of the grid's box, not a cell centre). Outside the box
the value is the value at the nearest point c of the box plus |x - c| (the triangle inequality makes
it an upper bound of the distance to whatever the grid holds, and it keeps a gradient that points
away from the box).

`voxel_grid_from_world` fills a grid from any `CollisionWorld` environment with the exact sphere
distances (spheres of radius 0, so every obstacle kind the sphere queries know contributes).
"""

from __future__ import annotations

import math

import torch

__all__ = ["VoxelGrid", "trilinear", "voxel_grid_from_world"]


class VoxelGrid:
    """values (X, Y, Z) float, X, Y, Z >= 2; origin (3,) metres; voxel_size metres > 0."""

    def __init__(self, values: torch.Tensor, origin, voxel_size: float):
        if not isinstance(values, torch.Tensor) or values.dim() != 3 or min(values.shape) < 2:
            shape = tuple(values.shape) if isinstance(values, torch.Tensor) else type(values).__name__
            raise ValueError(f"values: expected a (X, Y, Z) tensor with every side >= 2, got {shape}")
        if not values.dtype.is_floating_point or not bool(torch.isfinite(values).all()):
            raise ValueError("values: expected finite float signed distances (metres)")
        origin = torch.as_tensor(origin, dtype=values.dtype, device=values.device)
        if origin.shape != (3,) or not bool(torch.isfinite(origin).all()):
            raise ValueError(f"origin: expected a finite (3,) point, got {origin.tolist()}")
        if isinstance(voxel_size, bool) or not isinstance(voxel_size, (int, float)) or not voxel_size > 0 \
                or not math.isfinite(voxel_size):
            raise ValueError(f"voxel_size: expected a finite number > 0 (metres), got {voxel_size!r}")
        self.values, self.origin, self.voxel_size = values, origin, float(voxel_size)

    @property
    def shape(self) -> tuple[int, int, int]:
        return tuple(self.values.shape)

    def bounds(self) -> torch.Tensor:
        """(2, 3): the box spanned by the samples, in the grid's frame."""
        upper = self.origin + self.voxel_size * (torch.tensor(self.shape, dtype=self.values.dtype,
                                                              device=self.values.device) - 1)
        return torch.stack([self.origin, upper])

    def __call__(self, points: torch.Tensor) -> torch.Tensor:
        """Signed distance (...) at points (..., 3) in the grid's frame (differentiable)."""
        dims = torch.tensor(self.shape, device=points.device)
        return trilinear(self.values[None].to(points.dtype), dims[None], self.origin[None].to(points.dtype),
                         torch.tensor([self.voxel_size], dtype=points.dtype, device=points.device),
                         torch.zeros(points.shape[:-1], dtype=torch.int64, device=points.device), points)

    def memory_bytes(self) -> int:
        return self.values.numel() * self.values.element_size()

    def __repr__(self) -> str:
        return f"VoxelGrid({self.shape}, voxel_size={self.voxel_size}, origin={self.origin.tolist()})"


def trilinear(values: torch.Tensor, dims: torch.Tensor, origin: torch.Tensor, voxel_size: torch.Tensor,
              grid: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
    """Trilinear signed distance of points (..., 3) in grid `grid` (...) int64 of a padded stack:
    values (G, Xmax, Ymax, Zmax), dims (G, 3) int64 (each grid's own sides), origin (G, 3),
    voxel_size (G,). Fixed shapes, no host synchronisation; differentiable in `points`."""
    size = voxel_size[grid][..., None]
    hi = (dims[grid] - 1).to(points.dtype) * size
    local = points - origin[grid]
    inside = torch.minimum(local.clamp_min(0), hi)
    outside = local - inside
    outside_sq = (outside * outside).sum(-1)
    # |x - c| with a zero gradient (not NaN) inside the box.
    beyond = torch.where(outside_sq > 0, outside_sq.clamp_min(1e-30).sqrt(), torch.zeros_like(outside_sq))
    f = inside / size
    cell = f.detach().floor().clamp_max((dims[grid] - 2).to(f.dtype)).clamp_min(0).long()
    t = f - cell
    out = torch.zeros_like(beyond)
    flat = values.reshape(values.shape[0], -1)
    ny, nz = values.shape[2], values.shape[3]
    for corner in range(8):
        o = torch.tensor([(corner >> 2) & 1, (corner >> 1) & 1, corner & 1], device=points.device)
        ijk = cell + o
        w = torch.where(o.bool(), t, 1 - t).prod(-1)
        index = (ijk[..., 0] * ny + ijk[..., 1]) * nz + ijk[..., 2]
        out = out + w * flat[grid, index]
    return out + beyond


@torch.no_grad()
def voxel_grid_from_world(world, lower, upper, voxel_size: float, env: int = 0) -> VoxelGrid:
    """The signed distance of environment `env` of `world` sampled on a lattice covering the box
    [lower, upper] (world frame, metres; the upper side is rounded up to a whole voxel)."""
    from contactnet.planning.spheres import sphere_signed_distance

    lower = torch.as_tensor(lower, dtype=world.dtype, device=world.device)
    upper = torch.as_tensor(upper, dtype=world.dtype, device=world.device)
    if lower.shape != (3,) or upper.shape != (3,) or not bool((upper > lower).all()):
        raise ValueError(f"lower, upper: expected (3,) corners with upper > lower, got {lower.tolist()}, "
                         f"{upper.tolist()}")
    if isinstance(voxel_size, bool) or not isinstance(voxel_size, (int, float)) or not voxel_size > 0:
        raise ValueError(f"voxel_size: expected a number > 0 (metres), got {voxel_size!r}")
    counts = [int(math.ceil(float(s) / voxel_size - 1e-9)) + 1 for s in (upper - lower)]
    axes = [lower[i] + voxel_size * torch.arange(max(c, 2), dtype=world.dtype, device=world.device)
            for i, c in enumerate(counts)]
    centres = torch.stack(torch.meshgrid(*axes, indexing="ij"), -1)
    spheres = torch.cat([centres.reshape(1, 1, -1, 3), torch.zeros(1, 1, centres[..., 0].numel(), 1,
                                                                    dtype=world.dtype, device=world.device)], -1)
    values = sphere_signed_distance(world, spheres, env_idx=torch.tensor([env], device=world.device))
    return VoxelGrid(values.reshape(centres.shape[:-1]), lower, voxel_size)

"""Pose algebra shared by the collision heads: relative poses, box placement and cell-box selection."""

import torch

from contactnet.geometry.poses import compose_poses, invert_poses, quaternion_to_matrix
from contactnet.ops.locc_crop import locc_crop, locc_crop_pool


def relative_pose_features(pose_a: torch.Tensor, pose_b: torch.Tensor) -> torch.Tensor:
    """B's pose in A's frame as position (3) + rotation matrix (9): (..., 12). Depends only on the
    relative pose, so any rigid motion applied to both leaves it unchanged."""
    rel = compose_poses(invert_poses(pose_a), pose_b)
    return torch.cat([rel[..., :3], quaternion_to_matrix(rel[..., 3:]).flatten(-2)], -1)


def box_placement_features(aabb_a: torch.Tensor, aabb_b: torch.Tensor, pose_a: torch.Tensor,
                           pose_b: torch.Tensor) -> torch.Tensor:
    """(..., 18): the offset of B's box centre from A's in A's frame (3), B's rotation in A's frame
    (9), and both box sizes (3 + 3), lengths in units of the pair's mean box diagonal. Unitless
    and independent of where each object's frame origin sits in its box, so a network reading them
    sees O(1) inputs whatever the objects' scale. aabb (..., 2, 3) per object, poses (..., 7);
    leading dimensions broadcast."""
    rel = relative_pose_features(pose_a, pose_b)
    rotation = rel[..., 3:].unflatten(-1, (3, 3))
    size_a, size_b = aabb_a[..., 1, :] - aabb_a[..., 0, :], aabb_b[..., 1, :] - aabb_b[..., 0, :]
    offset = rel[..., :3] + torch.einsum("...ij,...j->...i", rotation, aabb_b.mean(-2)) - aabb_a.mean(-2)
    scale = (0.5 * (size_a.norm(dim=-1) + size_b.norm(dim=-1))).clamp_min(1e-9)[..., None]
    shape = rel.shape[:-1]
    return torch.cat([offset / scale, rel[..., 3:], (size_a / scale).expand(*shape, 3),
                      (size_b / scale).expand(*shape, 3)], -1)


def cell_centres(aabb: torch.Tensor, grid: int) -> torch.Tensor:
    """(..., M³, 3) centres of an M³ grid over boxes (..., 2, 3), in x-major order like the encoder."""
    steps = (torch.arange(grid, device=aabb.device, dtype=aabb.dtype) + 0.5) / grid
    ix, iy, iz = torch.meshgrid(steps, steps, steps, indexing="ij")
    unit = torch.stack([ix, iy, iz], -1).reshape(-1, 3)
    lo, hi = aabb[..., 0:1, :], aabb[..., 1:2, :]
    return lo + unit * (hi - lo)


def cells_near_box(centres: torch.Tensor, half_diagonal: torch.Tensor, pose_cells: torch.Tensor,
                   pose_box: torch.Tensor, aabb_box: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Mask (..., C) of the cells whose centre, moved into the box object's frame, lies inside its
    box grown by the cell half-diagonal (a cell that touches the box is never missed), and those
    centres in the box's frame (..., C, 3). Leading dimensions broadcast."""
    to_box = compose_poses(invert_poses(pose_box), pose_cells)  # cells' frame -> box's frame
    rotation = quaternion_to_matrix(to_box[..., 3:])
    local = torch.einsum("...ij,...cj->...ci", rotation, centres) + to_box[..., None, :3]
    lo = aabb_box[..., 0:1, :] - half_diagonal[..., None, None]
    hi = aabb_box[..., 1:2, :] + half_diagonal[..., None, None]
    return ((local >= lo) & (local <= hi)).all(-1), local


def local_crop(aabb: torch.Tensor, grid: int, pose: torch.Tensor, pose_other: torch.Tensor,
               aabb_other: torch.Tensor, pool: tuple[torch.Tensor, torch.Tensor] | None = None
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """LOCC's crop of an object's M³ cells against the other object's box, from boxes and poses:
    per-cell weights (..., M³) (the `cells_near_box` mask of `cell_centres`, divided by its count),
    the kept cells' mean centre in units of the other box (..., 3) ([-1, 1] inside it; 0 when no
    cell is kept) and the kept fraction (..., 1). Leading dimensions broadcast.

    pool: (rows (N·M³, F), ids) a table of embeddings stored as rows and each query's id in it
    (leading dimensions (Q,)): the weights are not formed, and the first output is instead each
    query's crop, its kept cells' mean row (Q, F) (`locc_crop_pool`; no gradient to the rows).

    The masks come from the fused `contactnet.ops.locc_crop` (no gradient: they are piecewise
    constant); the mean centre is moved into the other frame here, so it stays differentiable in
    the poses.
    """
    to_box = compose_poses(invert_poses(pose_other), pose)  # own frame -> other's frame
    rotation = quaternion_to_matrix(to_box[..., 3:])
    other_lo, other_hi = aabb_other[..., 0, :], aabb_other[..., 1, :]
    offset = to_box[..., :3] - 0.5 * (other_lo + other_hi)  # relative to the other box's centre
    half_diag = 0.5 * ((aabb[..., 1, :] - aabb[..., 0, :]) / grid).norm(dim=-1)
    reach = 0.5 * (other_hi - other_lo) + half_diag[..., None]
    shape = torch.broadcast_shapes(aabb.shape[:-2], rotation.shape[:-2], aabb_other.shape[:-2])
    dtype = torch.promote_types(aabb.dtype, rotation.dtype)

    def flat(x: torch.Tensor, *tail: int) -> torch.Tensor:
        return x.detach().to(dtype).expand(*shape, *tail).reshape(-1, *tail).contiguous()

    args = (flat(aabb, 2, 3), flat(rotation, 3, 3), flat(offset, 3), flat(reach, 3), grid)
    crop = locc_crop(*args) if pool is None else locc_crop_pool(*args, pool[0].detach(), pool[1])
    count = crop.count.view(*shape, 1)
    mean_local = (torch.einsum("...ij,...j->...i", rotation, crop.mean_own.view(*shape, 3))
                  + offset * (count > 0).to(dtype))
    where = 2 * mean_local / (other_hi - other_lo).clamp_min(1e-6)
    first = crop.weights.view(*shape, grid**3) if pool is None else crop.pooled
    return first, where, count / grid**3


def grid_coordinates(aabb: torch.Tensor, grid: int, pose: torch.Tensor, pose_other: torch.Tensor,
                     aabb_other: torch.Tensor) -> torch.Tensor:
    """(..., M³, 3) centres of an object's M³ cells moved into the other object's frame, in the
    other box's units: [-1, 1] across it on each axis (grid_sample's align_corners=False units)."""
    return point_coordinates(cell_centres(aabb, grid), pose, pose_other, aabb_other)


def point_coordinates(points: torch.Tensor, pose: torch.Tensor, pose_other: torch.Tensor,
                      aabb_other: torch.Tensor) -> torch.Tensor:
    """(..., K, 3) an object's points (..., K, 3) in its frame moved into the other object's frame,
    in the other box's units as `grid_coordinates`. Leading dimensions broadcast."""
    rotation, translation = frame_into(pose, pose_other)
    local = torch.einsum("...ij,...cj->...ci", rotation, points) + translation[..., None, :]
    lo, hi = aabb_other[..., 0:1, :], aabb_other[..., 1:2, :]
    return 2 * (local - lo) / (hi - lo).clamp_min(1e-6) - 1


def frame_into(pose: torch.Tensor, pose_other: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The rotation (..., 3, 3) and translation (..., 3) that take a point of the object at `pose`
    (its frame) into the frame of the object at `pose_other`. Poses (..., 7) broadcast."""
    to_other = compose_poses(invert_poses(pose_other), pose)
    return quaternion_to_matrix(to_other[..., 3:]), to_other[..., :3]

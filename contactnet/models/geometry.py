"""Pose algebra shared by the collision heads: relative poses and cell-box selection."""

import torch

from contactnet.geometry.poses import compose_poses, invert_poses, quaternion_to_matrix


def relative_pose_features(pose_a: torch.Tensor, pose_b: torch.Tensor) -> torch.Tensor:
    """B's pose in A's frame as position (3) + rotation matrix (9): (..., 12). Depends only on the
    relative pose, so any rigid motion applied to both leaves it unchanged."""
    rel = compose_poses(invert_poses(pose_a), pose_b)
    return torch.cat([rel[..., :3], quaternion_to_matrix(rel[..., 3:]).flatten(-2)], -1)


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

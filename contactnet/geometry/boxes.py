"""Oriented bounding boxes: their corners, and whether two posed boxes overlap."""

import torch

from contactnet.geometry.poses import compose_poses, invert_poses, quaternion_to_matrix

_CORNER_BITS = torch.tensor([[i >> 2 & 1, i >> 1 & 1, i & 1] for i in range(8)], dtype=torch.bool)


def boxes_overlap(aabb_a: torch.Tensor, aabb_b: torch.Tensor, pose_a: torch.Tensor, pose_b: torch.Tensor) -> torch.Tensor:
    """Whether two oriented boxes overlap: object-frame boxes aabb (..., 2, 3) (min and max
    corners) placed at poses (..., 7). Separating-axis test over the 15 candidate axes; touching
    counts as overlapping. Leading dimensions broadcast."""
    rel = compose_poses(invert_poses(pose_a), pose_b)  # B in A's frame
    R = quaternion_to_matrix(rel[..., 3:])
    ca = (aabb_a[..., 0, :] + aabb_a[..., 1, :]) / 2
    cb = (aabb_b[..., 0, :] + aabb_b[..., 1, :]) / 2
    ha = (aabb_a[..., 1, :] - aabb_a[..., 0, :]) / 2
    hb = (aabb_b[..., 1, :] - aabb_b[..., 0, :]) / 2
    t = rel[..., :3] + (R @ cb[..., None]).squeeze(-1) - ca  # centre offset in A's frame
    ha, hb = ha.expand_as(t), hb.expand_as(t)
    axes_a = torch.eye(3, dtype=t.dtype, device=t.device).expand(*t.shape[:-1], 3, 3)
    axes_b = R.transpose(-1, -2)  # rows: B's axes in A's frame
    cross = torch.cross(axes_a[..., :, None, :].expand(*t.shape[:-1], 3, 3, 3),
                        axes_b[..., None, :, :].expand(*t.shape[:-1], 3, 3, 3), dim=-1).flatten(-3, -2)
    axes = torch.cat([axes_a, axes_b, cross], -2)  # (..., 15, 3)
    proj_a = (axes.abs() * ha[..., None, :]).sum(-1)
    proj_b = ((axes @ R).abs() * hb[..., None, :]).sum(-1)
    dist = (axes @ t[..., None]).squeeze(-1).abs()
    degenerate = axes.norm(dim=-1) < 1e-9  # parallel edge axes separate nothing
    return ((dist <= proj_a + proj_b) | degenerate).all(-1)



def box_corners(aabb: torch.Tensor) -> torch.Tensor:
    """(..., 8, 3) corners of boxes aabb (..., 2, 3) (min and max corners)."""
    return torch.where(_CORNER_BITS.to(aabb.device), aabb[..., None, 1, :], aabb[..., None, 0, :])

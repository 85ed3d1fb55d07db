"""Pure-torch reference of `contactnet.ops.locc_crop` (float64-capable, any device)."""

import torch


def locc_crop(aabb: torch.Tensor, rotation: torch.Tensor, offset: torch.Tensor, reach: torch.Tensor,
              grid: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(weights (Q, M³), mean_own (Q, 3), count (Q,)): see the op. Separable: a cell centre is
    lo + (i, j, k)-steps along the own axes, so its position in the other frame is a sum of three
    per-axis terms, added in the op's order so the masks agree exactly."""
    m = grid
    lo, size = aabb[:, 0, :], aabb[:, 1, :] - aabb[:, 0, :]
    steps = (torch.arange(m, device=aabb.device, dtype=aabb.dtype) + 0.5) / m
    axis = lo[:, :, None] + size[:, :, None] * steps  # (Q, 3, M) cell-centre coordinates
    per_axis = rotation[:, :, :, None] * axis[:, None, :, :]  # (Q, 3 out, 3 own axes, M)
    local = (offset[:, :, None, None, None] + per_axis[:, :, 0, :, None, None]
             + per_axis[:, :, 1, None, :, None] + per_axis[:, :, 2, None, None, :])
    mask = (local.abs() <= reach[:, :, None, None, None]).all(1)  # (Q, M, M, M)
    count = mask.sum((1, 2, 3)).to(aabb.dtype)
    weights = mask.to(aabb.dtype) / count.clamp_min(1)[:, None, None, None]
    mean_own = torch.stack([(weights.sum((2, 3)) * axis[:, 0]).sum(-1),
                            (weights.sum((1, 3)) * axis[:, 1]).sum(-1),
                            (weights.sum((1, 2)) * axis[:, 2]).sum(-1)], -1)
    return weights.flatten(1), mean_own, count


def locc_crop_pool(aabb: torch.Tensor, rotation: torch.Tensor, offset: torch.Tensor, reach: torch.Tensor, grid: int,
                   rows: torch.Tensor, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(pooled (Q, F), mean_own (Q, 3), count (Q,)): the crop's weights applied to each query's
    rows of the table (N·M³, F), as an embedding bag."""
    weights, mean_own, count = locc_crop(aabb, rotation, offset, reach, grid)
    cells = grid**3
    offsets = ids[:, None] * cells + torch.arange(cells, device=ids.device)
    return torch.nn.functional.embedding_bag(offsets, rows, per_sample_weights=weights, mode="sum"), mean_own, count

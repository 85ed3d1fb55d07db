"""Pure-torch reference of `contactnet.ops.locc_point_cooccupancy` (any dtype and device): the
torch composition of `LOCC.predict_indexed`'s surface-point term, over every point of every query."""

import torch

from contactnet.ops.grid_sample_rows import grid_sample_rows_reference


def locc_point_cooccupancy(points, point_queries, keys, occupancy, grid, ids_own, ids_other, rotation, translation,
                           aabb_other, count) -> torch.Tensor:
    """(Q, D): see the op. Sites tied on rank at the cut are chosen by `torch.topk`."""
    local = torch.einsum("qij,qkj->qki", rotation, points[ids_own]) + translation[:, None, :]
    lo, hi = aabb_other[:, 0:1, :], aabb_other[:, 1:2, :]
    coords = 2 * (local - lo) / (hi - lo).clamp_min(1e-6) - 1  # (Q, K, 3)
    keep = (coords.abs() <= 1).all(-1)
    near = grid_sample_rows_reference(occupancy[:, None], grid, ids_other, coords)[..., 0]
    rank = torch.where(keep, 4.0 + 2.0 * near / (1.0 + near) + 1.0 / (1.0 + coords.square().sum(-1)), -1.0)
    chosen = torch.zeros_like(keep)
    chosen.scatter_(1, rank.topk(min(count, rank.shape[1]), -1).indices, True)
    values = point_queries[ids_own] * grid_sample_rows_reference(keys, grid, ids_other, coords)  # (Q, K, D)
    read = (keep & chosen)[..., None]
    best = torch.where(read, values, torch.finfo(values.dtype).min).amax(1)
    return torch.where(read.any(1), best, torch.zeros_like(best))

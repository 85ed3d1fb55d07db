"""How deep one object's surface points reach into another, read from the other's point cloud alone
(LOCC's `surface_depth` input).

At each own point x near the other's box, the other's nearest cloud points b_i (normals n_i) within
a radius r give the inverse-distance weighted point-to-plane distance

    s(x) = sum_i w_i (x - b_i)·n_i / sum_i w_i,    w_i = 1 / (|x - b_i| + r / 32),

negative where x lies behind the other's surface; a query keeps the least s over its own points, r
where no own point has a neighbour. Near contact this reads the surfaces at the clouds' spacing,
where a grid of features blurs them over a cell; past r from the other's cloud (a deep overlap) it
says nothing, which the net's other terms answer.

The op (C++ and CUDA from one header) finds the point and its neighbours, searching only the
other's grid cells the ball meets (its points come sorted by cell, `sort_by_cell`);
`cloud_depth` then evaluates s there in torch, so it is differentiable in the poses (the planner's
learned cost) with no backward kernel.
"""

import torch

from contactnet._extension import load_extension
from contactnet.ops._checks import as_index_tensor, check_float_tensor, check_int, check_same_batch, \
    check_same_device, check_index_values, values_checked_here

load_extension()

_ops = torch.ops.contactnet

__all__ = ["cloud_depth", "sort_by_cell"]

SOFTENING = 32  # w_i = 1 / (|x - b_i| + r / SOFTENING), as the kernel weighs


def sort_by_cell(points: torch.Tensor, normals: torch.Tensor, aabb: torch.Tensor,
                 grid: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Clouds in the order `cloud_depth` searches them: points, normals (N, K, 3) sorted by their
    cell of a grid³ over their boxes aabb (N, 2, 3) (stable within a cell), and starts
    (N, grid³ + 1) int32, each cell's first point, then K."""
    check_float_tensor(points, "points", (None, None, 3))
    n, k = points.shape[:2]
    check_float_tensor(normals, "normals", (n, k, 3))
    check_float_tensor(aabb, "aabb", (n, 2, 3))
    grid = check_int(grid, "grid", 1)
    lo, extent = aabb[:, None, 0], (aabb[:, None, 1] - aabb[:, None, 0]).clamp_min(1e-6)  # the kernel's clamp
    cell = ((points - lo) * (grid / extent)).floor().long().clamp(0, grid - 1)
    flat = (cell[..., 0] * grid + cell[..., 1]) * grid + cell[..., 2]
    order = flat.argsort(dim=1, stable=True)[..., None].expand(n, k, 3)
    counts = torch.zeros(n, grid**3, dtype=torch.int32, device=points.device)
    counts.scatter_add_(1, flat, torch.ones_like(flat, dtype=torch.int32))
    starts = torch.nn.functional.pad(counts.cumsum(-1, dtype=torch.int32), (1, 0))
    return points.gather(1, order).contiguous(), normals.gather(1, order).contiguous(), starts


def cloud_depth(points: torch.Tensor, normals: torch.Tensor, starts: torch.Tensor, ids_own, ids_other,
                radius: torch.Tensor, rotation: torch.Tensor, translation: torch.Tensor, aabb_other: torch.Tensor,
                neighbours: int = 4) -> torch.Tensor:
    """(Q,) per query the least weighted point-to-plane distance s of the own object's points to
    the other's cloud (module docstring), the query's radius where none of them has a neighbour.

    points, normals (N, K, 3): each object's points (its frame) and unit normals, sorted by their
    cell of an M³ grid over its box; starts (N, M³ + 1) int32 (both from `sort_by_cell`); ids_own,
    ids_other (Q,) integer object ids; radius (Q,): each query's search radius; rotation
    (Q, 3, 3), translation (Q, 3): the own frame into the other's; aabb_other (Q, 2, 3): the
    other's box (whose cells sort its points); neighbours: cloud points read per own point (1 to
    8). One float dtype, one device, contiguous. Differentiable in rotation and translation (the
    chosen point and neighbours held fixed)."""
    check_float_tensor(points, "points", (None, None, 3))
    n, k = points.shape[:2]
    check_float_tensor(normals, "normals", (n, k, 3))
    if not isinstance(starts, torch.Tensor) or starts.dtype != torch.int32:
        raise TypeError(f"starts: expected an int32 tensor (sort_by_cell), got "
                        f"{starts.dtype if isinstance(starts, torch.Tensor) else type(starts)}")
    ids_own = as_index_tensor(ids_own, "ids_own", (None,), points.device)
    q = ids_own.shape[0]
    ids_other = as_index_tensor(ids_other, "ids_other", (q,), points.device)
    check_float_tensor(radius, "radius", (q,))
    check_float_tensor(rotation, "rotation", (q, 3, 3))
    check_float_tensor(translation, "translation", (q, 3))
    check_float_tensor(aabb_other, "aabb_other", (q, 2, 3))
    neighbours = check_int(neighbours, "neighbours", 1)
    check_same_batch({"points": points, "normals": normals})
    check_same_batch({"radius": radius, "rotation": rotation, "translation": translation, "aabb_other": aabb_other})
    check_same_device(starts, "starts", points, "points")
    for name, x in (("normals", normals), ("radius", radius), ("rotation", rotation), ("translation", translation),
                    ("aabb_other", aabb_other)):
        check_same_device(x, name, points, "points")
        if x.dtype != points.dtype:
            raise TypeError(f"{name} has dtype {x.dtype} but points has {points.dtype}")
    if values_checked_here(ids_own):
        check_index_values(ids_own, "ids_own", n)
        check_index_values(ids_other, "ids_other", n)
    depth, own, near = _ops.cloud_depth(points, normals, starts, ids_own, ids_other, radius, rotation.detach(),
                                        translation.detach(), aabb_other, neighbours)
    if not (torch.is_grad_enabled() and (rotation.requires_grad or translation.requires_grad)):
        return depth
    # s again at the chosen point, in torch: the gradient in the poses.
    found = own >= 0
    own_row = ids_own * k + own.clamp_min(0).long()
    x = torch.einsum("qij,qj->qi", rotation, points.reshape(-1, 3)[own_row]) + translation
    valid = near >= 0
    rows = ids_other[:, None] * k + near.clamp_min(0).long()
    b, nb = points.reshape(-1, 3)[rows], normals.reshape(-1, 3)[rows]
    gap = x[:, None] - b
    r = radius
    weight = torch.where(valid, 1 / (gap.norm(dim=-1) + r[:, None] / SOFTENING), 0)
    s = (weight * (gap * nb).sum(-1)).sum(-1) / weight.sum(-1).clamp_min(torch.finfo(weight.dtype).tiny)
    return torch.where(found, s, r)


@torch.library.register_fake("contactnet::cloud_depth")
def _(points, normals, starts, ids_own, ids_other, radius, rotation, translation, aabb_other, neighbours):
    q = ids_own.shape[0]
    return (points.new_empty((q,)), points.new_empty((q,), dtype=torch.int32),
            points.new_empty((q, neighbours), dtype=torch.int32))

"""LOCC's co-occupancy term probed at surface points, as one fused op for queries against an
embedding table (`LOCC.predict_indexed` with cross_sites "points").

The torch composition moves all K of the own object's encoded points into the other box per query,
ranks them, keeps the top `count` with `torch.topk`, and samples the other's key grid at each:
about a dozen (Q, K, ·) tensors, though a query keeps only the points inside the other box (a
median of 3 to 26 of 1,500 on near-contact and uniform pairs). The op makes one pass over a
query's points and ranks and samples only the kept ones, with the same rank and the same
trilinear sums as `grid_sample_rows`. Same values up to the rounding of the points' transform
(and, where kept points tie on rank at the cut, which of them are read).

Differentiable with respect to `rotation` and `translation` (each channel's max is its argmax
point's query ⊙ key, the key trilinear in the point's coordinates: the poses' gradient a
planner's learned cost needs) and to `point_queries` and `keys` (what training needs); not to the
points, the occupancy or the boxes.
"""

import torch

from contactnet._extension import load_extension
from contactnet.ops._checks import as_index_tensor, check_float_tensor, check_int, check_same_batch, \
    check_same_device, check_index_values, values_checked_here

load_extension()

_ops = torch.ops.contactnet

__all__ = ["locc_point_cooccupancy"]


def locc_point_cooccupancy(points: torch.Tensor, point_queries: torch.Tensor, keys: torch.Tensor,
                           occupancy: torch.Tensor, grid: int, ids_own, ids_other, rotation: torch.Tensor,
                           translation: torch.Tensor, aabb_other: torch.Tensor, count: int) -> torch.Tensor:
    """(Q, D): per channel, the max over a query's read sites of query ⊙ key, 0 where it keeps no point.

    points (N, K, 3), point_queries (N, K, D): each object's encoded points (its frame) and their
    co-occupancy queries; keys (N·M³, D), occupancy (N·M³,): each object's key grid and points per
    cell as rows (`grid_sample_rows`' layout), grid = M; ids_own, ids_other (Q,) integer object
    ids; rotation (Q, 3, 3), translation (Q, 3): the own frame into the other's; aabb_other
    (Q, 2, 3): the other's box. A query's sites are its points inside the other box; past
    `count` of them, the `count` of highest rank (`LOCC._cells`: the other's points per cell
    there, then nearness to its box centre). One float dtype, one device, contiguous."""
    check_float_tensor(points, "points", (None, None, 3))
    n, k = points.shape[:2]
    check_float_tensor(point_queries, "point_queries", (n, k, None))
    d = point_queries.shape[2]
    grid = check_int(grid, "grid", 1)
    check_float_tensor(keys, "keys", (n * grid**3, d))
    check_float_tensor(occupancy, "occupancy", (n * grid**3,))
    ids_own = as_index_tensor(ids_own, "ids_own", (None,), points.device)
    q = ids_own.shape[0]
    ids_other = as_index_tensor(ids_other, "ids_other", (q,), points.device)
    check_float_tensor(rotation, "rotation", (q, 3, 3))
    check_float_tensor(translation, "translation", (q, 3))
    check_float_tensor(aabb_other, "aabb_other", (q, 2, 3))
    count = check_int(count, "count", 1)
    check_same_batch({"points": points, "point_queries": point_queries})
    check_same_batch({"rotation": rotation, "translation": translation, "aabb_other": aabb_other})
    for name, x in (("keys", keys), ("occupancy", occupancy), ("rotation", rotation)):
        check_same_device(x, name, points, "points")
        if x.dtype != points.dtype:
            raise TypeError(f"{name} has dtype {x.dtype} but points has {points.dtype}")
    if values_checked_here(ids_own):
        check_index_values(ids_own, "ids_own", n)
        check_index_values(ids_other, "ids_other", n)
    return _ops.locc_point_cooccupancy(points, point_queries, keys, occupancy, grid, ids_own, ids_other, rotation,
                                       translation, aabb_other, count)[0]


@torch.library.register_fake("contactnet::locc_point_cooccupancy")
def _(points, point_queries, keys, occupancy, grid, ids_own, ids_other, rotation, translation, aabb_other, count):
    shape = (ids_own.shape[0], point_queries.shape[2])
    return points.new_empty(shape), points.new_empty(shape, dtype=torch.int32)


@torch.library.register_fake("contactnet::locc_point_cooccupancy_backward")
def _(points, point_queries, keys, occupancy, grid, ids_own, ids_other, rotation, translation, aabb_other, count, arg,
      grad_values, table_grads):
    table = (point_queries.new_empty(point_queries.shape), keys.new_empty(keys.shape)) if table_grads else \
        (points.new_empty((0,)), points.new_empty((0,)))
    return rotation.new_empty(rotation.shape), translation.new_empty(translation.shape), *table


def _setup(ctx, inputs, output):
    points, point_queries, keys, occupancy, grid, ids_own, ids_other, rotation, translation, aabb_other, count = inputs
    for name, x in (("points", points), ("occupancy", occupancy), ("aabb_other", aabb_other)):
        if x.requires_grad:
            raise ValueError(f"{name}: locc_point_cooccupancy differentiates the poses (rotation, translation), "
                             f"point_queries and keys, not {name}")
    ctx.grid, ctx.count = grid, count
    ctx.table_grads = point_queries.requires_grad or keys.requires_grad
    ctx.save_for_backward(points, point_queries, keys, occupancy, ids_own, ids_other, rotation, translation,
                          aabb_other, output[1])


def _backward(ctx, grad_values, grad_arg):
    points, point_queries, keys, occupancy, ids_own, ids_other, rotation, translation, aabb_other, arg = \
        ctx.saved_tensors
    if grad_values is None:
        return (None,) * 11
    grad_rotation, grad_translation, grad_point_queries, grad_keys = _ops.locc_point_cooccupancy_backward(
        points, point_queries, keys, occupancy, ctx.grid, ids_own, ids_other, rotation, translation, aabb_other,
        ctx.count, arg, grad_values.contiguous(), ctx.table_grads)
    if not ctx.table_grads:
        grad_point_queries = grad_keys = None
    return (None, grad_point_queries, grad_keys, None, None, None, None, grad_rotation, grad_translation, None,
            None)


torch.library.register_autograd("contactnet::locc_point_cooccupancy", _backward, setup_context=_setup)

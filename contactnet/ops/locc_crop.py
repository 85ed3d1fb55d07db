"""LOCC's local crop as one fused op: which of an object's M³ embedding cells may overlap the
other object's box, with their mean centre and count, for Q queries in one pass.

The pure-torch reference (`contactnet.ops.reference.locc_crop`) builds the same masks from a
handful of (Q, 3, M, M, M) tensors; on a CPU that costs several times the collision head itself.
Outputs are piecewise constant in the poses, so they carry no gradient (the model's pose-dependent
features are formed from `rotation` and `offset` in torch, see `contactnet.models.geometry`).
"""

from typing import NamedTuple

import torch

from contactnet._extension import load_extension
from contactnet.ops._checks import as_index_tensor, check_float_tensor, check_index_values, check_same_batch, \
    check_same_device, values_checked_here

load_extension()

_ops = torch.ops.contactnet
MAX_GRID = 16  # csrc/locc_crop/locc_crop_kernels.h: kCropMaxGrid


class Crop(NamedTuple):
    weights: torch.Tensor  # (Q, M³) 1 / count on kept cells (x-major order), else 0
    mean_own: torch.Tensor  # (Q, 3) mean kept-cell centre in the own frame; 0 when none is kept
    count: torch.Tensor  # (Q,) number of kept cells, as the input dtype


class PooledCrop(NamedTuple):
    pooled: torch.Tensor  # (Q, F) the kept cells' mean row; 0 when none is kept
    mean_own: torch.Tensor  # (Q, 3) as Crop's
    count: torch.Tensor  # (Q,) as Crop's


def locc_crop(aabb: torch.Tensor, rotation: torch.Tensor, offset: torch.Tensor, reach: torch.Tensor,
              grid: int) -> Crop:
    """Cells of an M³ grid over each query's own box `aabb` (Q, 2, 3) whose centres, moved into the
    other box's frame by `rotation` (Q, 3, 3) and `offset` (Q, 3) (own origin there, relative to
    the other box's centre), lie within `reach` (Q, 3) of that centre on every axis (the other
    box's half-size grown by the cell half-diagonal). float32/float64, one device, contiguous."""
    _check_crop(aabb, rotation, offset, reach, grid)
    return Crop(*_ops.locc_crop(aabb, rotation, offset, reach, grid))


def locc_crop_pool(aabb: torch.Tensor, rotation: torch.Tensor, offset: torch.Tensor, reach: torch.Tensor,
                   grid: int, rows: torch.Tensor, ids) -> PooledCrop:
    """`locc_crop` pooled: in place of the weights, the kept cells' mean row (Q, F) of each query's
    embedding in a table stored as rows (N·M³, F) (embedding n's cell c at row n·M³ + c; ids (Q,)
    integer in [0, N)): an embedding bag over the weights, which reads only the kept cells. No
    gradient (the caller pools with the weights where the rows need one)."""
    _check_crop(aabb, rotation, offset, reach, grid)
    check_float_tensor(rows, "rows", (None, None))
    n = rows.shape[0] // grid**3
    if rows.shape[0] != n * grid**3:
        raise ValueError(f"rows: expected N·M³ rows (M = {grid}), got {rows.shape[0]}")
    check_same_device(rows, "rows", aabb, "aabb")
    if rows.dtype != aabb.dtype:
        raise TypeError(f"rows has dtype {rows.dtype} but aabb has {aabb.dtype}")
    ids = as_index_tensor(ids, "ids", (aabb.shape[0],), aabb.device)
    if values_checked_here(ids):
        check_index_values(ids, "ids", n)
    return PooledCrop(*_ops.locc_crop_pool(aabb, rotation, offset, reach, grid, rows, ids))


def _check_crop(aabb, rotation, offset, reach, grid) -> None:
    check_float_tensor(aabb, "aabb", (None, 2, 3))
    q = aabb.shape[0]
    check_float_tensor(rotation, "rotation", (q, 3, 3))
    check_float_tensor(offset, "offset", (q, 3))
    check_float_tensor(reach, "reach", (q, 3))
    check_same_batch({"aabb": aabb, "rotation": rotation, "offset": offset, "reach": reach})
    if not isinstance(grid, int) or not 2 <= grid <= MAX_GRID:
        raise ValueError(f"grid: expected an int in [2, {MAX_GRID}], got {grid!r}")


@torch.library.register_fake("contactnet::locc_crop")
def _(aabb, rotation, offset, reach, grid):
    q = aabb.shape[0]
    return aabb.new_empty((q, grid**3)), aabb.new_empty((q, 3)), aabb.new_empty((q,))


@torch.library.register_fake("contactnet::locc_crop_pool")
def _(aabb, rotation, offset, reach, grid, rows, ids):
    q = aabb.shape[0]
    return aabb.new_empty((q, rows.shape[1])), aabb.new_empty((q, 3)), aabb.new_empty((q,))

"""Trilinear samples of many M³ grids stored as the rows of one table, each query reading its own
grid in place: `F.grid_sample` (zero padding, align_corners=False) on a per-query copy of the grid,
without the copy. A LOCC table's co-occupancy keys are D·M³ numbers per object (65k at 16³, D 16),
which `predict_indexed` used to copy for every query before sampling a few hundred points of them.

Differentiable with respect to the sample coordinates (the kernel's backward); where the rows
themselves need a gradient (training through `predict_indexed`), the torch composition runs
instead, with the same values.
"""

import torch
import torch.nn.functional as F

from contactnet._extension import load_extension
from contactnet.ops._checks import as_index_tensor, check_float_tensor, values_checked_here

load_extension()

_ops = torch.ops.contactnet

__all__ = ["grid_sample_rows", "grid_sample_rows_reference"]


def grid_sample_rows(rows: torch.Tensor, grid: int, ids, coords: torch.Tensor) -> torch.Tensor:
    """(Q, P, D) samples of grid ids[q] at coords[q] (P, 3).

    rows (N·M³, D) float: grid n's cell (i, j, k) at row n·M³ + (i·M + j)·M + k; grid: M;
    ids (Q,) integer in [0, N); coords (Q, P, 3) of the rows' dtype, in the grid's box units
    ([-1, 1] across it, cell centres at (2 i + 1) / M − 1; coords[..., 0] along i; a NaN sample
    reads zero). One device."""
    check_float_tensor(rows, "rows", (None, None))
    if isinstance(grid, bool) or not isinstance(grid, int) or grid < 1:
        raise ValueError(f"grid: expected an int M >= 1, got {grid!r}")
    ids = as_index_tensor(ids, "ids", (None,), rows.device)
    check_float_tensor(coords, "coords", (ids.shape[0], None, 3))
    n = rows.shape[0] // grid**3
    if rows.shape[0] != n * grid**3:
        raise ValueError(f"rows: expected N·M³ rows (M = {grid}), got {rows.shape[0]}")
    if ids.numel() and values_checked_here(ids) and not (0 <= int(ids.min()) and int(ids.max()) < n):
        raise ValueError(f"ids: expected grid ids in [0, {n}), got [{int(ids.min())}, {int(ids.max())}]")
    if rows.requires_grad and torch.is_grad_enabled():
        return grid_sample_rows_reference(rows, grid, ids, coords)
    return _ops.grid_sample_rows(rows.contiguous(), grid, ids, coords.contiguous())


def grid_sample_rows_reference(rows: torch.Tensor, grid: int, ids: torch.Tensor, coords: torch.Tensor) -> torch.Tensor:
    """`grid_sample_rows` by `F.grid_sample` on each query's copy of its grid (the test reference,
    and the path that also differentiates the rows)."""
    m, d = grid, rows.shape[1]
    grids = rows.reshape(-1, m, m, m, d)[ids].permute(0, 4, 1, 2, 3)  # (Q, D, M, M, M): the copies
    out = F.grid_sample(grids, coords.flip(-1)[:, :, None, None], align_corners=False)  # (Q, D, P, 1, 1)
    return out.reshape(ids.shape[0], d, -1).transpose(1, 2)


@torch.library.register_fake("contactnet::grid_sample_rows")
def _(rows, grid, ids, coords):
    return rows.new_empty((ids.shape[0], coords.shape[1], rows.shape[1]))


@torch.library.register_fake("contactnet::grid_sample_rows_backward")
def _(rows, grid, ids, coords, grad_out):
    return coords.new_empty(coords.shape)


def _setup(ctx, inputs, output):
    rows, grid, ids, coords = inputs
    if rows.requires_grad:
        raise ValueError("rows: grid_sample_rows differentiates the coordinates only; call the Python "
                         "wrapper, which runs the torch composition when the rows need a gradient")
    ctx.grid = grid
    ctx.save_for_backward(rows, ids, coords)


def _backward(ctx, grad_out):
    rows, ids, coords = ctx.saved_tensors
    grad = _ops.grid_sample_rows_backward(rows, ctx.grid, ids, coords, grad_out.contiguous())
    return None, None, None, grad


torch.library.register_autograd("contactnet::grid_sample_rows", _backward, setup_context=_setup)

"""Batched dense SPD solves for the stepper's Newton systems: x = (H + shift·I)⁻¹ g per environment,
and whether each shifted H factorised. On the CPU one op (csrc/ipc/cholesky_solve.h: 1.3–2.5× torch's
Cholesky at the stepper's sizes, whose triangle masking and column-major copies cost more than the
factorisation there); on a GPU torch's batched Cholesky.
"""

from __future__ import annotations

import torch

from contactnet._extension import load_extension
from contactnet.ops._checks import check_float_tensor, check_same_device, inputs_trusted

load_extension()

__all__ = ["cholesky_solve"]


def cholesky_solve(hessian: torch.Tensor, gradient: torch.Tensor, shift: torch.Tensor,
                   fixed: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Solution (E, n) of (H + shift·I) x = g and factorised (E,) bool, per environment.

    hessian (E, n, n) symmetric (only its lower triangle is read), gradient (E, n), shift (E,),
    one float dtype and device. An environment whose shifted H is not positive definite (or not
    finite) gets x = NaN and False (the caller shifts it further). fixed: optional (E, n) bool,
    DOFs held in place: their rows and columns of `hessian` are overwritten by the identity's (in
    place) and their gradient entries read as 0, so their x is 0."""
    if not inputs_trusted():
        check_float_tensor(hessian, "hessian", (None, None, None))
        E, n = hessian.shape[:2]
        if hessian.shape[2] != n:
            raise ValueError(f"hessian: expected square matrices (E, n, n), got {tuple(hessian.shape)}")
        for name, t, shape in (("gradient", gradient, (E, n)), ("shift", shift, (E,))):
            check_float_tensor(t, name, shape)
            check_same_device(t, name, hessian, "hessian")
            if t.dtype != hessian.dtype:
                raise TypeError(f"{name}: expected {hessian.dtype} like hessian, got {t.dtype}")
        if fixed is not None:
            if not isinstance(fixed, torch.Tensor) or fixed.dtype != torch.bool or fixed.shape != (E, n):
                raise TypeError(f"fixed: expected a bool tensor of shape ({E}, {n})")
            check_same_device(fixed, "fixed", hessian, "hessian")
            fixed = fixed.contiguous()
    if hessian.device.type == "cpu":
        return torch.ops.contactnet.ipc_cholesky_solve(hessian, gradient, shift, fixed)
    if fixed is not None:
        hessian.masked_fill_(fixed[:, :, None] | fixed[:, None, :], 0.0)
        hessian.diagonal(dim1=1, dim2=2).add_(fixed.to(hessian.dtype))
        gradient = gradient.masked_fill(fixed, 0.0)
    n = hessian.shape[1]
    shifted = hessian + shift[:, None, None] * torch.eye(n, dtype=hessian.dtype, device=hessian.device)
    L, info = torch.linalg.cholesky_ex(shifted)
    ok = info == 0
    x = cholesky_factor_solve(L, gradient)
    return torch.where(ok[:, None], x, float("nan")), ok


def cholesky_factor_solve(L: torch.Tensor, gradient: torch.Tensor) -> torch.Tensor:
    """x (E, n) with L Lᵀ x = g, from the lower factors L (E, n, n).

    Two triangular solves rather than torch.cholesky_solve: on a GPU that one runs batches through
    MAGMA, which allocates device memory inside the call and so breaks CUDA-graph capture of a
    fixed-iteration step (seen on an H200 with 64 bowl environments)."""
    y = torch.linalg.solve_triangular(L, gradient[..., None], upper=False)
    return torch.linalg.solve_triangular(L.transpose(-1, -2), y, upper=True)[..., 0]


@torch.library.register_fake("contactnet::ipc_cholesky_solve")
def _(hessian, gradient, shift, fixed=None):
    return gradient.new_empty(gradient.shape), shift.new_empty(shift.shape, dtype=torch.bool)

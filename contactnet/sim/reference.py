"""Pure-torch reference of the stepper's contact chain rule (ZeMa eq. 6–8): per-candidate stencil
derivatives (from `contactnet.ops.ipc`) carried to rigid or affine body DOFs and assembled. The
stepper computes the same per body pair in its own layout; tests compare the two."""

from __future__ import annotations

from typing import NamedTuple

import torch

from contactnet.ops._checks import (
    as_index_tensor,
    check_float_tensor,
    check_index_values,
    check_same_batch,
    values_checked_here,
)

__all__ = ["BodyDerivatives", "affine_jacobian", "body_gradient_hessian", "rigid_jacobian"]


class BodyDerivatives(NamedTuple):
    gradient: torch.Tensor  # (B, K) per-body gradient
    local: torch.Tensor  # (N, 4K, 4K) per-candidate Hessian on its 4 stencil vertices' body DOFs
    stencil_bodies: torch.Tensor  # (N, 4) int64 body of each stencil vertex
    matrix: torch.Tensor  # (B·K, B·K) sparse COO, coalesced; DOF K·body + j


def rigid_jacobian(lever_arms: torch.Tensor) -> torch.Tensor:
    """(V, 3, 6) Jacobian of x = p + R x0 with respect to a rigid body's tangent DOFs (δp, δθ) at
    the current pose: ∂x/∂(p, θ) = [I, -[r]×] with r = R x0 = x - p (lever_arms, (V, 3)). The
    second-order term of the rotation is not included (Gauss–Newton in the rotation)."""
    check_float_tensor(lever_arms, "lever_arms", (None, 3))
    r = lever_arms
    zero = torch.zeros_like(r[:, 0])
    skew = torch.stack([
        torch.stack([zero, -r[:, 2], r[:, 1]], -1),
        torch.stack([r[:, 2], zero, -r[:, 0]], -1),
        torch.stack([-r[:, 1], r[:, 0], zero], -1),
    ], dim=1)  # [r]×
    eye = torch.eye(3, dtype=r.dtype, device=r.device).expand(r.shape[0], 3, 3)
    return torch.cat([eye, -skew], dim=2).contiguous()


def affine_jacobian(rest_points: torch.Tensor) -> torch.Tensor:
    """(V, 3, 12) Jacobian J(x0) = ∂x/∂q of an affine body x = A x0 + p, q = (p, a1, a2, a3) with
    a_i the rows of A (ZeMa eq. 2): x_i = p_i + a_i · x0. Exact: x is linear in q."""
    check_float_tensor(rest_points, "rest_points", (None, 3))
    n = rest_points.shape[0]
    J = rest_points.new_zeros((n, 3, 12))
    for i in range(3):
        J[:, i, i] = 1.0
        J[:, i, 3 + 3 * i: 6 + 3 * i] = rest_points
    return J


def body_gradient_hessian(local_gradient: torch.Tensor, local_hessian: torch.Tensor, stencils: torch.Tensor,
                          vertex_body: torch.Tensor, jacobian: torch.Tensor, num_bodies: int) -> BodyDerivatives:
    """Chain rule from stencil vertex derivatives to body DOFs (ZeMa eq. 6–8): with x̃ = J̃ ỹ and
    J̃ = blockdiag(J(v) for the 4 stencil vertices),
        ∇ỹ = J̃ᵀ ∇x̃,    ∇²ỹ = J̃ᵀ ∇²x̃ J̃.
    A PSD-projected ∇²x̃ stays PSD under this congruence, so project before calling.

    local_gradient (N, 12), local_hessian (N, 12, 12), stencils (N, 4) int64 (from
    barrier_potential_hessian), vertex_body (V,) int64 in [0, num_bodies), jacobian (V, 3, K)
    (rigid_jacobian: K = 6, affine_jacobian: K = 12). Every vertex belongs to a body.
    """
    check_float_tensor(local_gradient, "local_gradient", (None, 12))
    check_float_tensor(local_hessian, "local_hessian", (None, 12, 12))
    stencils = as_index_tensor(stencils, "stencils", (None, 4))
    vertex_body = as_index_tensor(vertex_body, "vertex_body", (None,))
    if values_checked_here(stencils, checked_in_cpp_on_cpu=False):
        check_index_values(stencils, "stencils", vertex_body.shape[0])
        check_index_values(vertex_body, "vertex_body", num_bodies)
    if not isinstance(jacobian, torch.Tensor) or jacobian.dim() != 3 or jacobian.shape[:2] != (vertex_body.shape[0], 3):
        raise ValueError(f"jacobian: expected shape ({vertex_body.shape[0]}, 3, K), got "
                         f"{tuple(jacobian.shape) if isinstance(jacobian, torch.Tensor) else type(jacobian).__name__}")
    check_same_batch({"local_gradient": local_gradient, "local_hessian": local_hessian})
    n, K = stencils.shape[0], jacobian.shape[2]
    Js = jacobian[stencils]  # (N, 4, 3, K)
    g = local_gradient.reshape(n, 4, 3)
    # ∇ỹ = J̃ᵀ ∇x̃: per stencil vertex J(v)ᵀ g_v, summed into its body
    gy = torch.einsum("nvik,nvi->nvk", Js, g)
    bodies = vertex_body[stencils]  # (N, 4)
    gradient = local_gradient.new_zeros((num_bodies, K)).index_add_(0, bodies.reshape(-1), gy.reshape(-1, K))
    # ∇²ỹ = J̃ᵀ ∇²x̃ J̃: block (v, w) = J(v)ᵀ H_vw J(w)
    H = local_hessian.reshape(n, 4, 3, 4, 3)
    Hy = torch.einsum("nvik,nviwj,nwjl->nvkwl", Js, H, Js).reshape(n, 4 * K, 4 * K)
    dof = (K * bodies[:, :, None] + torch.arange(K, device=bodies.device)).reshape(n, 4 * K)
    rows = dof[:, :, None].expand(n, 4 * K, 4 * K).reshape(-1)
    cols = dof[:, None, :].expand(n, 4 * K, 4 * K).reshape(-1)
    size = K * num_bodies
    matrix = torch.sparse_coo_tensor(torch.stack([rows, cols]), Hy.reshape(-1), (size, size),
                                     check_invariants=False).coalesce()
    return BodyDerivatives(gradient, Hy, bodies, matrix)

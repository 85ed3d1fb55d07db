"""Fused chain rule from contact stencils to affine body pairs (ZeMa eq. 7–8): each candidate's
(N, 12) gradient and (N, 12, 12) Hessian on its stencil vertices become its two bodies' 24-vector
gradient and 24×24 Hessian in one op, using the affine Jacobian's Kronecker structure
(∂x/∂q = I₃ ⊗ x̄ᵀ per coordinate, x̄ = (1, x0)) instead of dense Jacobian products.
C++ on CPU, CUDA on GPU (csrc/ipc/body_derivatives.h), float32 or float64.

Body DOFs are in q order, q = (p, a1, a2, a3) with a_i the rows of A (x = A x0 + p), as in
`contactnet.sim.reference.affine_jacobian`.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from contactnet._extension import load_extension
from contactnet.ops._checks import (
    as_index_tensor,
    check_float_tensor,
    check_index_values,
    check_int,
    check_same_batch,
    check_same_device,
    values_checked_here,
)

load_extension()

__all__ = ["BodyPairDerivatives", "body_pair_derivatives", "body_pair_derivatives_sum"]


class BodyPairDerivatives(NamedTuple):
    gradient: torch.Tensor  # (N, 2, 12) [body s, q DOF]; summed: (num_bodies, 12)
    hessian: torch.Tensor  # (N, 2, 2, 12, 12) [body s, body t, q DOF of s, q DOF of t]; summed: (num_blocks, 12, 12)


def _check_inputs(local_gradient, local_hessian, stencils, is_face_vertex, rest_vertices) -> torch.Tensor:
    """The checks of both ops; returns stencils as contiguous int64 (converted once)."""
    check_float_tensor(local_gradient, "local_gradient", (None, 12))
    check_float_tensor(local_hessian, "local_hessian", (None, 12, 12))
    check_float_tensor(rest_vertices, "rest_vertices", (None, 3))
    check_same_batch({"local_gradient": local_gradient, "local_hessian": local_hessian})
    if rest_vertices.dtype != local_gradient.dtype:
        raise TypeError(f"rest_vertices has dtype {rest_vertices.dtype} but local_gradient has {local_gradient.dtype}")
    stencils = as_index_tensor(stencils, "stencils", (local_gradient.shape[0], 4))
    if not isinstance(is_face_vertex, torch.Tensor) or is_face_vertex.dtype != torch.bool or is_face_vertex.dim() != 1:
        raise TypeError("is_face_vertex: expected a (N,) bool tensor, got "
                        + (f"{is_face_vertex.dtype} of shape {tuple(is_face_vertex.shape)}"
                           if isinstance(is_face_vertex, torch.Tensor) else type(is_face_vertex).__name__))
    if is_face_vertex.shape[0] != local_gradient.shape[0]:
        raise ValueError(f"is_face_vertex has batch size {is_face_vertex.shape[0]} but local_gradient has "
                         f"{local_gradient.shape[0]}")
    for name, t in (("local_gradient", local_gradient), ("stencils", stencils), ("is_face_vertex", is_face_vertex)):
        check_same_device(t, name, rest_vertices, "rest_vertices")
    v = rest_vertices.shape[0]
    if values_checked_here(stencils) and stencils.numel() and (int(stencils.min()) < -1 or int(stencils.max()) >= v):
        raise ValueError(f"stencils: indices must lie in [0, {v}) (or be -1 padding)")
    return stencils


def body_pair_derivatives(local_gradient: torch.Tensor, local_hessian: torch.Tensor, stencils: torch.Tensor,
                          is_face_vertex: torch.Tensor, rest_vertices: torch.Tensor) -> BodyPairDerivatives:
    """Per-candidate derivatives with respect to its two affine bodies' DOFs:
        gradient[n, s] = Σ_{v∈s} J(v)ᵀ g_v,    hessian[n, s, t] = Σ_{v∈s, w∈t} J(v)ᵀ H_vw J(w),
    J(v) = affine_jacobian(x0_v). Body s = 0 owns stencil vertex 0 (face–vertex: p | t0 t1 t2) or
    vertices 0, 1 (edge–edge: ea0 ea1 | eb0 eb1); body 1 the rest. The caller sums the blocks into
    its system by the bodies of stencil vertices 0 and 3. A PSD local Hessian gives a PSD 24×24
    Hessian (a congruence).

    local_gradient (N, 12), local_hessian (N, 12, 12) and rest_vertices (V, 3): one float dtype
    and device; stencils (N, 4) int64 into rest_vertices (rows of -1 are padding and give zeros);
    is_face_vertex (N,) bool. Not differentiable.
    """
    stencils = _check_inputs(local_gradient, local_hessian, stencils, is_face_vertex, rest_vertices)
    g, h = torch.ops.contactnet.ipc_body_pair_derivatives(local_gradient, local_hessian, stencils,
                                                          is_face_vertex.contiguous(), rest_vertices)
    return BodyPairDerivatives(g, h)


def body_pair_derivatives_sum(local_gradient: torch.Tensor, local_hessian: torch.Tensor, stencils: torch.Tensor,
                              is_face_vertex: torch.Tensor, rest_vertices: torch.Tensor, body_index: torch.Tensor,
                              block_index: torch.Tensor, num_bodies: int, num_blocks: int) -> BodyPairDerivatives:
    """`body_pair_derivatives` summed into the caller's rows without the (N, 2, 2, 12, 12)
    intermediate: gradient (num_bodies, 12) gets gradient[n, s] in row body_index[n, s]
    ((N, 2) int64), hessian (num_blocks, 12, 12) gets hessian[n, s, t] in row block_index[n, s, t]
    ((N, 2, 2) int64). Padding rows (stencil -1) add nothing. On the CPU the sums run in
    candidate order (deterministic: the order of `index_add_`); on CUDA they are atomic."""
    stencils = _check_inputs(local_gradient, local_hessian, stencils, is_face_vertex, rest_vertices)
    num_bodies, num_blocks = check_int(num_bodies, "num_bodies", 0), check_int(num_blocks, "num_blocks", 0)
    n = stencils.shape[0]
    body_index = as_index_tensor(body_index, "body_index", (n, 2))
    block_index = as_index_tensor(block_index, "block_index", (n, 2, 2))
    for name, t, bound in (("body_index", body_index, num_bodies), ("block_index", block_index, num_blocks)):
        check_same_device(t, name, rest_vertices, "rest_vertices")
        if values_checked_here(t):
            check_index_values(t, name, bound)
    g, h = torch.ops.contactnet.ipc_body_pair_derivatives_sum(local_gradient, local_hessian, stencils,
                                                              is_face_vertex.contiguous(),
                                                              rest_vertices, body_index, block_index, num_bodies,
                                                              num_blocks)
    return BodyPairDerivatives(g, h)


@torch.library.register_fake("contactnet::ipc_body_pair_derivatives_sum")
def _(local_gradient, local_hessian, stencils, is_face_vertex, rest_vertices, body_index, block_index, num_bodies,
      num_blocks):
    return rest_vertices.new_empty((num_bodies, 12)), rest_vertices.new_empty((num_blocks, 12, 12))


@torch.library.register_fake("contactnet::ipc_body_pair_derivatives")
def _(local_gradient, local_hessian, stencils, is_face_vertex, rest_vertices):
    n = stencils.shape[0]
    return rest_vertices.new_empty((n, 2, 12)), rest_vertices.new_empty((n, 2, 2, 12, 12))

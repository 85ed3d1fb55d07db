"""IPC potentials over collision candidates: the log barrier b(d², d̂²), the barrier potential
B = κ Σ m b and the smooth lagged friction D, each with its per-candidate stencil gradient and
Hessian, and the assembly of those into per-vertex gradients and a sparse (3V, 3V) Hessian."""

from __future__ import annotations

from typing import NamedTuple

import torch

from contactnet._extension import load_extension
from contactnet.ops._checks import (
    as_index_tensor,
    check_float_tensor,
    check_positive,
    check_same_batch,
    ipc_candidate_args,
    ipc_mesh_args,
)
from contactnet.ops.ipc.candidates import Candidates, candidate_stencils

load_extension()

_ops = torch.ops.contactnet


class BarrierValues(NamedTuple):
    value: torch.Tensor  # b(d², d̂²)
    first: torch.Tensor  # ∂b/∂(d²)
    second: torch.Tensor  # ∂²b/∂(d²)²


class BarrierHessian(NamedTuple):
    local: torch.Tensor  # (N, 12, 12) per-candidate Hessian on its stencil
    stencils: torch.Tensor  # (N, 4) int64 vertex ids of each stencil
    matrix: torch.Tensor | None  # (3V, 3V) sparse COO, coalesced; None when assemble=False


# ---- barrier -----------------------------------------------------------------------------------


def barrier(d2: torch.Tensor, dhat: float) -> BarrierValues:
    """The IPC log barrier on squared distances: b(d², d̂²) = -(d² - d̂²)² ln(d²/d̂²) for
    0 < d² < d̂², 0 beyond, with its first and second derivatives with respect to d².

    d2: (N,) float squared distances (m²); dhat: activation distance (m), > 0.
    d2 ≤ 0 means contact or penetration: value +inf, first -inf, second +inf (never an error, so
    a line search can reject the step).
    """
    check_float_tensor(d2, "d2", (None,))
    dhat = check_positive(dhat, "dhat")
    return BarrierValues(*_ops.ipc_barrier(d2, dhat))


# ---- assembly ----------------------------------------------------------------------------------


def _scatter_vertices(local: torch.Tensor, stencils: torch.Tensor, num_vertices: int) -> torch.Tensor:
    out = local.new_zeros((num_vertices, 3))
    return out.index_add_(0, stencils.reshape(-1), local.reshape(-1, 3))


def assemble_hessian(local: torch.Tensor, stencils: torch.Tensor, num_vertices: int) -> torch.Tensor:
    """Sum (N, 12, 12) stencil blocks into a coalesced sparse COO (3V, 3V) matrix, DOF 3·v + c.
    stencils: (N, 4) integer vertex ids (see candidate_stencils)."""
    stencils = as_index_tensor(stencils, "stencils", (None, 4))
    n = local.shape[0]
    size = 3 * num_vertices
    if local.device.type == "cpu":
        # C++ row-by-row gather: the entries come out coalesced, no sort.
        index, values = _ops.ipc_assemble_hessian(local, stencils, num_vertices)
        return torch.sparse_coo_tensor(index, values, (size, size), check_invariants=False, is_coalesced=True)
    # Merge the 16 vertex–vertex 3×3 blocks of every stencil first (16 keys per candidate rather
    # than 144 entries), so the sort that coalescing needs runs on the merged blocks only.
    blocks = local.reshape(n, 4, 3, 4, 3).permute(0, 1, 3, 2, 4).reshape(n * 16, 3, 3)
    vi = stencils[:, :, None].expand(n, 4, 4).reshape(-1)
    vj = stencils[:, None, :].expand(n, 4, 4).reshape(-1)
    keys, inverse = torch.unique(vi * num_vertices + vj, return_inverse=True)
    merged = local.new_zeros(keys.shape[0], 3, 3).index_add_(0, inverse, blocks)
    c = torch.arange(3, device=stencils.device)
    rows = (3 * (keys // num_vertices))[:, None, None] + c[None, :, None]
    cols = (3 * (keys % num_vertices))[:, None, None] + c[None, None, :]
    index = torch.stack([rows.expand_as(merged).reshape(-1), cols.expand_as(merged).reshape(-1)])
    return torch.sparse_coo_tensor(index, merged.reshape(-1), (size, size), check_invariants=False).coalesce()


# ---- barrier potential -------------------------------------------------------------------------


def _potential_args(vertices, faces, edges, candidates, dhat, kappa, rest_vertices):
    faces, edges, _ = ipc_mesh_args(vertices, faces, edges)
    candidates = Candidates(*ipc_candidate_args(candidates, vertices, faces, edges))
    dhat = check_positive(dhat, "dhat")
    kappa = check_positive(kappa, "kappa", allow_zero=True)
    if rest_vertices is None:
        rest_vertices = vertices.detach()
    else:
        check_float_tensor(rest_vertices, "rest_vertices", (None, 3))
        check_same_batch({"vertices": vertices, "rest_vertices": rest_vertices})
    return faces, edges, candidates, dhat, kappa, rest_vertices


def barrier_potential(vertices, faces, edges, candidates: Candidates, dhat: float, kappa: float = 1.0,
                      rest_vertices=None, per_candidate: bool = False) -> torch.Tensor:
    """B = κ Σ_k m_k b(d_k², d̂²): a 0-dim tensor, differentiable (twice) in `vertices`.

    vertices: (V, 3) float; candidates from collision_candidates (pairs beyond dhat add 0).
    rest_vertices: (V, 3) positions defining the edge–edge mollifier thresholds
    ε_x = 1e-3 |ea|²|eb|², held constant (no derivative flows through them). Default: the current
    vertices, detached; when differentiating numerically (finite differences, gradcheck) pass fixed
    rest positions, or the thresholds move with the perturbation. Intersecting candidates give +inf.
    With per_candidate=True, the (N,) terms instead of their sum.
    """
    faces, edges, (fv, ee), dhat, kappa, rest = _potential_args(vertices, faces, edges, candidates, dhat, kappa,
                                                                rest_vertices)
    terms = _ops.ipc_barrier_potential(vertices, rest, faces, edges, fv, ee, dhat, kappa)
    return terms if per_candidate else terms.sum()


def barrier_potential_gradient(vertices, faces, edges, candidates: Candidates, dhat: float, kappa: float = 1.0,
                               rest_vertices=None, per_candidate: bool = False):
    """∇B per vertex, (V, 3); with per_candidate=True, the (N, 12) stencil gradients instead."""
    faces, edges, candidates, dhat, kappa, rest = _potential_args(vertices, faces, edges, candidates, dhat, kappa,
                                                                  rest_vertices)
    fv, ee = candidates
    local = _ops.ipc_barrier_potential_gradient(vertices, rest, faces, edges, fv, ee, dhat, kappa)
    if per_candidate:
        return local
    return _scatter_vertices(local, candidate_stencils(faces, edges, candidates), vertices.shape[0])


def barrier_potential_hessian(vertices, faces, edges, candidates: Candidates, dhat: float, kappa: float = 1.0,
                              rest_vertices=None, project_to_psd: bool = True,
                              assemble: bool = True) -> BarrierHessian:
    """∇²B: per-candidate (N, 12, 12) blocks (each projected onto the PSD cone by clamping its
    negative eigenvalues when project_to_psd, as IPC Toolkit's PSDProjectionMethod.CLAMP), their
    stencils, and (when assemble) the coalesced sparse (3V, 3V) sum."""
    faces, edges, candidates, dhat, kappa, rest = _potential_args(vertices, faces, edges, candidates, dhat, kappa,
                                                                  rest_vertices)
    fv, ee = candidates
    local = _ops.ipc_barrier_potential_hessian(vertices, rest, faces, edges, fv, ee, dhat, kappa,
                                               bool(project_to_psd))
    stencils = candidate_stencils(faces, edges, candidates)
    matrix = assemble_hessian(local, stencils, vertices.shape[0]) if assemble else None
    return BarrierHessian(local, stencils, matrix)


# ---- friction ----------------------------------------------------------------------------------


def _friction_args(velocities, lagged_vertices, faces, edges, candidates, dhat, kappa, mu, eps_v, rest_vertices):
    faces, edges, _ = ipc_mesh_args(lagged_vertices, faces, edges, None, "lagged_vertices")
    check_float_tensor(velocities, "velocities", (None, 3))
    check_same_batch({"velocities": velocities, "lagged_vertices": lagged_vertices})
    candidates = Candidates(*ipc_candidate_args(candidates, lagged_vertices, faces, edges))
    dhat = check_positive(dhat, "dhat")
    kappa = check_positive(kappa, "kappa", allow_zero=True)
    mu = check_positive(mu, "mu", allow_zero=True)
    eps_v = check_positive(eps_v, "eps_v")
    if rest_vertices is None:
        rest_vertices = lagged_vertices
    check_float_tensor(rest_vertices, "rest_vertices", (None, 3))
    check_same_batch({"velocities": velocities, "rest_vertices": rest_vertices})
    return faces, edges, candidates, (dhat, kappa, mu, eps_v), lagged_vertices.detach(), rest_vertices.detach()


def friction_potential(velocities, lagged_vertices, faces, edges, candidates: Candidates, dhat: float,
                       kappa: float, mu: float, eps_v: float, rest_vertices=None,
                       per_candidate: bool = False) -> torch.Tensor:
    """Smooth (lagged) IPC friction D = Σ_k μ N_k f₀(‖u_k‖), u_k = T_kᵀ v: a 0-dim tensor,
    differentiable (twice) in `velocities`.

    velocities: (V, 3) velocities (or displacements x - xᵗ, with eps_v = ε_v h); lagged_vertices:
    (V, 3) positions where the normal forces N_k = -κ b'(d̄², d̂²)·2d̄, tangent bases and closest
    points are evaluated (held constant); eps_v: the velocity (displacement) below which friction
    is static; mu: friction coefficient. Matches IPC Toolkit's FrictionPotential(eps_v) on
    TangentialCollisions built with BarrierPotential(dhat, kappa) and mu. With per_candidate=True,
    the (N,) terms instead of their sum.
    """
    faces, edges, (fv, ee), params, lagged, rest = _friction_args(
        velocities, lagged_vertices, faces, edges, candidates, dhat, kappa, mu, eps_v, rest_vertices)
    terms = _ops.ipc_friction_potential(velocities, lagged, rest, faces, edges, fv, ee, *params)
    return terms if per_candidate else terms.sum()


def friction_potential_gradient(velocities, lagged_vertices, faces, edges, candidates: Candidates, dhat: float,
                                kappa: float, mu: float, eps_v: float, rest_vertices=None,
                                per_candidate: bool = False) -> torch.Tensor:
    """∇ᵥD per vertex (V, 3), or the (N, 12) stencil gradients with per_candidate=True."""
    faces, edges, candidates, params, lagged, rest = _friction_args(
        velocities, lagged_vertices, faces, edges, candidates, dhat, kappa, mu, eps_v, rest_vertices)
    fv, ee = candidates
    local = _ops.ipc_friction_potential_gradient(velocities, lagged, rest, faces, edges, fv, ee, *params)
    if per_candidate:
        return local
    return _scatter_vertices(local, candidate_stencils(faces, edges, candidates), velocities.shape[0])


def friction_potential_hessian(velocities, lagged_vertices, faces, edges, candidates: Candidates, dhat: float,
                               kappa: float, mu: float, eps_v: float, rest_vertices=None,
                               assemble: bool = True) -> BarrierHessian:
    """∇ᵥ²D: per-candidate (N, 12, 12) blocks (PSD by construction, no projection needed), their
    stencils and (when assemble) the coalesced sparse (3V, 3V) sum."""
    faces, edges, candidates, params, lagged, rest = _friction_args(
        velocities, lagged_vertices, faces, edges, candidates, dhat, kappa, mu, eps_v, rest_vertices)
    fv, ee = candidates
    local = _ops.ipc_friction_potential_hessian(velocities, lagged, rest, faces, edges, fv, ee, *params)
    stencils = candidate_stencils(faces, edges, candidates)
    matrix = assemble_hessian(local, stencils, velocities.shape[0]) if assemble else None
    return BarrierHessian(local, stencils, matrix)


# ---- fake (meta) implementations ---------------------------------------------------------------


@torch.library.register_fake("contactnet::ipc_barrier")
def _(d2, dhat):
    return d2.new_empty(d2.shape), d2.new_empty(d2.shape), d2.new_empty(d2.shape)


@torch.library.register_fake("contactnet::ipc_barrier_potential")
def _(vertices, rest_vertices, faces, edges, fv, ee, dhat, kappa):
    return vertices.new_empty((fv.shape[0] + ee.shape[0],))


@torch.library.register_fake("contactnet::ipc_barrier_potential_gradient")
def _(vertices, rest_vertices, faces, edges, fv, ee, dhat, kappa):
    return vertices.new_empty((fv.shape[0] + ee.shape[0], 12))


@torch.library.register_fake("contactnet::ipc_barrier_potential_hessian")
def _(vertices, rest_vertices, faces, edges, fv, ee, dhat, kappa, project_to_psd):
    return vertices.new_empty((fv.shape[0] + ee.shape[0], 12, 12))


@torch.library.register_fake("contactnet::ipc_friction_potential")
def _(velocities, lagged_vertices, rest_vertices, faces, edges, fv, ee, dhat, kappa, mu, eps_v):
    return velocities.new_empty((fv.shape[0] + ee.shape[0],))


@torch.library.register_fake("contactnet::ipc_friction_potential_gradient")
def _(velocities, lagged_vertices, rest_vertices, faces, edges, fv, ee, dhat, kappa, mu, eps_v):
    return velocities.new_empty((fv.shape[0] + ee.shape[0], 12))


@torch.library.register_fake("contactnet::ipc_friction_potential_hessian")
def _(velocities, lagged_vertices, rest_vertices, faces, edges, fv, ee, dhat, kappa, mu, eps_v):
    return velocities.new_empty((fv.shape[0] + ee.shape[0], 12, 12))


@torch.library.register_fake("contactnet::ipc_assemble_hessian")
def _(local, stencils, num_vertices):
    nnz = torch.library.get_ctx().new_dynamic_size()
    return stencils.new_empty((2, nnz)), local.new_empty((nnz,))


# ---- autograd: backward from the analytic gradient, double backward from the Hessian ----------


def _barrier_setup(ctx, inputs, output):
    ctx.mark_non_differentiable(output[2])
    ctx.save_for_backward(output[1], output[2])


def _barrier_backward(ctx, grad_value, grad_first, grad_second):
    first, second = ctx.saved_tensors
    g = grad_value * first
    if grad_first is not None:
        g = g + grad_first * second
    return g, None


torch.library.register_autograd("contactnet::ipc_barrier", _barrier_backward, setup_context=_barrier_setup)


def _potential_setup(ctx, inputs, output):
    vertices, rest, faces, edges, fv, ee, dhat, kappa = inputs[:8]
    ctx.save_for_backward(vertices, rest, faces, edges, fv, ee)
    ctx.dhat, ctx.kappa = dhat, kappa


def _potential_backward(ctx, grad_out):
    vertices, rest, faces, edges, fv, ee = ctx.saved_tensors
    local = _ops.ipc_barrier_potential_gradient(vertices, rest, faces, edges, fv, ee, ctx.dhat, ctx.kappa)
    stencils = candidate_stencils(faces, edges, Candidates(fv, ee))
    g = _scatter_vertices(local * grad_out[:, None], stencils, vertices.shape[0])
    return g, None, None, None, None, None, None, None


def _potential_gradient_backward(ctx, grad_out):
    vertices, rest, faces, edges, fv, ee = ctx.saved_tensors
    H = _ops.ipc_barrier_potential_hessian(vertices, rest, faces, edges, fv, ee, ctx.dhat, ctx.kappa, False)
    stencils = candidate_stencils(faces, edges, Candidates(fv, ee))
    g = _scatter_vertices(torch.einsum("nij,nj->ni", H, grad_out), stencils, vertices.shape[0])
    return g, None, None, None, None, None, None, None


torch.library.register_autograd("contactnet::ipc_barrier_potential", _potential_backward,
                                setup_context=_potential_setup)
torch.library.register_autograd("contactnet::ipc_barrier_potential_gradient", _potential_gradient_backward,
                                setup_context=_potential_setup)


def _friction_setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs[:7])
    ctx.params = inputs[7:]


def _friction_backward(ctx, grad_out):
    v, lagged, rest, faces, edges, fv, ee = ctx.saved_tensors
    local = _ops.ipc_friction_potential_gradient(v, lagged, rest, faces, edges, fv, ee, *ctx.params)
    stencils = candidate_stencils(faces, edges, Candidates(fv, ee))
    return (_scatter_vertices(local * grad_out[:, None], stencils, v.shape[0]),) + (None,) * 10


def _friction_gradient_backward(ctx, grad_out):
    v, lagged, rest, faces, edges, fv, ee = ctx.saved_tensors
    H = _ops.ipc_friction_potential_hessian(v, lagged, rest, faces, edges, fv, ee, *ctx.params)
    stencils = candidate_stencils(faces, edges, Candidates(fv, ee))
    return (_scatter_vertices(torch.einsum("nij,nj->ni", H, grad_out), stencils, v.shape[0]),) + (None,) * 10


torch.library.register_autograd("contactnet::ipc_friction_potential", _friction_backward,
                                setup_context=_friction_setup)
torch.library.register_autograd("contactnet::ipc_friction_potential_gradient", _friction_gradient_backward,
                                setup_context=_friction_setup)

"""The incremental potential of affine bodies with IPC contact and lagged friction, as the stepper
minimises it (`contactnet.sim.potential` documents the terms), in one op per order: the value per
environment, or its gradient and dense PSD-projected Hessian per environment. The stencil
derivatives go through the fused chain rule (`body_derivatives`) straight into each environment's
system. C++ on CPU, CUDA on GPU (csrc/ipc/affine_potential.h), float32 or float64; the torch
composition in `contactnet.sim.potential` is the tests' reference.
"""

from __future__ import annotations

import torch

from contactnet._extension import load_extension
from contactnet.ops._checks import (
    as_index_tensor,
    check_float_tensor,
    check_index_values,
    check_positive,
    check_same_batch,
    check_same_device,
    inputs_trusted,
    ipc_candidate_args,
    ipc_mesh_args,
    values_checked_here,
)
from contactnet.ops.ipc.candidates import Candidates, candidate_extents

load_extension()

__all__ = ["affine_contact_forces", "affine_positions", "affine_potential", "affine_potential_derivatives",
           "contact_statistics"]


def affine_positions(q, rest_vertices, vertex_body) -> torch.Tensor:
    """(V, 3) positions x = A x0 + p of rest vertices x0 (V, 3) under their bodies' affine states
    q (nb, 12) = (p, rows of A) (or (..., 12), flattened); vertex_body (V,) ids in [0, nb)."""
    if not isinstance(q, torch.Tensor) or q.ndim == 0 or q.shape[-1] != 12:
        raise ValueError(f"q: expected a tensor of shape (..., 12), got {getattr(q, 'shape', type(q).__name__)}")
    q = q.reshape(-1, 12).contiguous()
    check_float_tensor(q, "q", (None, 12))
    check_float_tensor(rest_vertices, "rest_vertices", (None, 3))
    check_same_device(rest_vertices, "rest_vertices", q, "q")
    if rest_vertices.dtype != q.dtype:
        raise TypeError(f"rest_vertices: expected {q.dtype} like q, got {rest_vertices.dtype}")
    vertex_body = as_index_tensor(vertex_body, "vertex_body", (rest_vertices.shape[0],))
    check_same_device(vertex_body, "vertex_body", q, "q")
    if values_checked_here(vertex_body):
        check_index_values(vertex_body, "vertex_body", q.shape[0])
    return torch.ops.contactnet.ipc_affine_positions(q, rest_vertices, vertex_body)


def _extents(candidates, lag_candidates, like) -> dict:
    """The op's extents arguments: those of `BoundedCandidates` (checked unless trusted; without
    lag_candidates, the candidates' alone)."""
    like = None if inputs_trusted() else like
    extents = {"extents": candidate_extents(candidates, "extents", like)}
    if lag_candidates is not None:
        extents["lag_extents"] = candidate_extents(lag_candidates, "lag_extents", like)
    return extents


def _args(q, q_hat, weight, mass_matrix, ortho_weight, vertices, rest_vertices, faces, edges, vertex_body,
          candidates, lagged_vertices, lag_candidates, lag_mu, dt, dhat, kappa, eps_v):
    if inputs_trusted():  # the caller vouches (`ipc.trusted_inputs`): each check below would return at once
        return (q, q_hat, weight, mass_matrix, ortho_weight, vertices, rest_vertices, faces, edges, vertex_body,
                candidates[0], candidates[1], lagged_vertices, lag_candidates[0], lag_candidates[1], lag_mu,
                float(dt), float(dhat), float(kappa), float(eps_v))
    check_float_tensor(q, "q", (None, None, 12))
    E, B = q.shape[:2]
    faces, edges, _ = ipc_mesh_args(vertices, faces, edges)
    fv, ee = ipc_candidate_args(candidates, vertices, faces, edges)
    lag_fv, lag_ee = ipc_candidate_args(lag_candidates, vertices, faces, edges)
    for name, t, shape in (("q_hat", q_hat, (E, B, 12)), ("weight", weight, (E, B)),
                           ("mass_matrix", mass_matrix, (E, B, 12, 12)), ("ortho_weight", ortho_weight, (E, B)),
                           ("vertices", vertices, (None, 3)), ("rest_vertices", rest_vertices, (None, 3)),
                           ("lagged_vertices", lagged_vertices, (None, 3)),
                           ("lag_mu", lag_mu, (lag_fv.shape[0] + lag_ee.shape[0],))):
        check_float_tensor(t, name, shape)
        check_same_device(t, name, q, "q")
        if t.dtype != q.dtype:
            raise TypeError(f"{name}: expected {q.dtype} like q, got {t.dtype}")
    check_same_batch({"vertices": vertices, "rest_vertices": rest_vertices, "lagged_vertices": lagged_vertices})
    vertex_body = as_index_tensor(vertex_body, "vertex_body", (vertices.shape[0],))
    check_same_device(vertex_body, "vertex_body", q, "q")
    if values_checked_here(vertex_body):
        check_index_values(vertex_body, "vertex_body", E * B)
    return (q, q_hat, weight, mass_matrix, ortho_weight, vertices, rest_vertices, faces, edges, vertex_body, fv, ee,
            lagged_vertices, lag_fv, lag_ee, lag_mu, check_positive(dt, "dt"), check_positive(dhat, "dhat"),
            check_positive(kappa, "kappa", allow_zero=True), check_positive(eps_v, "eps_v"))


def affine_potential(q, q_hat, weight, mass_matrix, ortho_weight, vertices, rest_vertices, faces, edges, vertex_body,
                     candidates: Candidates, lagged_vertices, lag_candidates: Candidates, lag_mu, dt: float,
                     dhat: float, kappa: float, eps_v: float) -> torch.Tensor:
    """(E,) incremental potential of every environment:
        Σ_b ½ w_b (q_b − q̂_b)ᵀ M_b (q_b − q̂_b) + h² Σ_b w_A,b ‖A_b A_bᵀ − I‖²_F
        + h² κ Σ_k m_k b(d_k², d̂²) + h² Σ_j μ_j D_j (friction of the lagged pairs, `friction_potential`
          with velocities x − xᵗ, κ, μ = 1 and ε_v·h, times μ_j).

    q, q_hat (E, B, 12) affine states (p, a1, a2, a3) and their targets; weight (E, B) inertia
    weights w; mass_matrix (E, B, 12, 12); ortho_weight (E, B) w_A = κ_A V. vertices (V, 3) the
    positions at q, rest_vertices (V, 3) (mollifier thresholds), faces / edges of the packed
    mesh, vertex_body (V,) each vertex's flat body e·B + b. candidates: a superset of the pairs
    closer than d̂ (each counted in the environment of its first stencil vertex);
    lagged_vertices (V, 3) xᵗ, lag_candidates and lag_mu (Nlag,) friction's lagged pairs and
    their μ. dt h (s), dhat d̂ (m), kappa κ, eps_v (m/s). Candidate rows of -1 are padding, and
    so are the rows past the extents of `BoundedCandidates` (skipped unread).
    Not differentiable (see `affine_potential_derivatives`).
    """
    return torch.ops.contactnet.ipc_affine_potential(*_args(
        q, q_hat, weight, mass_matrix, ortho_weight, vertices, rest_vertices, faces, edges, vertex_body, candidates,
        lagged_vertices, lag_candidates, lag_mu, dt, dhat, kappa, eps_v), **_extents(candidates, lag_candidates, q))


def affine_potential_derivatives(q, q_hat, weight, mass_matrix, ortho_weight, vertices, rest_vertices, faces, edges,
                                 vertex_body, candidates: Candidates, lagged_vertices, lag_candidates: Candidates,
                                 lag_mu, dt: float, dhat: float, kappa: float, eps_v: float,
                                 frictionless_hessian: torch.Tensor | None = None,
                                 keep_frictionless: bool = False):
    """Gradient (E, 12B) and dense Hessian (E, 12B, 12B) of `affine_potential` (same arguments) in
    q, DOFs 12·b + k. The Hessian is Newton's: the orthogonality term projected to PSD per body, the
    barrier per candidate (clamped eigenvalues), friction PSD by construction.

    The Hessian of every term but friction depends only on q, weight and the pairs within d̂ at q
    (most of the cost: the barrier's projections). keep_frictionless=True returns it as a third
    (E, 12B, 12B) tensor; an earlier call's, at the same q, weight, dt, dhat and kappa, passed back
    as frictionless_hessian is used as it is (not checked: the caller vouches for it), and the op
    then computes only the gradient and friction's Hessian, and returns that tensor itself as the
    kept part. The result is the same, bit for bit, when both calls list the pairs within d̂ in
    the same order."""
    if frictionless_hessian is not None:
        n = 12 * q.shape[1]
        check_float_tensor(frictionless_hessian, "frictionless_hessian", (q.shape[0], n, n))
        check_same_device(frictionless_hessian, "frictionless_hessian", q, "q")
    # A reused part is returned as the kept one: the op adds no term but friction to it.
    reuse = frictionless_hessian is not None
    out = torch.ops.contactnet.ipc_affine_potential_derivatives(*_args(
        q, q_hat, weight, mass_matrix, ortho_weight, vertices, rest_vertices, faces, edges, vertex_body, candidates,
        lagged_vertices, lag_candidates, lag_mu, dt, dhat, kappa, eps_v), frictionless_hessian,
        bool(keep_frictionless) and not reuse, **_extents(candidates, lag_candidates, q))
    if not keep_frictionless:
        return out[:2]
    return out if not reuse else (out[0], out[1], frictionless_hessian)


def affine_contact_forces(vertices, lagged_vertices, rest_vertices, faces, edges, vertex_body,
                          candidates: Candidates, lag_candidates: Candidates, lag_mu, num_envs: int,
                          num_bodies: int, dt: float, dhat: float, kappa: float,
                          eps_v: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Contact forces and statistics at the end of a step: forces (E·B, 3) on every flat body
    e·B + b, −∇ of the barrier κ Σ m b (without the h² of the potential) and of the lagged
    friction Σ μ D (velocities x − xᵗ, ε_v·dt) summed over its vertices; contacts (E,) int64, the
    candidate rows of each environment (padding aside); min_distance (E,) m, their smallest exact
    distance (inf without any). vertices (V, 3) positions, lagged_vertices (V, 3) xᵗ,
    rest_vertices (V, 3), faces / edges of the packed mesh, vertex_body (V,) in [0, E·B),
    candidates: the pairs within d̂ (a candidate counts in its first stencil vertex's
    environment), lag_candidates and lag_mu (Nlag,) friction's lagged pairs and their μ. Rows of
    -1 are padding, and so are the rows past the extents of `BoundedCandidates`."""
    extents = _extents(candidates, lag_candidates, vertices)
    if inputs_trusted():  # the caller vouches (`ipc.trusted_inputs`): the checks below would pass
        return torch.ops.contactnet.ipc_affine_contact_forces(
            vertices, lagged_vertices, rest_vertices, faces, edges, vertex_body, *candidates, *lag_candidates,
            lag_mu, num_envs, num_bodies, float(dt), float(dhat), float(kappa), float(eps_v), **extents)
    faces, edges, vertex_body, fv, ee = _statistics_args(vertices, faces, edges, vertex_body, candidates, num_envs,
                                                         num_bodies)
    lag_fv, lag_ee = ipc_candidate_args(lag_candidates, vertices, faces, edges)
    for name, t, shape in (("lagged_vertices", lagged_vertices, (vertices.shape[0], 3)),
                           ("rest_vertices", rest_vertices, (vertices.shape[0], 3)),
                           ("lag_mu", lag_mu, (lag_fv.shape[0] + lag_ee.shape[0],))):
        check_float_tensor(t, name, shape)
        check_same_device(t, name, vertices, "vertices")
        if t.dtype != vertices.dtype:
            raise TypeError(f"{name}: expected {vertices.dtype} like vertices, got {t.dtype}")
    return torch.ops.contactnet.ipc_affine_contact_forces(
        vertices, lagged_vertices, rest_vertices, faces, edges, vertex_body, fv, ee, lag_fv, lag_ee, lag_mu,
        num_envs, num_bodies, check_positive(dt, "dt"), check_positive(dhat, "dhat"),
        check_positive(kappa, "kappa", allow_zero=True), check_positive(eps_v, "eps_v"), **extents)


def contact_statistics(vertices, faces, edges, vertex_body, candidates: Candidates, num_envs: int,
                       num_bodies: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The statistics of `affine_contact_forces` without the forces: contacts (E,) int64, the
    candidate rows of each environment (padding aside; a candidate counts in its first stencil
    vertex's environment), and min_distance (E,) m, their smallest exact distance (inf without
    any). vertices (V, 3), faces / edges of the packed mesh, vertex_body (V,) in [0, E·B). Rows
    past the extents of `BoundedCandidates` are padding."""
    extents = _extents(candidates, None, vertices)
    if inputs_trusted():  # the caller vouches (`ipc.trusted_inputs`): the checks below would pass
        return torch.ops.contactnet.ipc_contact_statistics(vertices, faces, edges, vertex_body, *candidates,
                                                           num_envs, num_bodies, **extents)
    faces, edges, vertex_body, fv, ee = _statistics_args(vertices, faces, edges, vertex_body, candidates, num_envs,
                                                         num_bodies)
    return torch.ops.contactnet.ipc_contact_statistics(vertices, faces, edges, vertex_body, fv, ee, num_envs,
                                                       num_bodies, **extents)


def _statistics_args(vertices, faces, edges, vertex_body, candidates: Candidates, num_envs, num_bodies):
    """The checked arguments both contact ops share: faces, edges, vertex_body and the candidate rows."""
    check_float_tensor(vertices, "vertices", (None, 3))
    faces, edges, _ = ipc_mesh_args(vertices, faces, edges)
    fv, ee = ipc_candidate_args(candidates, vertices, faces, edges)
    for name, n in (("num_envs", num_envs), ("num_bodies", num_bodies)):
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"{name}: expected a positive int, got {n!r}")
    vertex_body = as_index_tensor(vertex_body, "vertex_body", (vertices.shape[0],))
    check_same_device(vertex_body, "vertex_body", vertices, "vertices")
    if values_checked_here(vertex_body):
        check_index_values(vertex_body, "vertex_body", num_envs * num_bodies)
    return faces, edges, vertex_body, fv, ee


@torch.library.register_fake("contactnet::ipc_contact_statistics")
def _(vertices, faces, edges, vertex_body, fv, ee, num_envs, num_bodies, extents=None):
    return vertices.new_empty((num_envs,), dtype=torch.int64), vertices.new_empty((num_envs,))


@torch.library.register_fake("contactnet::ipc_affine_contact_forces")
def _(vertices, lagged, rest, faces, edges, vertex_body, fv, ee, lag_fv, lag_ee, lag_mu, num_envs, num_bodies, *args,
      **kwargs):
    return (vertices.new_empty((num_envs * num_bodies, 3)), vertices.new_empty((num_envs,), dtype=torch.int64),
            vertices.new_empty((num_envs,)))


@torch.library.register_fake("contactnet::ipc_affine_positions")
def _(q, rest_vertices, vertex_body):
    return rest_vertices.new_empty(rest_vertices.shape)


@torch.library.register_fake("contactnet::ipc_affine_potential")
def _(q, *args, **kwargs):
    return q.new_empty((q.shape[0],))


@torch.library.register_fake("contactnet::ipc_affine_potential_derivatives")
def _(q, *args, keep_frictionless=False, **kwargs):
    n, keep = 12 * q.shape[1], args[20] if len(args) > 20 else keep_frictionless
    return (q.new_empty((q.shape[0], n)), q.new_empty((q.shape[0], n, n)),
            q.new_empty((q.shape[0], n, n) if keep else (0,)))

"""The incremental potential each step minimises, its gradient and PSD-projected Hessian in the
bodies' affine DOFs (ZeMa eq. 2–4, 7–8, 11):

    E(q) = Σ_b ½ w_b (q_b − q̂_b)ᵀ M_b (q_b − q̂_b)            inertia + gravity (dynamic bodies),
                                                                or a stiff pull to the script target
                                                                (kinematic bodies, w_b ≫ 1)
         + h² Σ_b κ_A V_b ‖A_b A_bᵀ − I‖²_F                    orthogonality (near-rigid bodies)
         + h² κ Σ_k b(d_k², d̂²)                                 IPC barrier between bodies
         + h² Σ_k μ_k N_k f₀(‖T_kᵀ (x − xᵗ)‖)                   smooth friction, lagged N_k and T_k

Pure functions of a `PackedScene`, the step's coefficients and its lagged quantities; the caller
supplies the vertex positions x(q) and a superset of the pairs closer than d̂ at q. `energy` and
`gradient_hessian` are one fused op each (`contactnet.ops.ipc.affine_potential`); the torch
compositions `energy_reference` and `gradient_hessian_reference` compute the same from the
per-candidate ops, for the tests.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from contactnet.ops import ipc
from contactnet.ops.ipc import affine_potential, affine_potential_derivatives, body_pair_derivatives_sum
from contactnet.sim.affine import orthogonality_energy
from contactnet.sim.packed import PackedScene

__all__ = ["Coefficients", "FrictionLag", "chain_rule", "energy", "energy_reference", "gradient_hessian",
           "gradient_hessian_reference"]


class Coefficients(NamedTuple):
    dt: float  # h, s
    dhat: float  # d̂, m
    kappa: float  # κ, J/m⁴ on squared distances
    eps_v: float  # m/s below which friction is static (smoothed)


class FrictionLag(NamedTuple):
    """Friction's lagged pairs (those within d̂ at the step's start) and their μ (N,)."""

    candidates: ipc.Candidates
    mu: torch.Tensor


def _fused_args(scene: PackedScene, c: Coefficients, q, q_hat, w, x_t, lag: FrictionLag, x, cand: ipc.Candidates):
    fcand, fmu = lag
    return (q, q_hat, w, scene.M, scene.ortho_weight, x, scene.rest, scene.faces, scene.edges, scene.vertex_body,
            cand, x_t, fcand, fmu, c.dt, c.dhat, c.kappa, c.eps_v)


def energy(scene: PackedScene, c: Coefficients, q, q_hat, w, x_t, lag: FrictionLag, x, cand: ipc.Candidates):
    """(E,) incremental potential of every environment at q (E, B, 12), with x = positions(q)
    (V, 3), q̂ (E, B, 12), w (E, B), xᵗ (V, 3) the positions at the step's start."""
    return affine_potential(*_fused_args(scene, c, q, q_hat, w, x_t, lag, x, cand))


def gradient_hessian(scene: PackedScene, c: Coefficients, q, q_hat, w, x_t, lag: FrictionLag, x,
                     cand: ipc.Candidates, frictionless_hessian=None, keep_frictionless: bool = False):
    """Gradient (E, B·12) and dense PSD-projected Hessian (E, B·12, B·12) of `energy`; with
    keep_frictionless, also the Hessian of every term but friction, which a later call at the same
    q and w may pass back as frictionless_hessian (`ipc.affine_potential_derivatives`)."""
    return affine_potential_derivatives(*_fused_args(scene, c, q, q_hat, w, x_t, lag, x, cand),
                                        frictionless_hessian, keep_frictionless)


def energy_reference(scene: PackedScene, c: Coefficients, q, q_hat, w, x_t, lag: FrictionLag, x,
                     cand: ipc.Candidates):
    """`energy` composed of torch and the per-candidate ops."""
    h2 = c.dt ** 2
    dq = q - q_hat
    total = 0.5 * (w * torch.einsum("ebi,ebij,ebj->eb", dq, scene.M, dq)).sum(1)
    A = q.reshape(-1, 12)[:, 3:].reshape(-1, 3, 3)
    ortho = scene.ortho_weight.reshape(-1)
    phi = ortho * ((A @ A.transpose(1, 2) - torch.eye(3, dtype=q.dtype, device=q.device)) ** 2).sum((1, 2))
    total = total + h2 * phi.reshape(scene.num_envs, -1).sum(1)
    if cand.count:
        b = ipc.barrier_potential(x, scene.faces, scene.edges, cand, c.dhat, h2 * c.kappa, scene.rest,
                                  per_candidate=True)
        total = total.index_add(0, scene.candidate_env(cand), b)
    fcand, fmu = lag
    if fcand.count:
        d = ipc.friction_potential(x - x_t, x_t, scene.faces, scene.edges, fcand, c.dhat, c.kappa, 1.0,
                                   c.eps_v * c.dt, scene.rest, per_candidate=True)
        total = total.index_add(0, scene.candidate_env(fcand), h2 * fmu * d)
    return total


def gradient_hessian_reference(scene: PackedScene, c: Coefficients, q, q_hat, w, x_t, lag: FrictionLag, x,
                               cand: ipc.Candidates, frictionless_hessian=None, keep_frictionless: bool = False):
    """`gradient_hessian` composed of torch, the per-candidate ops and the fused chain rule; it
    ignores frictionless_hessian (computing everything afresh is the reference of reusing it)."""
    if keep_frictionless:
        none = lag.candidates.face_vertex[:0]
        no_friction = FrictionLag(ipc.Candidates(none, none), lag.mu[:0])
        _, kept = gradient_hessian_reference(scene, c, q, q_hat, w, x_t, no_friction, x, cand)
        return (*gradient_hessian_reference(scene, c, q, q_hat, w, x_t, lag, x, cand), kept)
    E, B = scene.num_envs, scene.max_bodies
    n, h2 = 12 * B, c.dt ** 2
    dq = q - q_hat
    grad = w[..., None] * torch.einsum("ebij,ebj->ebi", scene.M, dq)  # (E, B, 12)
    H = torch.zeros(E, B, 12, B, 12, dtype=q.dtype, device=q.device)
    diag = w[..., None, None] * scene.M  # (E, B, 12, 12)
    A = q.reshape(-1, 12)[:, 3:].reshape(-1, 3, 3)
    _, og, oh = orthogonality_energy(A, scene.ortho_weight.reshape(-1))
    grad[..., 3:] += h2 * og.reshape(E, B, 9)
    diag[..., 3:, 3:] += h2 * oh.reshape(E, B, 9, 9)
    idx = torch.arange(B, device=q.device)
    H[:, idx, :, idx, :] = diag.permute(1, 0, 2, 3)
    # Barrier and friction parts, each (local gradient, local Hessian, stencils, candidates).
    parts = []
    if cand.count:
        hb = ipc.barrier_potential_hessian(x, scene.faces, scene.edges, cand, c.dhat, h2 * c.kappa,
                                           scene.rest, project_to_psd=True, assemble=False)
        gb = ipc.barrier_potential_gradient(x, scene.faces, scene.edges, cand, c.dhat, h2 * c.kappa, scene.rest,
                                            per_candidate=True)
        parts.append((gb, hb.local, hb.stencils, cand))
    fcand, fmu = lag
    if fcand.count:
        u = x - x_t
        args = (u, x_t, scene.faces, scene.edges, fcand, c.dhat, c.kappa, 1.0, c.eps_v * c.dt, scene.rest)
        hf = ipc.friction_potential_hessian(*args, assemble=False)
        scale = (h2 * fmu)[:, None]
        gf = scale * ipc.friction_potential_gradient(*args, per_candidate=True)
        parts.append((gf, scale[..., None] * hf.local, hf.stencils, fcand))
    # Each part's candidates summed by the fused chain rule straight into body-pair blocks (no
    # concatenated (N, 12, 12) copies): rows env·B² + b_s·B + b_t = body_s·B + b_t of
    # (E, B_s, B_t, k, l), reordered once.
    G = None
    for lg, lh, st, k in parts:
        is_fv = torch.arange(k.count, device=q.device) < k.face_vertex.shape[0]
        body = scene.vertex_body[st[:, [0, 3]]]  # (N, 2) flat ids of each candidate's two bodies
        key = body[:, :, None] * B + (body % B)[:, None, :]  # (N, s, t)
        g_part, G_part = body_pair_derivatives_sum(lg, lh, st, is_fv, scene.rest, body, key, E * B, E * B * B)
        grad = grad + g_part.reshape(E, B, 12)
        G = G_part if G is None else G + G_part
    if G is not None:
        H = H + G.reshape(E, B, B, 12, 12).permute(0, 1, 3, 2, 4).reshape(E, B, 12, B, 12)
    return grad.reshape(E, n), H.reshape(E, n, n)


def chain_rule(scene: PackedScene, st, lg, lh, is_fv):
    """Torch reference of the fused op `gradient_hessian` uses (`body_pair_derivatives_sum`), kept for
    the tests. Stencil derivatives → the two bodies of each pair (ZeMa eq. 7–8): ∇ỹ = J̃ᵀ ∇x̃ and
    ∇²ỹ = J̃ᵀ ∇²x̃ J̃, J̃ the stencil vertices' affine Jacobians.

    st (N, 4) stencils, lg (N, 12) and lh (N, 12, 12) their local gradients and Hessians, is_fv (N,)
    bool. Face–vertex stencils (p | t0 t1 t2) and edge–edge stencils (ea0 ea1 | eb0 eb1) split
    1 | 3 and 2 | 2 between their two bodies. With DOFs ordered (p_i, a_i) per coordinate i, a
    vertex's Jacobian is I₃ ⊗ x̄ᵀ, x̄ = (1, x0), so a body-pair block is
    Σ_{v∈s, w∈t} H_vw ⊗ x̄_v x̄_wᵀ: two small batched products instead of 12 × 24 Jacobians.
    Returns gradients (N, 2, 3, 4) [s, i, α], blocks (N, 2, 4, 3, 3, 2, 4) [s, α, i, j, t, β]
    in that per-coordinate order (see `PackedScene.to_q_order`) and the (N, 2) flat body ids.
    """
    N = st.shape[0]
    member = torch.zeros(N, 4, 2, dtype=lg.dtype, device=lg.device)  # vertex v belongs to body s
    member[:, 0, 0] = 1
    member[:, 2:, 1] = 1
    member[:, 1, 1] = is_fv.to(lg.dtype)
    member[:, 1, 0] = (~is_fv).to(lg.dtype)
    X = (member[:, :, :, None] * scene.xbar[st][:, :, None, :]).reshape(N, 4, 8)  # [v, (s, α)]
    H = lh.reshape(N, 4, 3, 4, 3).permute(0, 1, 2, 4, 3).reshape(N, 36, 4)  # [(v, i, j), w]
    T = torch.bmm(H, X).reshape(N, 4, 72)  # Σ_w H_vw x̄_w: [v, (i, j, t, β)]
    hy = torch.bmm(X.transpose(1, 2), T).reshape(N, 2, 4, 3, 3, 2, 4)  # [s, α, i, j, t, β]
    gy = torch.einsum("nvsa,nvi->nsia", X.reshape(N, 4, 2, 4), lg.reshape(N, 4, 3))
    return gy, hy, scene.vertex_body[st[:, [0, 3]]]

"""Affine-body kinematics and energies (ABD, as ZeMa §III uses it).

A body's state is q = (p, a1, a2, a3) ∈ R¹², with a_i the rows of A ∈ R³ˣ³, and a rest-frame point
x0 moves to x = A x0 + p. Everything here is batched over a leading body dimension and pure torch.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from contactnet.geometry.poses import matrix_to_quaternion, quaternion_to_matrix

__all__ = [
    "MassProperties",
    "mass_matrix",
    "mass_properties",
    "orthogonality_energy",
    "pose_to_q",
    "q_to_pose",
    "q_velocity_to_twist",
    "twist_to_q_velocity",
]


class MassProperties(NamedTuple):
    mass: float  # kg
    first_moment: np.ndarray  # (3,) ∫ρ x0, kg·m
    second_moment: np.ndarray  # (3, 3) ∫ρ x0 x0ᵀ, kg·m²
    volume: float  # m³: the enclosed volume, or mass / 1000 kg/m³ for a shell


def mass_properties(vertices: np.ndarray, faces: np.ndarray, density: float | None = 1000.0,
                    mass: float | None = None) -> MassProperties:
    """Mass, first and second moments of a mesh in its own frame.

    Closed meshes (positive enclosed volume, by the divergence theorem over the tetrahedra that
    each face spans with the origin) are solids of uniform `density`; `mass`, when given, rescales
    that density. Open or inconsistently oriented meshes, whose enclosed volume is not meaningful,
    are treated as a shell of uniform areal density carrying `mass` (required then): the moments
    are the surface integrals, and the volume used by the orthogonality energy is mass / 1000.
    """
    v = np.asarray(vertices, dtype=np.float64)
    t = v[np.asarray(faces)]  # (F, 3, 3)
    s = t.sum(axis=1)
    outer = np.einsum("fvi,fvj->fij", t, t)
    det = np.einsum("fi,fi->f", t[:, 0], np.cross(t[:, 1], t[:, 2])) / 6.0  # signed tet volumes
    volume = float(det.sum())
    area = 0.5 * np.linalg.norm(np.cross(t[:, 1] - t[:, 0], t[:, 2] - t[:, 0]), axis=1)
    closed = volume > 1e-9 * float(area.sum()) ** 1.5 and is_closed(np.asarray(faces))
    if closed:
        # tetrahedron (0, v0, v1, v2): ∫x = V (Σv)/4, ∫x xᵀ = V/20 (Σ v vᵀ + (Σv)(Σv)ᵀ)
        m1 = (det[:, None] * s).sum(0) / 4.0
        m2 = (det[:, None, None] * (outer + np.einsum("fi,fj->fij", s, s))).sum(0) / 20.0
        rho = float(mass) / volume if mass is not None else float(density)
        return MassProperties(rho * volume, rho * m1, rho * m2, volume)
    if mass is None:
        raise ValueError("mass: this mesh is open (no enclosed volume); give its mass explicitly")
    # triangle: ∫x dA = A (Σv)/3, ∫x xᵀ dA = A/12 (Σ v vᵀ + (Σv)(Σv)ᵀ)
    total = float(area.sum())
    sigma = float(mass) / total
    m1 = (area[:, None] * s).sum(0) / 3.0
    m2 = (area[:, None, None] * (outer + np.einsum("fi,fj->fij", s, s))).sum(0) / 12.0
    return MassProperties(float(mass), sigma * m1, sigma * m2, float(mass) / 1000.0)


def is_closed(faces: np.ndarray) -> bool:
    """Every undirected edge is shared by exactly two faces."""
    e = np.sort(np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]]), axis=1)
    _, counts = np.unique(e, axis=0, return_counts=True)
    return bool((counts == 2).all())


def mass_matrix(props: MassProperties) -> torch.Tensor:
    """(12, 12) float64 M = ∫ρ JᵀJ for q = (p, a1, a2, a3):
    M[p_i, p_i] = m, M[p_i, a_i] = ∫ρ x0ᵀ, M[a_i, a_i] = ∫ρ x0 x0ᵀ (zero between different i)."""
    M = torch.zeros(12, 12, dtype=torch.float64)
    c = torch.as_tensor(props.first_moment, dtype=torch.float64)
    S = torch.as_tensor(props.second_moment, dtype=torch.float64)
    for i in range(3):
        a = slice(3 + 3 * i, 6 + 3 * i)
        M[i, i] = props.mass
        M[i, a] = c
        M[a, i] = c
        M[a, a] = S
    return M


def orthogonality_energy(A: torch.Tensor, weight: torch.Tensor):
    """Φ = w ‖A Aᵀ − I‖²_F per body with its gradient and PSD-projected Hessian in (a1, a2, a3).

    A: (N, 3, 3) with rows a_i; weight: (N,) = κ_A · V. Returns value (N,), gradient (N, 9) and
    Hessian (N, 9, 9). With C = A Aᵀ − I (c_kl = a_k·a_l − δ_kl):
        ∂Φ/∂a_k = 4w Σ_j c_kj a_j
        ∂²Φ/∂a_k∂a_l = 4w (δ_kl AᵀA + a_l a_kᵀ + c_kl I)
    The Hessian is indefinite under compression, so it is projected onto the PSD cone (eigenvalues
    clamped at 0) for Newton.
    """
    n = A.shape[0]
    eye = torch.eye(3, dtype=A.dtype, device=A.device)
    C = A @ A.transpose(1, 2) - eye
    value = weight * (C * C).sum((1, 2))
    grad = 4 * weight[:, None, None] * (C @ A)  # row k: Σ_j c_kj a_j
    AtA = A.transpose(1, 2) @ A
    # H[k, i, l, j] = ∂²Φ/∂a_k[i]∂a_l[j]
    H = torch.einsum("kl,nij->nkilj", eye, AtA)  # δ_kl AᵀA
    H += torch.einsum("nli,nkj->nkilj", A, A)  # a_l a_kᵀ: entry (i, j) = a_l[i] a_k[j]
    H += torch.einsum("nkl,ij->nkilj", C, eye)  # c_kl I
    H = 4 * weight[:, None, None] * H.reshape(n, 9, 9)
    H = 0.5 * (H + H.transpose(1, 2))
    evals, evecs = torch.linalg.eigh(H)
    H = evecs @ torch.diag_embed(evals.clamp_min(0)) @ evecs.transpose(1, 2)
    return value, grad.reshape(n, 9), H


def q_to_pose(q: torch.Tensor) -> torch.Tensor:
    """(..., 12) affine states → (..., 7) poses [p, quaternion of R], R the rotation of the polar
    decomposition A = R S (the closest rotation to A)."""
    A = q[..., 3:].reshape(*q.shape[:-1], 3, 3)
    U, _, Vh = torch.linalg.svd(A)
    d = torch.det(U @ Vh)
    U = torch.cat([U[..., :2], U[..., 2:] * d[..., None, None]], dim=-1)
    R = U @ Vh
    return torch.cat([q[..., :3], matrix_to_quaternion(R)], dim=-1)


def pose_to_q(poses: torch.Tensor) -> torch.Tensor:
    """(..., 7) poses → (..., 12) affine states with A = R."""
    R = quaternion_to_matrix(poses[..., 3:])
    return torch.cat([poses[..., :3], R.reshape(*poses.shape[:-1], 9)], dim=-1)


def _skew(w: torch.Tensor) -> torch.Tensor:
    z = torch.zeros_like(w[..., 0])
    return torch.stack([
        torch.stack([z, -w[..., 2], w[..., 1]], -1),
        torch.stack([w[..., 2], z, -w[..., 0]], -1),
        torch.stack([-w[..., 1], w[..., 0], z], -1),
    ], dim=-2)


def twist_to_q_velocity(q: torch.Tensor, twist: torch.Tensor) -> torch.Tensor:
    """(..., 6) [v, ω] (frame-origin velocity, angular velocity, world frame) → q̇ = (v, [ω]× A)."""
    A = q[..., 3:].reshape(*q.shape[:-1], 3, 3)
    Adot = _skew(twist[..., 3:]) @ A
    return torch.cat([twist[..., :3], Adot.reshape(*q.shape[:-1], 9)], dim=-1)


def q_velocity_to_twist(q: torch.Tensor, qdot: torch.Tensor) -> torch.Tensor:
    """q̇ → (..., 6) [v, ω] with [ω]× the skew part of Ȧ A⁻¹ (exact when A is a rotation)."""
    A = q[..., 3:].reshape(*q.shape[:-1], 3, 3)
    Adot = qdot[..., 3:].reshape(*q.shape[:-1], 3, 3)
    W = Adot @ torch.linalg.inv(A)
    W = 0.5 * (W - W.transpose(-1, -2))
    omega = torch.stack([W[..., 2, 1], W[..., 0, 2], W[..., 1, 0]], dim=-1)
    return torch.cat([qdot[..., :3], omega], dim=-1)

"""The pure-torch chain rule from stencil derivatives to rigid and affine body DOFs (ZeMa eq. 6–8),
the stepper's reference: against autograd through the barrier potential; PSD preservation; bad
input."""

import pytest
import torch

from contactnet.ops import ipc
from contactnet.sim.reference import affine_jacobian, body_gradient_hessian, rigid_jacobian
from tests.ops import ipc_cases as cases


def _scene(n, seed):
    V, F, E, body, dhat = cases.stacked_sheets(n, seed=seed)
    return V, F, E, body, dhat, ipc.collision_candidates(V, F, E, dhat)


def _affine_scene():
    V, F, E, body, dhat, _ = _scene(3, seed=9)
    centers = torch.stack([V[body == b].mean(0) for b in range(2)])
    x0 = V - centers[body]  # rest positions in each body's frame
    q = torch.cat([centers, torch.eye(3, dtype=V.dtype).reshape(1, 9).expand(2, 9)], dim=1)  # (p, a1, a2, a3)
    return F, E, body, dhat, x0, q


def _positions(q, x0, body):
    p, A = q[:, :3], q[:, 3:].reshape(-1, 3, 3)
    return torch.einsum("vij,vj->vi", A[body], x0) + p[body]


def test_affine_body_chain_rule_matches_autograd():
    F, E, body, dhat, x0, q = _affine_scene()
    V = _positions(q, x0, body)
    cand = ipc.collision_candidates(V, F, E, dhat, vertex_body=body)
    kappa = 4.0
    H = ipc.barrier_potential_hessian(V, F, E, cand, dhat, kappa, project_to_psd=False)
    g = ipc.barrier_potential_gradient(V, F, E, cand, dhat, kappa, per_candidate=True)
    out = body_gradient_hessian(g, H.local, H.stencils, body, affine_jacobian(x0), 2)

    def energy(flat_q):
        return ipc.barrier_potential(_positions(flat_q.reshape(2, 12), x0, body), F, E, cand, dhat, kappa,
                                     rest_vertices=V)

    flat = q.reshape(-1).clone()
    g_ref = torch.autograd.functional.jacobian(energy, flat)
    H_ref = torch.autograd.functional.hessian(energy, flat)
    torch.testing.assert_close(out.gradient.reshape(-1), g_ref, rtol=1e-9, atol=1e-9 * float(g_ref.abs().max()))
    torch.testing.assert_close(out.matrix.to_dense(), H_ref, rtol=1e-8, atol=1e-8 * float(H_ref.abs().max()))


def test_projected_body_hessian_is_psd():
    F, E, body, dhat, x0, q = _affine_scene()
    V = _positions(q, x0, body)
    cand = ipc.collision_candidates(V, F, E, dhat, vertex_body=body)
    H = ipc.barrier_potential_hessian(V, F, E, cand, dhat, 1.0)
    g = ipc.barrier_potential_gradient(V, F, E, cand, dhat, 1.0, per_candidate=True)
    out = body_gradient_hessian(g, H.local, H.stencils, body, affine_jacobian(x0), 2)
    ev = torch.linalg.eigvalsh(out.matrix.to_dense())
    assert float(ev.min()) >= -1e-10 * float(ev.abs().max())


def test_rigid_body_gradient_matches_autograd_at_current_pose():
    """x = p + R(θ) r with R(0) = I: the first-order chain rule is exact at θ = 0."""
    V, F, E, body, dhat, _ = _scene(3, seed=10)
    centers = torch.stack([V[body == b].mean(0) for b in range(2)])
    r = V - centers[body]
    cand = ipc.collision_candidates(V, F, E, dhat, vertex_body=body)
    g = ipc.barrier_potential_gradient(V, F, E, cand, dhat, 1.0, per_candidate=True)
    H = ipc.barrier_potential_hessian(V, F, E, cand, dhat, 1.0)
    out = body_gradient_hessian(g, H.local, H.stencils, body, rigid_jacobian(r), 2)

    def energy(y):
        y = y.reshape(2, 6)
        th = y[:, 3:]
        zero = torch.zeros_like(th[:, 0])
        K = torch.stack([torch.stack([zero, -th[:, 2], th[:, 1]], -1), torch.stack([th[:, 2], zero, -th[:, 0]], -1),
                         torch.stack([-th[:, 1], th[:, 0], zero], -1)], 1)
        R = torch.linalg.matrix_exp(K)
        x = torch.einsum("vij,vj->vi", R[body], r) + centers[body] + y[body, :3]
        return ipc.barrier_potential(x, F, E, cand, dhat, 1.0, rest_vertices=V)

    g_ref = torch.autograd.functional.jacobian(energy, torch.zeros(12, dtype=V.dtype))
    torch.testing.assert_close(out.gradient.reshape(-1), g_ref, rtol=1e-9, atol=1e-9 * float(g_ref.abs().max()))
    assert out.local.shape[1:] == (24, 24)


def test_body_chain_rule_bad_input():
    F, E, body, dhat, x0, q = _affine_scene()
    V = _positions(q, x0, body)
    cand = ipc.collision_candidates(V, F, E, dhat, vertex_body=body)
    H = ipc.barrier_potential_hessian(V, F, E, cand, dhat, 1.0)
    g = ipc.barrier_potential_gradient(V, F, E, cand, dhat, 1.0, per_candidate=True)
    with pytest.raises(ValueError, match="vertex_body"):
        body_gradient_hessian(g, H.local, H.stencils, body, affine_jacobian(x0), 1)
    with pytest.raises(ValueError, match="jacobian"):
        body_gradient_hessian(g, H.local, H.stencils, body, affine_jacobian(x0)[:-1], 2)
    with pytest.raises(ValueError, match="local_hessian"):
        body_gradient_hessian(g, H.local[:, :6].contiguous(), H.stencils, body, affine_jacobian(x0), 2)

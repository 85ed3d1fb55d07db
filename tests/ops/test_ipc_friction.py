"""Smooth lagged IPC friction: IPC Toolkit values, finite differences, autograd, PSD, bad input."""

import numpy as np
import pytest
import torch

from contactnet.ops import ipc
from tests.ops import ipc_cases as cases

ipctk = pytest.importorskip("ipctk")


def _scene(n=8, seed=0, scale=1e-3):
    V, F, E, body, dhat = cases.stacked_sheets(n, seed=seed)
    cand = ipc.collision_candidates(V, F, E, dhat)
    g = torch.Generator().manual_seed(seed + 100)
    vel = scale * torch.randn(V.shape, generator=g, dtype=V.dtype)
    return V, F, E, dhat, cand, vel


def _rel(a, b):
    return float(np.abs(a - b).max() / np.abs(b).max())


@pytest.mark.parametrize("scale", [1e-4, 1e-2])  # mostly static / mostly sliding against eps_v
def test_matches_ipctk(scale):
    V, F, E, dhat, cand, vel = _scene(8, seed=1, scale=scale)
    kappa, mu, eps_v = 20.0, 0.4, 1e-3
    Vn, vn = V.numpy(), vel.numpy()
    mesh = ipctk.CollisionMesh(Vn, E.numpy().astype(np.int32), F.numpy().astype(np.int32))
    coll = ipctk.NormalCollisions()
    coll.build(mesh, Vn, dhat)
    tc = ipctk.TangentialCollisions()
    tc.build(mesh, Vn, coll, ipctk.BarrierPotential(dhat, kappa), mu)
    D = ipctk.FrictionPotential(eps_v)
    e = float(ipc.friction_potential(vel, V, F, E, cand, dhat, kappa, mu, eps_v))
    assert abs(e - D(tc, mesh, vn)) <= 1e-9 * abs(D(tc, mesh, vn))
    g = ipc.friction_potential_gradient(vel, V, F, E, cand, dhat, kappa, mu, eps_v)
    assert _rel(g.numpy().reshape(-1), D.gradient(tc, mesh, vn)) < 1e-9
    H = ipc.friction_potential_hessian(vel, V, F, E, cand, dhat, kappa, mu, eps_v)
    assert _rel(H.matrix.to_dense().numpy(), D.hessian(tc, mesh, vn).toarray()) < 1e-9
    ev = torch.linalg.eigvalsh(H.local)
    assert float(ev.min()) >= -1e-12 * float(ev.abs().max())


def test_finite_differences_and_autograd():
    V, F, E, dhat, cand, vel = _scene(3, seed=2, scale=3e-4)
    args = (V, F, E, cand, dhat, 5.0, 0.5, 5e-4)
    g = ipc.friction_potential_gradient(vel, *args)
    H = ipc.friction_potential_hessian(vel, *args).matrix.to_dense()
    h = 1e-9
    gen = torch.Generator().manual_seed(0)
    for _ in range(3):
        d = torch.randn(vel.shape, generator=gen, dtype=vel.dtype)
        fd_e = (ipc.friction_potential(vel + h * d, *args) - ipc.friction_potential(vel - h * d, *args)) / (2 * h)
        assert abs(float(fd_e - (g * d).sum())) <= 1e-5 * float((g * d).abs().sum())
        fd_g = (ipc.friction_potential_gradient(vel + h * d, *args)
                - ipc.friction_potential_gradient(vel - h * d, *args)) / (2 * h)
        Hd = (H @ d.reshape(-1)).reshape(-1, 3)
        assert float((Hd - fd_g).abs().max()) <= 1e-5 * float(Hd.abs().max())
    x = vel[:12].clone()
    small = lambda v: ipc.friction_potential(torch.cat([v, vel[12:]]), *args)  # noqa: E731
    assert torch.autograd.gradcheck(small, [x.requires_grad_()], eps=1e-9, atol=1e-8, rtol=1e-5)


def test_zero_velocity_and_inactive():
    V, F, E, dhat, cand, vel = _scene(3, seed=3)
    args = (V, F, E, cand, dhat, 5.0, 0.5, 1e-3)
    zero = torch.zeros_like(vel)
    g = ipc.friction_potential_gradient(zero, *args)
    assert float(g.abs().max()) == 0.0
    H = ipc.friction_potential_hessian(zero, *args)
    assert bool(torch.isfinite(H.local).all())
    # mu = 0: no friction.
    assert float(ipc.friction_potential(vel, V, F, E, cand, dhat, 5.0, 0.0, 1e-3)) == 0.0


def test_opcheck():
    V, F, E, dhat, cand, vel = _scene(2, seed=4)
    fv, ee = cand
    ops = torch.ops.contactnet
    for op in (ops.ipc_friction_potential, ops.ipc_friction_potential_gradient, ops.ipc_friction_potential_hessian):
        torch.library.opcheck(op, (vel.clone().requires_grad_(op is not ops.ipc_friction_potential_hessian),
                                   V, V, F, E, fv, ee, dhat, 2.0, 0.3, 1e-3))


def test_bad_input():
    V, F, E, dhat, cand, vel = _scene(2)
    with pytest.raises(ValueError, match="eps_v"):
        ipc.friction_potential(vel, V, F, E, cand, dhat, 1.0, 0.5, 0.0)
    with pytest.raises(ValueError, match="mu"):
        ipc.friction_potential(vel, V, F, E, cand, dhat, 1.0, -0.5, 1e-3)
    with pytest.raises(ValueError, match="dhat"):
        ipc.friction_potential(vel, V, F, E, cand, -1.0, 1.0, 0.5, 1e-3)
    with pytest.raises(ValueError, match="velocities"):
        ipc.friction_potential(vel[:-1].contiguous(), V, F, E, cand, dhat, 1.0, 0.5, 1e-3)

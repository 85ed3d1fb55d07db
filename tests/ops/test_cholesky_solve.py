"""The stepper's batched SPD solve (`ipc.cholesky_solve`) against torch.linalg on random, shifted,
ill-conditioned, indefinite and non-finite systems."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from contactnet.ops import ipc


def spd(E, n, dtype=torch.float64, seed=0, cond=1e3):
    """E random SPD n×n matrices with eigenvalues spread log-uniformly over [1, cond]."""
    g = torch.Generator().manual_seed(seed)
    Q, _ = torch.linalg.qr(torch.randn(E, n, n, generator=g, dtype=torch.float64))
    lam = cond ** torch.rand(E, n, generator=g, dtype=torch.float64)
    return (Q * lam[:, None, :] @ Q.mT).to(dtype)


@settings(max_examples=25, deadline=None)
@given(E=st.integers(1, 5), n=st.integers(1, 130), seed=st.integers(0, 10**6),
       log_cond=st.floats(0, 10), shifted=st.booleans())
def test_cholesky_solve_matches_torch(E, n, seed, log_cond, shifted):
    H = spd(E, n, seed=seed, cond=10**log_cond)
    g = torch.randn(E, n, generator=torch.Generator().manual_seed(seed + 1), dtype=torch.float64)
    shift = torch.rand(E, dtype=torch.float64) if shifted else torch.zeros(E, dtype=torch.float64)
    x, ok = ipc.cholesky_solve(H, g, shift)
    want = torch.linalg.solve(H + shift[:, None, None] * torch.eye(n, dtype=H.dtype), g)
    assert ok.all()
    # Backward-stable solves of the same system agree to cond · eps.
    torch.testing.assert_close(x, want, rtol=0, atol=1e-14 * 10**log_cond * float(want.abs().max()) + 1e-300)


@settings(max_examples=40, deadline=None)
@given(E=st.integers(1, 3), n=st.integers(1, 140), seed=st.integers(0, 10**6), band=st.integers(0, 40))
def test_cholesky_solve_on_block_sparse_systems_matches_torch(E, n, seed, band):
    """The factorisation skips each row's leading zeros (its envelope): systems whose rows start
    anywhere, a chain's band, rows that are diagonal only, zeros inside the envelope, still solve as
    torch's dense solve does."""
    g = torch.Generator().manual_seed(seed)
    L = torch.randn(E, n, n, generator=g, dtype=torch.float64).tril(-1) * 0.3
    i = torch.arange(n)
    lead = (i - torch.randint(0, band + 1, (E, n), generator=g)).clamp_min(0)  # a band of random widths
    lead = torch.where(torch.rand(E, n, generator=g) < 0.1, i, lead)  # some rows diagonal only
    L = L * (i[None, None, :] >= lead[..., None]) * (torch.rand(E, n, n, generator=g) > 0.2)
    L = L + torch.diag_embed(1 + torch.rand(E, n, generator=g, dtype=torch.float64))
    H = L @ L.mT
    b = torch.randn(E, n, generator=g, dtype=torch.float64)
    x, ok = ipc.cholesky_solve(H, b, torch.zeros(E, dtype=torch.float64))
    assert ok.all()
    want = torch.linalg.solve(H, b)
    cond = float(torch.linalg.cond(H).max())
    torch.testing.assert_close(x, want, rtol=0, atol=1e-14 * cond * float(want.abs().max()) + 1e-300)


def test_cholesky_solve_reads_the_lower_triangle_and_flags_failures():
    H = spd(4, 24, seed=3)
    g = torch.randn(4, 24, dtype=torch.float64)
    want = torch.linalg.solve(H, g)
    upper_garbage = H.tril() + torch.full_like(H, 7.0).triu(1)  # the strict upper triangle is never read
    x, ok = ipc.cholesky_solve(upper_garbage, g, torch.zeros(4, dtype=torch.float64))
    torch.testing.assert_close(x, want, rtol=1e-12, atol=1e-12)
    bad = H.clone()
    bad[1] -= 2e3 * torch.eye(24, dtype=torch.float64)  # indefinite
    bad[2, 5, 5] = float("nan")
    x, ok = ipc.cholesky_solve(bad, g, torch.zeros(4, dtype=torch.float64))
    assert ok.tolist() == [True, False, False, True]
    assert x[[1, 2]].isnan().all() and torch.isfinite(x[[0, 3]]).all()
    # A large enough shift makes the indefinite one factorise.
    x, ok = ipc.cholesky_solve(bad, g, torch.tensor([0.0, 3e3, 0.0, 0.0], dtype=torch.float64))
    assert bool(ok[1])
    torch.testing.assert_close(x[1], torch.linalg.solve(bad[1] + 3e3 * torch.eye(24, dtype=torch.float64), g[1]))


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA device"))])
def test_fixed_dofs_are_held_as_the_identity_and_solve_to_zero(device):
    """fixed: the rows and columns of the held DOFs become the identity's in place, their gradient
    entries read as 0: the same bits as holding them by hand first (the stepper's static bodies)."""
    E, n = 3, 36
    H = spd(E, n, seed=7).to(device)
    g = torch.randn(E, n, generator=torch.Generator().manual_seed(8), dtype=torch.float64).to(device)
    fixed = torch.zeros(E, n, dtype=torch.bool, device=device)
    fixed[0, :12] = True  # a static first body
    fixed[1, [5, 20, 35]] = True  # scattered DOFs
    by_hand = H.clone()
    rows = fixed[:, :, None] | fixed[:, None, :]
    by_hand[rows] = 0.0
    by_hand.diagonal(dim1=1, dim2=2)[fixed] = 1.0
    shift = torch.tensor([0.0, 0.25, 0.0], dtype=torch.float64, device=device)
    want, want_ok = ipc.cholesky_solve(by_hand.clone(), g.masked_fill(fixed, 0.0), shift)
    held = H.clone()
    x, ok = ipc.cholesky_solve(held, g, shift, fixed)
    assert torch.equal(held, by_hand)
    assert torch.equal(x, want) and torch.equal(ok, want_ok) and bool(ok.all())
    assert not bool(x[fixed].any())
    # The free DOFs solve the system restricted to them.
    free = ~fixed[1]
    sub = H[1][free][:, free] + 0.25 * torch.eye(int(free.sum()), dtype=torch.float64, device=device)
    torch.testing.assert_close(x[1][free], torch.linalg.solve(sub, g[1][free]), rtol=1e-10, atol=1e-12)
    with pytest.raises(TypeError, match="fixed"):
        ipc.cholesky_solve(H.clone(), g, shift, fixed.to(torch.int64))


def test_cholesky_solve_float32_and_bad_arguments():
    H, g = spd(2, 10, dtype=torch.float32), torch.randn(2, 10)
    x, ok = ipc.cholesky_solve(H, g, torch.zeros(2))
    assert x.dtype == torch.float32 and ok.all()
    torch.testing.assert_close(x, torch.linalg.solve(H.double(), g.double()).float(), rtol=1e-4, atol=1e-4)
    z = torch.zeros(2)
    with pytest.raises(ValueError, match="hessian"):
        ipc.cholesky_solve(H[:, :, :9].contiguous(), g, z)
    with pytest.raises(ValueError, match="gradient"):
        ipc.cholesky_solve(H, g[:, :9], z)
    with pytest.raises(ValueError, match="shift"):
        ipc.cholesky_solve(H, g, torch.zeros(3))
    with pytest.raises(TypeError, match="gradient"):
        ipc.cholesky_solve(H, g.double(), z)
    with pytest.raises(ValueError, match="contiguous"):
        ipc.cholesky_solve(H.mT, g, z)


def test_the_factor_solve_the_gpu_path_uses_matches_torch_cholesky_solve():
    # The GPU path solves with two triangular solves (capturable in a CUDA graph); same answer.
    from contactnet.ops.ipc.cholesky import cholesky_factor_solve

    H = spd(6, 48, seed=5, cond=1e6)
    g = torch.randn(6, 48, generator=torch.Generator().manual_seed(6), dtype=torch.float64)
    L = torch.linalg.cholesky(H)
    want = torch.cholesky_solve(g[..., None], L)[..., 0]
    torch.testing.assert_close(cholesky_factor_solve(L, g), want, rtol=1e-10, atol=0)


def test_opcheck():
    """The schema declares the in-place write of the held DOFs (`Tensor(a!) hessian`)."""
    H, g = spd(2, 12, seed=9), torch.randn(2, 12, dtype=torch.float64)
    fixed = torch.zeros(2, 12, dtype=torch.bool)
    fixed[1, :3] = True
    shift = torch.zeros(2, dtype=torch.float64)
    torch.library.opcheck(torch.ops.contactnet.ipc_cholesky_solve, (H, g, shift, fixed))
    torch.library.opcheck(torch.ops.contactnet.ipc_cholesky_solve, (H, g, shift, None))

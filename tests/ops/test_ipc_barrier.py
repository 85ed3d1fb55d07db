"""The IPC log barrier on squared distances: IPC Toolkit values, derivatives, edge cases."""

import pytest
import torch

from contactnet.ops import ipc
from contactnet.ops.reference import ipc as ref

ipctk = pytest.importorskip("ipctk")


def test_matches_ipctk_and_reference():
    dhat = 0.01
    d2 = torch.cat([torch.logspace(-14, -4, 200, dtype=torch.float64), torch.tensor([dhat**2, 2e-4, 1.0])])
    b = ipc.barrier(d2, dhat)
    # Relative to each value, with a floor of 1e-12 of the quantity's largest magnitude (the
    # cancellation in (d² - d̂²) just below d̂²).
    funcs = (ipctk.barrier, ipctk.barrier_first_derivative, ipctk.barrier_second_derivative)
    for got, fn in zip(b, funcs):
        want = torch.tensor([fn(x, dhat**2) for x in d2.tolist()], dtype=torch.float64)
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12 * float(want.abs().max()))
    torch.testing.assert_close(b.value, ref.barrier(d2, dhat), rtol=1e-12, atol=0)
    assert bool((b.value[d2 >= dhat**2] == 0).all() and (b.first[d2 >= dhat**2] == 0).all())


def test_derivatives_match_finite_differences():
    dhat = 0.5
    x = torch.linspace(0.01, 0.24, 50, dtype=torch.float64)
    h = 1e-7
    b, bp, bm = ipc.barrier(x, dhat), ipc.barrier(x + h, dhat), ipc.barrier(x - h, dhat)
    torch.testing.assert_close(b.first, (bp.value - bm.value) / (2 * h), rtol=1e-6, atol=1e-9)
    torch.testing.assert_close(b.second, (bp.first - bm.first) / (2 * h), rtol=1e-6, atol=1e-9)


def test_autograd():
    x = torch.linspace(0.01, 0.3, 7, dtype=torch.float64).requires_grad_()
    assert torch.autograd.gradcheck(lambda t: ipc.barrier(t, 0.5).value, [x])
    assert torch.autograd.gradgradcheck(lambda t: ipc.barrier(t, 0.5).value, [x])


def test_nonpositive_distance_is_infinite():
    """d² ≤ 0 is contact or penetration: the barrier is +inf (never a silent finite value)."""
    b = ipc.barrier(torch.tensor([0.0, -1e-3], dtype=torch.float64), 0.1)
    assert bool(torch.isposinf(b.value).all() and torch.isneginf(b.first).all() and torch.isposinf(b.second).all())


@pytest.mark.parametrize("dhat", [0.0, -1.0, float("nan"), float("inf")])
def test_bad_dhat(dhat):
    with pytest.raises(ValueError, match="dhat"):
        ipc.barrier(torch.ones(3), dhat)


def test_bad_input():
    with pytest.raises(ValueError, match="d2"):
        ipc.barrier(torch.ones(3, 1), 0.1)
    with pytest.raises(TypeError, match="d2"):
        ipc.barrier(torch.ones(3, dtype=torch.int64), 0.1)
    with pytest.raises(TypeError, match="dhat"):
        ipc.barrier(torch.ones(3), "0.1")


def test_opcheck(device):
    torch.library.opcheck(torch.ops.contactnet.ipc_barrier,
                          (torch.rand(6, dtype=torch.float64, device=device).requires_grad_(), 0.9))


def test_float32(device):
    x = torch.linspace(1e-4, 1e-2, 20, device=device)
    torch.testing.assert_close(ipc.barrier(x, 0.1).value.double(), ipc.barrier(x.double(), 0.1).value, rtol=1e-4, atol=1e-12)

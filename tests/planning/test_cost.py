import pytest
import torch

from contactnet.planning import collision_cost, learned_collision_cost


def test_cost_pieces_and_c1_continuity():
    eta = 0.02
    d = torch.tensor([1.0, eta, eta / 2, 0.0, -0.01], dtype=torch.float64)
    expected = torch.tensor([0.0, 0.0, (eta / 2) ** 2 / (2 * eta), eta / 2, 0.01 + eta / 2], dtype=torch.float64)
    torch.testing.assert_close(collision_cost(d, eta), expected)
    # Value and slope match across d = 0 and d = eta.
    for x in (0.0, eta):
        h = 1e-7
        lo, mid, hi = collision_cost(torch.tensor([x - h, x, x + h], dtype=torch.float64), eta)
        assert abs(hi - lo) < 3 * h
        x0 = torch.tensor([x - 1e-9, x + 1e-9], dtype=torch.float64, requires_grad=True)
        g = torch.autograd.grad(collision_cost(x0, eta).sum(), x0)[0]
        assert abs(g[0] - g[1]) < 1e-6
    d = torch.tensor([-0.5, 0.0], dtype=torch.float64, requires_grad=True)
    g = torch.autograd.grad(collision_cost(d, eta).sum(), d)[0]
    torch.testing.assert_close(g, torch.tensor([-1.0, -1.0], dtype=torch.float64))


def test_learned_cost_is_smooth_and_monotone():
    logit = torch.linspace(-20, 20, 101, dtype=torch.float64)
    c = learned_collision_cost(logit, 0.05)
    assert c[0] < 1e-9 and bool((c[1:] > c[:-1]).all())
    torch.testing.assert_close(c[-1], torch.tensor(0.05 * 20, dtype=torch.float64), rtol=1e-6, atol=0)


@pytest.mark.parametrize("fn", [collision_cost, learned_collision_cost])
def test_cost_rejects_bad_eta(fn):
    with pytest.raises(ValueError, match="eta"):
        fn(torch.zeros(3), 0.0)

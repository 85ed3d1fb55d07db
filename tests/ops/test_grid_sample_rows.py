"""`grid_sample_rows` (each query samples its own grid of a table in place) against
`F.grid_sample` on per-query copies: values, coordinate gradients (gradcheck and the reference's
autograd), the fallback that differentiates the rows, and argument errors."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from contactnet.ops.grid_sample_rows import grid_sample_rows, grid_sample_rows_reference


def _case(seed: int, n: int = 5, m: int = 4, d: int = 3, q: int = 7, p: int = 11, spread: float = 1.4,
          dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    rows = torch.randn(n * m**3, d, generator=g, dtype=dtype)
    ids = torch.randint(n, (q,), generator=g)
    coords = ((torch.rand(q, p, 3, generator=g, dtype=torch.float64) * 2 - 1) * spread).to(dtype)
    return rows, m, ids, coords


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), m=st.integers(1, 6), d=st.integers(1, 17), spread=st.sampled_from([0.5, 1.0, 3.0]))
def test_values_match_grid_sample_on_copies(seed, m, d, spread):
    rows, m, ids, coords = _case(seed, m=m, d=d, spread=spread)
    torch.testing.assert_close(grid_sample_rows(rows, m, ids, coords), grid_sample_rows_reference(rows, m, ids, coords),
                               rtol=1e-12, atol=1e-12)


def test_cell_centres_faces_outside_and_nan():
    m = 4
    rows = torch.arange(2 * m**3, dtype=torch.float64)[:, None] + 1.0  # cell value = its row + 1
    centre = lambda i: (2 * i + 1) / m - 1  # noqa: E731
    coords = torch.tensor([[[centre(1), centre(2), centre(3)],  # a cell centre: its own value
                            [1.0, centre(0), centre(0)],  # half a cell past the last centre: half of it
                            [1.0 + 2 / m, 0.0, 0.0],  # a cell outside: zero
                            [math.nan, 0.0, 0.0]]], dtype=torch.float64)
    out = grid_sample_rows(rows, m, torch.tensor([1]), coords)[0, :, 0]
    first = m**3
    assert out[0] == first + (1 * m + 2) * m + 3 + 1
    assert out[1] == pytest.approx(0.5 * (first + (3 * m + 0) * m + 0 + 1))
    assert out[2] == 0 and out[3] == 0
    torch.testing.assert_close(out[:3], grid_sample_rows_reference(rows, m, torch.tensor([1]), coords[:, :3])[0, :, 0])


def test_coordinate_gradients_match_the_reference_and_gradcheck():
    rows, m, ids, coords = _case(3, spread=1.2)
    coords.requires_grad_(True)
    weights = torch.randn(rows.shape[1], dtype=torch.float64)
    (g,) = torch.autograd.grad((grid_sample_rows(rows, m, ids, coords) * weights).sum(), coords)
    (want,) = torch.autograd.grad((grid_sample_rows_reference(rows, m, ids, coords) * weights).sum(), coords)
    torch.testing.assert_close(g, want, rtol=1e-10, atol=1e-12)
    # Away from cell boundaries (where the trilinear weights have kinks) finite differences agree.
    inner = _case(4, q=3, p=4, spread=0.3)[3].requires_grad_(True)
    assert torch.autograd.gradcheck(lambda c: grid_sample_rows(rows, m, ids[:3], c), (inner,), eps=1e-7, atol=1e-6)


def test_rows_that_need_a_gradient_take_the_torch_composition():
    rows, m, ids, coords = _case(5)
    rows.requires_grad_(True)
    (g,) = torch.autograd.grad(grid_sample_rows(rows, m, ids, coords).square().sum(), rows)
    (want,) = torch.autograd.grad(grid_sample_rows_reference(rows, m, ids, coords).square().sum(), rows)
    torch.testing.assert_close(g, want)
    with torch.no_grad():  # no gradient wanted: the kernel
        torch.testing.assert_close(grid_sample_rows(rows, m, ids, coords), grid_sample_rows_reference(rows, m, ids, coords))
    with pytest.raises(ValueError, match="rows: grid_sample_rows differentiates the coordinates only"):
        torch.ops.contactnet.grid_sample_rows(rows, m, ids, coords)


def test_float32_and_clear_errors():
    rows, m, ids, coords = _case(6, dtype=torch.float32)
    torch.testing.assert_close(grid_sample_rows(rows, m, ids, coords), grid_sample_rows_reference(rows, m, ids, coords))
    with pytest.raises(ValueError, match="grid: expected an int M >= 1"):
        grid_sample_rows(rows, 0, ids, coords)
    with pytest.raises(ValueError, match=r"rows: expected N·M³ rows \(M = 5\)"):
        grid_sample_rows(rows, 5, ids, coords)
    with pytest.raises(ValueError, match=r"ids: (expected grid ids in|indices must lie in) \[0, 5\)"):
        grid_sample_rows(rows, m, ids + 5, coords)
    with pytest.raises(ValueError, match="coords"):
        grid_sample_rows(rows, m, ids, coords[..., :2])
    with pytest.raises((ValueError, TypeError, RuntimeError), match="coords"):
        grid_sample_rows(rows, m, ids, coords.double())


def test_opcheck():
    rows, m, ids, coords = _case(7, q=3, p=4)
    torch.library.opcheck(torch.ops.contactnet.grid_sample_rows, (rows, m, ids, coords.requires_grad_(True)))
    torch.library.opcheck(torch.ops.contactnet.grid_sample_rows_backward,
                          (rows, m, ids, coords.detach(), torch.randn(3, 4, rows.shape[1], dtype=rows.dtype)))

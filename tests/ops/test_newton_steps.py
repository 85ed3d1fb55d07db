"""The stepper's Newton bookkeeping ops against the torch expressions they replace, bit for bit:
random environments, some done / accepted already, steps at the tolerance, NaN, float32; and the
neighbour lists' relative displacement bound, to the last bit of its norms."""

from types import SimpleNamespace

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from contactnet.ops import ipc
from contactnet.sim import contact_search


def newton_check_reference(dq, radius, limit, done, converged, iterations):
    # The stepper's displacement bound as the library writes it in torch (it reads scene.radius).
    small = contact_search.displacement_bound(SimpleNamespace(radius=radius), dq) <= limit
    converged = converged | (small & ~done)
    done = done | small
    return torch.where(done[:, None, None], 0.0, dq), done, converged, iterations + (~done).long()


def accept_reference(q, trial, x, x_trial, vertex_env, energy, trial_energy, accepted, alpha):
    ok = (trial_energy <= energy + 1e-12 * energy.abs()) & ~accepted
    q = torch.where(ok[:, None, None], trial, q)
    x = torch.where(ok[vertex_env, None], x_trial, x)
    energy = torch.where(ok, trial_energy, energy)
    accepted = accepted | ok
    return q, x, energy, accepted, torch.where(accepted, alpha, 0.5 * alpha)


def assert_same(got, want):
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        assert torch.equal(g.isnan(), w.isnan()) if g.is_floating_point() else True
        assert torch.equal(torch.nan_to_num(g) if g.is_floating_point() else g,
                           torch.nan_to_num(w) if w.is_floating_point() else w)


@settings(max_examples=40, deadline=None)
@given(E=st.integers(1, 9), B=st.integers(1, 5), seed=st.integers(0, 10**6), f32=st.booleans())
def test_newton_check_matches_torch(E, B, seed, f32):
    dtype = torch.float32 if f32 else torch.float64
    g = torch.Generator().manual_seed(seed)
    scale = 10.0 ** torch.randint(-9, -2, (E, 1, 1), generator=g)
    dq = (torch.randn(E, B, 12, generator=g, dtype=torch.float64) * scale).to(dtype)
    dq[torch.rand(E, generator=g) < 0.2] = 0.0  # absent bodies, converged environments
    if E > 2:
        dq[1, 0, 4] = float("nan")
    radius = torch.rand(E, B, generator=g, dtype=torch.float64).to(dtype) * 0.2
    done = torch.rand(E, generator=g) < 0.3
    converged = done & (torch.rand(E, generator=g) < 0.5)
    iterations = torch.randint(0, 5, (E,), generator=g)
    assert_same(ipc.newton_check(dq, radius, 1e-6, done, converged, iterations),
                newton_check_reference(dq, radius, 1e-6, done, converged, iterations))


def test_newton_check_bound_and_tolerance():
    """The bound is |Δp| + ‖ΔA‖_F · radius, the largest over bodies, and a bound equal to the limit
    is small (norms of one nonzero entry are exact: no rounding in the way)."""
    dq = torch.zeros(3, 2, 12, dtype=torch.float64)
    dq[:, 1, 2] = 3e-7  # |Δp| = 3e-7
    dq[:, 0, 7] = 1e-6  # ‖ΔA‖ = 1e-6, times radius 0.25
    radius = torch.full((3, 2), 0.25, dtype=torch.float64)
    flags, its = torch.zeros(3, dtype=torch.bool), torch.zeros(3, dtype=torch.int64)
    _, done, converged, iterations = ipc.newton_check(dq, radius, 3e-7, flags, flags, its)
    assert done.all() and converged.all() and (iterations == 0).all()
    dq_out, done, _, iterations = ipc.newton_check(dq, radius, float(torch.tensor(3e-7).nextafter(torch.tensor(0.0))),
                                                   flags, flags, its)
    assert not done.any() and (iterations == 1).all() and torch.equal(dq_out, dq)


@settings(max_examples=40, deadline=None)
@given(E=st.integers(1, 9), seed=st.integers(0, 10**6), f32=st.booleans())
def test_line_search_accept_matches_torch(E, seed, f32):
    dtype = torch.float32 if f32 else torch.float64
    g = torch.Generator().manual_seed(seed)
    B, V = 3, 7 * E
    q, trial = (torch.randn(E, B, 12, generator=g, dtype=torch.float64).to(dtype) for _ in range(2))
    x, x_trial = (torch.randn(V, 3, generator=g, dtype=torch.float64).to(dtype) for _ in range(2))
    vertex_env = torch.randint(0, E, (V,), generator=g)
    energy = torch.randn(E, generator=g, dtype=torch.float64).to(dtype)
    trial_energy = energy + torch.randn(E, generator=g, dtype=torch.float64).to(dtype)
    trial_energy[torch.rand(E, generator=g) < 0.2] = energy[0]  # ties accept
    if E > 1:
        trial_energy[1] = float("nan")  # never accepted
    accepted = torch.rand(E, generator=g) < 0.3
    alpha = torch.rand(E, generator=g, dtype=torch.float64).to(dtype)
    args = (q, trial, x, x_trial, vertex_env, energy, trial_energy, accepted, alpha)
    assert_same(ipc.line_search_accept(*args), accept_reference(*args))


def relative_bound_reference(dq, radius, present):
    # The torch expression the op replaced in contact_search.relative_displacement_bound.
    mask = present[..., None]
    dp = dq[..., :3]
    shared = 0.5 * (torch.where(mask, dp, float("inf")).amin(-2) + torch.where(mask, dp, -float("inf")).amax(-2))
    norm = torch.linalg.vector_norm
    bound = norm(dp - shared.unsqueeze(-2), dim=-1) + norm(dq[..., 3:], dim=-1) * radius
    return torch.where(present, bound, 0.0).amax(-1)


@settings(max_examples=40, deadline=None)
@given(E=st.integers(1, 6), B=st.integers(1, 5), K=st.integers(0, 2), seed=st.integers(0, 10**6),
       f32=st.booleans())
def test_relative_displacement_bound_matches_torch(E, B, K, seed, f32):
    """Leading dimensions (none, or both ends of a segment), absent bodies (an environment may have
    none: 0), a translation shared by the environment (only the relative motion counts), NaN."""
    dtype = torch.float32 if f32 else torch.float64
    g = torch.Generator().manual_seed(seed)
    lead = (K,) if K else ()
    dq = (torch.randn(*lead, E, B, 12, generator=g, dtype=torch.float64)
          * 10.0 ** torch.randint(-8, 1, (E, 1, 1), generator=g)).to(dtype)
    dq[..., :3] += torch.randn(E, 1, 3, generator=g, dtype=torch.float64).to(dtype)  # a shared shake
    present = torch.rand(E, B, generator=g) < 0.7
    if E > 1:
        present[0] = False
        dq[..., 1, 0, 5] = float("nan")
    radius = (torch.rand(E, B, generator=g, dtype=torch.float64) * 0.2).to(dtype)
    got, want = ipc.relative_displacement_bound(dq, radius, present), relative_bound_reference(dq, radius, present)
    assert got.shape == want.shape == (*lead, E) and torch.equal(got.isnan(), want.isnan())
    eps = torch.finfo(dtype).eps
    torch.testing.assert_close(got.nan_to_num(), want.nan_to_num(), rtol=4 * eps, atol=0)
    if E > 1:
        assert (got[..., 0] == 0).all()


def test_newton_steps_reject_bad_arguments():
    dq, radius = torch.zeros(2, 3, 12), torch.zeros(2, 3)
    flags = torch.zeros(2, dtype=torch.bool)
    its = torch.zeros(2, dtype=torch.int64)
    with pytest.raises(ValueError, match="radius"):
        ipc.newton_check(dq, radius[:1], 1e-6, flags, flags, its)
    with pytest.raises(TypeError, match="iterations"):
        ipc.newton_check(dq, radius, 1e-6, flags, flags, its.int())
    with pytest.raises(ValueError, match="done"):
        ipc.newton_check(dq, radius, 1e-6, flags[:1], flags, its)
    q, x = torch.zeros(2, 3, 12), torch.zeros(5, 3)
    e = torch.zeros(2)
    env = torch.zeros(5, dtype=torch.int64)
    with pytest.raises(ValueError, match="x_trial"):
        ipc.line_search_accept(q, q, x, x[:4], env, e, e, flags, e)
    with pytest.raises(TypeError, match="accepted"):
        ipc.line_search_accept(q, q, x, x, env, e, e, flags.float(), e)
    with pytest.raises(TypeError, match="trial_energy"):
        ipc.line_search_accept(q, q, x, x, env, e, e.double(), flags, e)
    with pytest.raises(ValueError, match="vertex_env"):
        ipc.line_search_accept(q, q, x, x, env[:4], e, e, flags, e)
    present = torch.ones(2, 3, dtype=torch.bool)
    with pytest.raises(ValueError, match="dq"):
        ipc.relative_displacement_bound(dq[..., :6], radius, present)
    with pytest.raises(ValueError, match="radius"):
        ipc.relative_displacement_bound(dq, radius[:1], present)
    with pytest.raises(TypeError, match="present"):
        ipc.relative_displacement_bound(dq, radius, present.float())

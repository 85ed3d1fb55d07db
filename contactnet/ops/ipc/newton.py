"""The stepper's Newton loop bookkeeping, one op per check (C++ on CPU, CUDA on GPU:
csrc/ipc/newton_steps.h). Each replaces a few dozen small tensor ops whose dispatch, on a CPU,
costs more than their arithmetic at the stepper's sizes. The results are the same bits as the
torch expressions written in each docstring, but for `newton_check`'s norms, whose sums may round
differently from torch's in the last bit (a verdict changes only for a bound exactly at the limit).
"""

from __future__ import annotations

import torch

from contactnet._extension import load_extension
from contactnet.ops._checks import as_index_tensor, check_float_tensor, check_same_device, inputs_trusted

load_extension()

__all__ = ["line_search_accept", "newton_check", "relative_displacement_bound"]


def _check_flags(E: int, like: torch.Tensor, like_name: str, **flags) -> None:
    """Each flag (tensor, dtype) is an (E,) tensor of that dtype on like's device."""
    if inputs_trusted():
        return
    for name, (t, dtype) in flags.items():
        if not isinstance(t, torch.Tensor) or t.dtype != dtype:
            raise TypeError(f"{name}: expected a {dtype} tensor, got {getattr(t, 'dtype', type(t).__name__)}")
        if tuple(t.shape) != (E,):
            raise ValueError(f"{name}: expected shape ({E},), got {tuple(t.shape)}")
        check_same_device(t, name, like, like_name)


def newton_check(dq, radius, limit: float, done, converged, iterations):
    """One Newton iteration's convergence test, per environment:

        small = (|dq_p| + ‖dq_A‖_F · radius).amax(bodies) <= limit   (contact_search.displacement_bound)
        converged |= small & ~done;  done |= small;  iterations += ~done;  dq[done] = 0

    dq (E, B, 12) the Newton steps, radius (E, B) m the bodies' bounding radii, limit m, done and
    converged (E,) bool, iterations (E,) int64. Returns the new (dq, done, converged, iterations)."""
    if not inputs_trusted():
        check_float_tensor(dq, "dq", (None, None, 12))
        E, B = dq.shape[:2]
        check_float_tensor(radius, "radius", (E, B))
        check_same_device(radius, "radius", dq, "dq")
        _check_flags(E, dq, "dq", done=(done, torch.bool), converged=(converged, torch.bool),
                     iterations=(iterations, torch.int64))
    return torch.ops.contactnet.ipc_newton_check(dq, radius, float(limit), done, converged, iterations)


def relative_displacement_bound(dq, radius, present):
    """(..., E) bound on how far any point of an environment's present bodies moves under dq
    (..., E, B, 12), relative to one translation s shared by them (the middle of their
    translations' box), x = A x0 + p with |x0| <= radius (E, B) m:

        s = (Δp[present].amin(bodies) + Δp[present].amax(bodies)) / 2
        bound = (|Δp − s| + ‖ΔA‖_F · radius)[present].amax(bodies), 0 without present bodies

    present (E, B) bool. The norms' sums may round differently from torch's in the last bit."""
    if inputs_trusted():
        return torch.ops.contactnet.ipc_relative_displacement_bound(dq, radius, present)
    if not isinstance(dq, torch.Tensor) or dq.ndim < 3 or dq.shape[-1] != 12:
        raise ValueError(f"dq: expected shape (..., E, B, 12), got {getattr(dq, 'shape', type(dq).__name__)}")
    dq = dq.contiguous()
    E, B = dq.shape[-3:-1]
    check_float_tensor(dq, "dq", tuple(dq.shape))
    check_float_tensor(radius, "radius", (E, B))
    check_same_device(radius, "radius", dq, "dq")
    if radius.dtype != dq.dtype:
        raise TypeError(f"radius: expected {dq.dtype} like dq, got {radius.dtype}")
    if not isinstance(present, torch.Tensor) or present.dtype != torch.bool or tuple(present.shape) != (E, B):
        raise TypeError(f"present: expected an ({E}, {B}) bool tensor, got "
                        f"{getattr(present, 'dtype', type(present).__name__)} {tuple(getattr(present, 'shape', ()))}")
    check_same_device(present, "present", dq, "dq")
    return torch.ops.contactnet.ipc_relative_displacement_bound(dq, radius, present.contiguous())


def line_search_accept(q, trial, x, x_trial, vertex_env, energy, trial_energy, accepted, alpha):
    """One line-search trial's acceptance, per environment:

        ok = (trial_energy <= energy + 1e-12 |energy|) & ~accepted
        q, x, energy = where(ok, trial, q), where(ok[vertex_env], x_trial, x), where(ok, trial_energy, energy)
        accepted |= ok;  alpha = where(accepted, alpha, alpha / 2)

    q, trial (E, B, 12); x, x_trial (V, 3) their positions; vertex_env (V,) each vertex's
    environment; energy, trial_energy, alpha (E,); accepted (E,) bool. Returns the new
    (q, x, energy, accepted, alpha)."""
    if not inputs_trusted():
        check_float_tensor(q, "q", (None, None, 12))
        E = q.shape[0]
        check_float_tensor(trial, "trial", tuple(q.shape))
        check_float_tensor(x, "x", (None, 3))
        check_float_tensor(x_trial, "x_trial", tuple(x.shape))
        for name, t in (("energy", energy), ("trial_energy", trial_energy), ("alpha", alpha)):
            check_float_tensor(t, name, (E,))
        for name, t in (("trial", trial), ("x", x), ("x_trial", x_trial), ("energy", energy),
                        ("trial_energy", trial_energy), ("alpha", alpha)):
            check_same_device(t, name, q, "q")
            if t.dtype != q.dtype:
                raise TypeError(f"{name}: expected {q.dtype} like q, got {t.dtype}")
        vertex_env = as_index_tensor(vertex_env, "vertex_env", (x.shape[0],))
        check_same_device(vertex_env, "vertex_env", q, "q")
        _check_flags(E, q, "q", accepted=(accepted, torch.bool))
    return torch.ops.contactnet.ipc_line_search_accept(q, trial, x, x_trial, vertex_env, energy, trial_energy,
                                                       accepted, alpha)


@torch.library.register_fake("contactnet::ipc_newton_check")
def _(dq, radius, limit, done, converged, iterations):
    return dq.new_empty(dq.shape), done.new_empty(done.shape), converged.new_empty(converged.shape), \
        iterations.new_empty(iterations.shape)


@torch.library.register_fake("contactnet::ipc_line_search_accept")
def _(q, trial, x, x_trial, vertex_env, energy, trial_energy, accepted, alpha):
    return q.new_empty(q.shape), x.new_empty(x.shape), energy.new_empty(energy.shape), \
        accepted.new_empty(accepted.shape), alpha.new_empty(alpha.shape)


@torch.library.register_fake("contactnet::ipc_relative_displacement_bound")
def _(dq, radius, present):
    return dq.new_empty(dq.shape[:-2])

"""IPC squared distances between primitives, with their gradients and Hessians (closest feature
classified first, then a smooth closed form: csrc/common/ipc_distance.h), and the edge–edge
mollifier. Every op takes N independent primitives, (N, 3) per vertex; the values, gradients and
Hessians are differentiable (twice, through the analytic siblings)."""

from __future__ import annotations

import torch

from contactnet._extension import load_extension
from contactnet.ops._checks import check_float_tensor, check_same_batch

load_extension()

_ops = torch.ops.contactnet


def _distance_args(names, tensors):
    for n, t in zip(names, tensors):
        check_float_tensor(t, n, (None, 3))
    check_same_batch(dict(zip(names, tensors)))


def point_point_distance_squared(p, q):
    """|p - q|². p, q: (N, 3) -> (N,)."""
    _distance_args(("p", "q"), (p, q))
    return _ops.ipc_point_point_distance(p, q)


def point_point_distance_squared_gradient(p, q):
    """(N, 6) gradient on (p, q)."""
    _distance_args(("p", "q"), (p, q))
    return _ops.ipc_point_point_distance_gradient(p, q)


def point_point_distance_squared_hessian(p, q):
    """(N, 6, 6) Hessian on (p, q)."""
    _distance_args(("p", "q"), (p, q))
    return _ops.ipc_point_point_distance_hessian(p, q)


def point_edge_distance_squared(p, e0, e1):
    """Squared distance from points to segments (closest feature chosen first). (N, 3) each -> (N,)."""
    _distance_args(("p", "e0", "e1"), (p, e0, e1))
    return _ops.ipc_point_edge_distance(p, e0, e1)


def point_edge_distance_squared_gradient(p, e0, e1):
    """(N, 9) gradient on (p, e0, e1)."""
    _distance_args(("p", "e0", "e1"), (p, e0, e1))
    return _ops.ipc_point_edge_distance_gradient(p, e0, e1)


def point_edge_distance_squared_hessian(p, e0, e1):
    """(N, 9, 9) Hessian on (p, e0, e1)."""
    _distance_args(("p", "e0", "e1"), (p, e0, e1))
    return _ops.ipc_point_edge_distance_hessian(p, e0, e1)


def point_triangle_distance_squared(p, t0, t1, t2):
    """Squared point–triangle distance (closest feature chosen first). (N, 3) each -> (N,)."""
    _distance_args(("p", "t0", "t1", "t2"), (p, t0, t1, t2))
    return _ops.ipc_point_triangle_distance(p, t0, t1, t2)


def point_triangle_distance_squared_gradient(p, t0, t1, t2):
    """(N, 12) gradient on (p, t0, t1, t2)."""
    _distance_args(("p", "t0", "t1", "t2"), (p, t0, t1, t2))
    return _ops.ipc_point_triangle_distance_gradient(p, t0, t1, t2)


def point_triangle_distance_squared_hessian(p, t0, t1, t2):
    """(N, 12, 12) Hessian on (p, t0, t1, t2)."""
    _distance_args(("p", "t0", "t1", "t2"), (p, t0, t1, t2))
    return _ops.ipc_point_triangle_distance_hessian(p, t0, t1, t2)


def edge_edge_distance_squared(ea0, ea1, eb0, eb1):
    """Squared segment–segment distance (closest feature chosen first; nearly parallel edges use
    their end-point features). (N, 3) each -> (N,)."""
    _distance_args(("ea0", "ea1", "eb0", "eb1"), (ea0, ea1, eb0, eb1))
    return _ops.ipc_edge_edge_distance(ea0, ea1, eb0, eb1)


def edge_edge_distance_squared_gradient(ea0, ea1, eb0, eb1):
    """(N, 12) gradient on (ea0, ea1, eb0, eb1)."""
    _distance_args(("ea0", "ea1", "eb0", "eb1"), (ea0, ea1, eb0, eb1))
    return _ops.ipc_edge_edge_distance_gradient(ea0, ea1, eb0, eb1)


def edge_edge_distance_squared_hessian(ea0, ea1, eb0, eb1):
    """(N, 12, 12) Hessian on (ea0, ea1, eb0, eb1)."""
    _distance_args(("ea0", "ea1", "eb0", "eb1"), (ea0, ea1, eb0, eb1))
    return _ops.ipc_edge_edge_distance_hessian(ea0, ea1, eb0, eb1)


def edge_edge_mollifier_threshold(ea0_rest, ea1_rest, eb0_rest, eb1_rest):
    """ε_x = 1e-3 |ea1 - ea0|² |eb1 - eb0|² at rest, (N,)."""
    _distance_args(("ea0_rest", "ea1_rest", "eb0_rest", "eb1_rest"), (ea0_rest, ea1_rest, eb0_rest, eb1_rest))
    return 1e-3 * ((ea1_rest - ea0_rest) ** 2).sum(-1) * ((eb1_rest - eb0_rest) ** 2).sum(-1)


def _mollifier_args(ea0, ea1, eb0, eb1, eps_x):
    _distance_args(("ea0", "ea1", "eb0", "eb1"), (ea0, ea1, eb0, eb1))
    check_float_tensor(eps_x, "eps_x", (None,))
    check_same_batch({"ea0": ea0, "eps_x": eps_x})


def edge_edge_mollifier(ea0, ea1, eb0, eb1, eps_x):
    """m(x) = (2 - x/ε) x/ε for x = |(ea1 - ea0) × (eb1 - eb0)|² < ε, else 1. eps_x: (N,) -> (N,)."""
    _mollifier_args(ea0, ea1, eb0, eb1, eps_x)
    return _ops.ipc_edge_edge_mollifier(ea0, ea1, eb0, eb1, eps_x)


def edge_edge_mollifier_gradient(ea0, ea1, eb0, eb1, eps_x):
    """(N, 12) gradient of the mollifier on (ea0, ea1, eb0, eb1), ε_x held fixed."""
    _mollifier_args(ea0, ea1, eb0, eb1, eps_x)
    return _ops.ipc_edge_edge_mollifier_gradient(ea0, ea1, eb0, eb1, eps_x)


def edge_edge_mollifier_hessian(ea0, ea1, eb0, eb1, eps_x):
    """(N, 12, 12) Hessian of the mollifier, ε_x held fixed."""
    _mollifier_args(ea0, ea1, eb0, eb1, eps_x)
    return _ops.ipc_edge_edge_mollifier_hessian(ea0, ea1, eb0, eb1, eps_x)


# ---- fake (meta) implementations and autograd ---------------------------------------------------

# op name -> number of stencil vertices (the gradient has 3× as many entries)
_DISTANCE_OPS = {
    "ipc_point_point_distance": 2,
    "ipc_point_edge_distance": 3,
    "ipc_point_triangle_distance": 4,
    "ipc_edge_edge_distance": 4,
    "ipc_edge_edge_mollifier": 4,
}


def _register_fakes(name: str, nv: int) -> None:
    K = 3 * nv

    def value(*args):
        return args[0].new_empty((args[0].shape[0],))

    def gradient(*args):
        return args[0].new_empty((args[0].shape[0], K))

    def hessian(*args):
        return args[0].new_empty((args[0].shape[0], K, K))

    torch.library.register_fake(f"contactnet::{name}")(value)
    torch.library.register_fake(f"contactnet::{name}_gradient")(gradient)
    torch.library.register_fake(f"contactnet::{name}_hessian")(hessian)


def _register_autograd(name: str, nv: int, has_eps: bool) -> None:
    """Backward from the analytic gradient, double backward from the Hessian."""
    grad_op = getattr(_ops, f"{name}_gradient")
    hess_op = getattr(_ops, f"{name}_hessian")

    def setup(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    def backward(ctx, grad_out):
        inputs = ctx.saved_tensors
        g = grad_op(*inputs).reshape(-1, nv, 3) * grad_out[:, None, None]
        grads = [g[:, k] for k in range(nv)]
        return (*grads, None) if has_eps else tuple(grads)

    def grad_backward(ctx, grad_out):
        inputs = ctx.saved_tensors
        H = hess_op(*inputs)  # (N, K, K), symmetric
        g = torch.einsum("nij,nj->ni", H, grad_out).reshape(-1, nv, 3)
        grads = [g[:, k] for k in range(nv)]
        return (*grads, None) if has_eps else tuple(grads)

    torch.library.register_autograd(f"contactnet::{name}", backward, setup_context=setup)
    torch.library.register_autograd(f"contactnet::{name}_gradient", grad_backward, setup_context=setup)


for _name, _nv in _DISTANCE_OPS.items():
    _register_fakes(_name, _nv)
    _register_autograd(_name, _nv, _name == "ipc_edge_edge_mollifier")

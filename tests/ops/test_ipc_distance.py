"""IPC squared distances, their gradients and Hessians: reference closed forms (autograd), finite
differences across feature boundaries, IPC Toolkit, opcheck, autograd, bad input."""

import pytest
import torch

from contactnet.ops import ipc
from contactnet.ops.reference import ipc as ref

ipctk = pytest.importorskip("ipctk")

KINDS = {  # name: (number of vertices, ipctk function stem)
    "point_point": (2, "point_point"),
    "point_edge": (3, "point_edge"),
    "point_triangle": (4, "point_triangle"),
    "edge_edge": (4, "edge_edge"),
}


def _fns(kind):
    base = getattr(ipc, f"{kind}_distance_squared")
    return base, getattr(ipc, f"{kind}_distance_squared_gradient"), getattr(ipc, f"{kind}_distance_squared_hessian")


def _split(x):
    """(N, nv, 3) -> list of nv (N, 3) contiguous tensors."""
    return [x[:, k].contiguous() for k in range(x.shape[1])]


def _rel(a, b):
    return float((a - b).abs().max() / max(float(b.abs().max()), 1e-300))


# ---- inputs straddling every feature boundary --------------------------------------------------

EPS = 1e-12


def _pt_boundary_cases():
    """Point–triangle stencils on, and ±1e-12 off, every Voronoi-region boundary."""
    t = torch.tensor([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]], dtype=torch.float64)
    pts = []
    h = 0.3  # height above the plane
    for e in (-EPS, 0.0, EPS):
        pts += [
            [0.4, e, h],  # across edge E0 (y = 0)
            [e, 0.4, h],  # across edge E2 (x = 0)
            [0.5 + e, 0.5 + e, h],  # across edge E1 (x + y = 1)
            [e, e, h],  # at vertex T0
            [1.0 + e, e, h],  # at vertex T1, corner of E0/E1 regions
            [e, 1.0 + e, h],  # at vertex T2
            [1.0 + e, -0.2, h],  # boundary between the E0 and T1 regions
            [-0.2, e, h],  # boundary between the T0 and E0 ... regions
            [0.3, 0.3, e],  # on the plane
        ]
    p = torch.tensor(pts, dtype=torch.float64)
    return torch.cat([p[:, None], t.expand(p.shape[0], 3, 3)], dim=1)


def _ee_boundary_cases():
    """Edge–edge stencils: crossing, end points touching the other edge's region boundaries,
    parallel and nearly parallel (angles 1e-12 .. 1e-3), collinear, and T-junctions."""
    rows = []
    for e in (-EPS, 0.0, EPS):
        rows += [
            [[0, 0, 0], [1, 0, 0], [0.5, -1, 0.2], [0.5, 1, 0.2]],  # interior–interior
            [[0, 0, 0], [1, 0, 0], [e, -1, 0.2], [e, 1, 0.2]],  # at the EA0 end
            [[0, 0, 0], [1, 0, 0], [1 + e, -1, 0.2], [1 + e, 1, 0.2]],  # at the EA1 end
            [[0, 0, 0], [1, 0, 0], [0.5, e, 0.2], [0.5, 1, 0.2]],  # EB0 end
            [[0, 0, 0], [1, 0, 0], [0.5, -1, 0.2], [0.5, -e, 0.2]],  # EB1 end
            [[0, 0, 0], [1, 0, 0], [e, e, 0.2], [-0.5, 1, 0.2]],  # end point to end point
        ]
    for ang in (0.0, 1e-12, 1e-9, 1e-6, 1e-3):
        rows += [
            [[0, 0, 0], [1, 0, 0], [0.2, 0.1, 0.1], [1.3, 0.1 + ang, 0.1]],  # (nearly) parallel, overlapping
            [[0, 0, 0], [1, 0, 0], [1.2, 0.1, 0.1], [2.3, 0.1 + ang, 0.1]],  # (nearly) parallel, disjoint
        ]
    rows.append([[0, 0, 0], [1, 0, 0], [2, 0, 0], [3, 0, 0]])  # collinear
    return torch.tensor(rows, dtype=torch.float64)


def _pe_boundary_cases():
    rows = []
    for e in (-EPS, 0.0, EPS):
        rows += [[[e, 0.3, 0.1], [0, 0, 0], [1, 0, 0]], [[1 + e, 0.3, 0.1], [0, 0, 0], [1, 0, 0]],
                 [[0.5, 0.3, 0.1], [0, 0, 0], [1, 0, 0]]]
    return torch.tensor(rows, dtype=torch.float64)


def _random(nv, n=64, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, nv, 3, generator=g, dtype=torch.float64)


CASES = {
    "point_point": lambda: torch.cat([_random(2), torch.tensor([[[0, 0, 0], [1e-12, 0, 0]]], dtype=torch.float64)]),
    "point_edge": lambda: torch.cat([_random(3), _pe_boundary_cases()]),
    "point_triangle": lambda: torch.cat([_random(4), _pt_boundary_cases()]),
    "edge_edge": lambda: torch.cat([_random(4), _ee_boundary_cases()]),
}


def _not_nearly_parallel(x):
    """Rows of edge–edge stencils whose edges are at least 0.1 rad apart. Nearly parallel edges have a
    distance whose Hessian grows like 1/sin²θ and that is not differentiable at θ = 0 (the closest
    pair jumps between the ends of the overlap): the reason IPC multiplies edge–edge barriers by the
    mollifier, whose product is checked in test_ipc_potential.py."""
    a, b = x[:, 1] - x[:, 0], x[:, 3] - x[:, 2]
    sin2 = (torch.linalg.cross(a, b) ** 2).sum(-1) / ((a**2).sum(-1) * (b**2).sum(-1))
    return x[sin2 > 0.01]


def _fd_gradient(f, x, h=1e-6):
    """Central differences of a per-row scalar f on x (N, nv, 3)."""
    g = torch.zeros_like(x)
    for k in range(x.shape[1]):
        for c in range(3):
            step = torch.zeros_like(x)
            step[:, k, c] = h
            g[:, k, c] = (f(x + step) - f(x - step)) / (2 * h)
    return g.reshape(x.shape[0], -1)


@pytest.mark.parametrize("kind", KINDS)
def test_gradient_matches_finite_differences_across_boundaries(kind):
    """The squared distance is C¹ across feature boundaries, so central differences check the
    analytic gradient even at points 1e-12 from (or on) a boundary."""
    f, grad, _ = _fns(kind)
    x = CASES[kind]()
    if kind == "edge_edge":
        x = _not_nearly_parallel(x)
    g = grad(*_split(x))
    # A small step keeps the O(h) error of differencing across a Hessian jump negligible.
    fd = _fd_gradient(lambda y: f(*_split(y)), x, h=1e-8)
    scale = g.abs().amax(dim=1, keepdim=True).clamp_min(1e-8)
    assert float(((g - fd).abs() / scale).max()) < 1e-6


@pytest.mark.parametrize("kind", KINDS)
def test_hessian_matches_finite_differences_of_gradient(kind):
    """Away from boundaries (random stencils), the Hessian is the derivative of the gradient."""
    _, grad, hess = _fns(kind)
    x = _random(KINDS[kind][0], n=32, seed=1)
    H = hess(*_split(x))
    K = H.shape[1]
    fd = torch.zeros_like(H)
    h = 1e-6
    for j in range(K):
        step = torch.zeros(x.shape[0], K, dtype=x.dtype)
        step[:, j] = h
        s = step.reshape(x.shape)
        fd[:, :, j] = (grad(*_split(x + s)) - grad(*_split(x - s))) / (2 * h)
    scale = H.abs().amax(dim=(1, 2), keepdim=True).clamp_min(1e-8)
    assert float(((H - fd).abs() / scale).max()) < 1e-5


def _reference_derivatives(x, kind, type_):
    def f(flat):
        y = flat.reshape(-1, 3)
        if kind == "point_point":
            return ref.point_point(y[0:1], y[1:2])[0]
        if kind == "point_edge":
            idx = {0: (0, 1), 1: (0, 2), 2: (0, 1, 2)}[type_]
            v = [y[i][None] for i in idx]
            return (ref.point_point(*v) if len(v) == 2 else ref.point_line(*v))[0]
        return ref.typed_distance(y, type_, kind == "edge_edge")

    flat = x.reshape(-1).clone()
    return f(flat), torch.autograd.functional.jacobian(f, flat), torch.autograd.functional.hessian(f, flat)


def _candidate_types(kind, x):
    """Feature types that are optimal (within rounding) for stencil x: one per side of a boundary."""
    if kind == "point_point":
        return [0]
    n = {"point_edge": 3, "point_triangle": 7, "edge_edge": 9}[kind]
    vals = []
    for t in range(n):
        try:
            d = _reference_derivatives(x, kind, t)[0]
        except Exception:
            continue
        if torch.isfinite(d):
            vals.append((float(d), t))
    true = float(_fns(kind)[0](*_split(x[None]))[0])
    return [t for d, t in vals if abs(d - true) <= 1e-9 * max(true, 1e-12)]


@pytest.mark.parametrize("kind", KINDS)
def test_matches_autograd_of_reference_closed_forms(kind):
    """Value, gradient and Hessian equal the autograd derivatives of the reference closed form of a
    feature type that attains the distance (at boundaries either side's type is valid)."""
    f, grad, hess = _fns(kind)
    xs = CASES[kind]()
    d, g, H = f(*_split(xs)), grad(*_split(xs)), hess(*_split(xs))
    for i in range(xs.shape[0]):
        ok = False
        for t in _candidate_types(kind, xs[i]):
            rd, rg, rH = _reference_derivatives(xs[i], kind, t)
            if (abs(float(d[i] - rd)) <= 1e-9 * max(float(rd), 1e-12) and _rel(g[i], rg) < 1e-7
                    and _rel(H[i], rH) < 1e-7):
                ok = True
                break
        assert ok, f"{kind} stencil {i}: no feature type reproduces the derivatives"


@pytest.mark.parametrize("kind", KINDS)
def test_matches_ipctk(kind):
    nv, stem = KINDS[kind]
    f, grad, hess = _fns(kind)
    x = torch.cat([_random(nv, n=200, seed=3), CASES[kind]()])
    d, g, H = f(*_split(x)), grad(*_split(x)), hess(*_split(x))
    for i in range(x.shape[0]):
        args = [x[i, k].numpy() for k in range(nv)]
        rd = getattr(ipctk, f"{stem}_distance")(*args)
        if kind == "edge_edge" and abs(float(d[i]) - rd) > 1e-9 * max(rd, 1e-300):
            # ipctk classifies some exactly-parallel inputs differently; the distance must still agree
            pytest.fail(f"distance mismatch at {i}: {float(d[i])} vs {rd}")
        assert abs(float(d[i]) - rd) <= 1e-9 * max(rd, 1e-300)
        if i < 200:  # generic inputs: same feature types, so derivatives agree exactly
            assert _rel(g[i], torch.from_numpy(getattr(ipctk, f"{stem}_distance_gradient")(*args))) < 1e-9
            assert _rel(H[i], torch.from_numpy(getattr(ipctk, f"{stem}_distance_hessian")(*args))) < 1e-9


def test_mollifier_matches_ipctk_and_finite_differences():
    g = torch.Generator().manual_seed(5)
    base = torch.tensor([[0, 0, 0], [1, 0, 0], [0, 0.1, 0.1], [1, 0.1, 0.1]], dtype=torch.float64)
    x = base + 0.02 * torch.randn(64, 4, 3, generator=g, dtype=torch.float64)
    eps = ipc.edge_edge_mollifier_threshold(*_split(base.expand(64, 4, 3).contiguous()))
    m = ipc.edge_edge_mollifier(*_split(x), eps)
    gm = ipc.edge_edge_mollifier_gradient(*_split(x), eps)
    Hm = ipc.edge_edge_mollifier_hessian(*_split(x), eps)
    assert bool((m < 1).any()) and bool((m == 1).any())
    for i in range(64):
        args = [x[i, k].numpy() for k in range(4)] + [float(eps[i])]
        assert abs(float(m[i]) - ipctk.edge_edge_mollifier(*args)) < 1e-12
        rg = torch.from_numpy(ipctk.edge_edge_mollifier_gradient(*args))
        rH = torch.from_numpy(ipctk.edge_edge_mollifier_hessian(*args))
        assert float((gm[i] - rg).abs().max()) <= 1e-9 * max(float(rg.abs().max()), 1.0)
        assert float((Hm[i] - rH).abs().max()) <= 1e-9 * max(float(rH.abs().max()), 1.0)
    fd = _fd_gradient(lambda y: ipc.edge_edge_mollifier(*_split(y), eps), x, h=1e-7)
    assert float((fd - gm).abs().max()) < 1e-5 * float(gm.abs().max())


@pytest.mark.parametrize("kind", KINDS)
def test_autograd_gradcheck_and_gradgradcheck(kind):
    f, _, _ = _fns(kind)
    x = _random(KINDS[kind][0], n=4, seed=7)
    inputs = [t.requires_grad_() for t in _split(x)]
    assert torch.autograd.gradcheck(f, inputs)
    assert torch.autograd.gradgradcheck(f, inputs)


@pytest.mark.parametrize("kind", KINDS)
def test_opcheck(kind):
    nv = KINDS[kind][0]
    args = _split(_random(nv, n=5, seed=9))
    for suffix in ("", "_gradient", "_hessian"):
        op = getattr(torch.ops.contactnet, f"ipc_{kind}_distance{suffix}")
        torch.library.opcheck(op, [a.clone().requires_grad_(suffix != "_hessian") for a in args])
    eps = torch.full((5,), 0.01, dtype=torch.float64)
    for suffix in ("", "_gradient", "_hessian"):
        op = getattr(torch.ops.contactnet, f"ipc_edge_edge_mollifier{suffix}")
        torch.library.opcheck(op, [*_split(_random(4, n=5, seed=9)), eps])


@pytest.mark.parametrize("kind", KINDS)
def test_float32_matches_float64(kind, device):
    f, grad, hess = _fns(kind)
    x = _random(KINDS[kind][0], n=32, seed=11)
    x64 = [t.to(device) for t in _split(x)]
    x32 = [t.float() for t in x64]
    for fn, tol in ((f, 1e-4), (grad, 1e-3), (hess, 1e-2)):
        a, b = fn(*x32).double(), fn(*x64)
        assert float((a - b).abs().max()) <= tol * float(b.abs().max())


def test_bad_input():
    p = torch.zeros(4, 3, dtype=torch.float64)
    with pytest.raises(ValueError, match="q"):
        ipc.point_point_distance_squared(p, torch.zeros(5, 3, dtype=torch.float64))
    with pytest.raises(ValueError, match="t1"):
        ipc.point_triangle_distance_squared(p, p, torch.zeros(4, 2, dtype=torch.float64), p)
    with pytest.raises(TypeError, match="e0"):
        ipc.point_edge_distance_squared(p, torch.zeros(4, 3, dtype=torch.int64), p)
    with pytest.raises(TypeError, match="float64"):
        ipc.point_point_distance_squared(p, p.float())
    with pytest.raises(ValueError, match="contiguous"):
        ipc.edge_edge_distance_squared(p, p, p, torch.zeros(3, 4, dtype=torch.float64).t())
    with pytest.raises(ValueError, match="eps_x"):
        ipc.edge_edge_mollifier(p, p, p, p, torch.zeros(3, dtype=torch.float64))


def test_empty_batch(device):
    e = torch.zeros(0, 3, device=device)
    assert ipc.point_triangle_distance_squared(e, e, e, e).shape == (0,)
    assert ipc.edge_edge_distance_squared_hessian(e, e, e, e).shape == (0, 12, 12)

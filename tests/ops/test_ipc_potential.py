"""Barrier potential: energy, per-vertex gradient, PSD-projected and assembled Hessian against
IPC Toolkit and the pure-torch reference; autograd to second order; bad input. (The chain rule to
body DOFs is tested in tests/sim/test_reference.py.)"""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from contactnet.ops import ipc
from contactnet.ops.reference import ipc as ref
from tests.ops import ipc_cases as cases

ipctk = pytest.importorskip("ipctk")


def _scene(n=10, seed=0):
    V, F, E, body, dhat = cases.stacked_sheets(n, seed=seed)
    return V, F, E, body, dhat, ipc.collision_candidates(V, F, E, dhat)


def _ipctk(V, F, E, dhat, kappa):
    Vn = V.numpy()
    mesh = ipctk.CollisionMesh(Vn, E.numpy().astype(np.int32), F.numpy().astype(np.int32))
    coll = ipctk.NormalCollisions()
    coll.build(mesh, Vn, dhat)
    return mesh, coll, ipctk.BarrierPotential(dhat, kappa)


def _rel(a, b):
    return float(np.abs(a - b).max() / np.abs(b).max())


@pytest.mark.parametrize("seed", [0, 1])
def test_matches_ipctk(seed):
    V, F, E, body, dhat, cand = _scene(10, seed)
    kappa = 37.0
    mesh, coll, B = _ipctk(V, F, E, dhat, kappa)
    Vn = V.numpy()
    assert len(coll.ee_collisions) > 0 and cand.count > 100
    e = float(ipc.barrier_potential(V, F, E, cand, dhat, kappa))
    assert abs(e - B(coll, mesh, Vn)) <= 1e-9 * abs(B(coll, mesh, Vn))
    g = ipc.barrier_potential_gradient(V, F, E, cand, dhat, kappa)
    assert _rel(g.numpy().reshape(-1), B.gradient(coll, mesh, Vn)) < 1e-9
    for project, method in ((False, ipctk.PSDProjectionMethod.NONE), (True, ipctk.PSDProjectionMethod.CLAMP)):
        H = ipc.barrier_potential_hessian(V, F, E, cand, dhat, kappa, project_to_psd=project)
        assert _rel(H.matrix.to_dense().numpy(), B.hessian(coll, mesh, Vn, method).toarray()) < 1e-9


def test_mollified_parallel_edges_match_ipctk():
    """Two nearly parallel edge pairs (angles 0 and 1e-4): the mollifier is active."""
    V = torch.tensor([[0, 0, 0], [1, 0, 0], [0.2, 0.01, 0.002], [1.2, 0.01, 0.002],
                      [3, 0, 0], [4, 0, 0], [3.1, 0.004, 0.0], [4.1, 0.004 + 1e-4, 0.0]], dtype=torch.float64)
    E = torch.tensor([[0, 1], [2, 3], [4, 5], [6, 7]])
    F = torch.zeros(0, 3, dtype=torch.int64)
    rest = V.clone()
    rest[3, 1] += 0.2  # rest shapes that are far from parallel: eps_x comes from here
    rest[7, 2] += 0.3
    dhat, kappa = 0.02, 5.0
    cand = ipc.collision_candidates(V, F, E, dhat)
    assert cand.edge_edge.shape[0] == 2
    Vn = V.numpy()
    mesh = ipctk.CollisionMesh(rest.numpy(), E.numpy().astype(np.int32), np.zeros((0, 3), np.int32))
    coll = ipctk.NormalCollisions()
    coll.build(mesh, Vn, dhat)
    B = ipctk.BarrierPotential(dhat, kappa)
    e = float(ipc.barrier_potential(V, F, E, cand, dhat, kappa, rest_vertices=rest))
    assert abs(e - B(coll, mesh, Vn)) <= 1e-9 * abs(B(coll, mesh, Vn))
    g = ipc.barrier_potential_gradient(V, F, E, cand, dhat, kappa, rest_vertices=rest)
    assert _rel(g.numpy().reshape(-1), B.gradient(coll, mesh, Vn)) < 1e-9
    H = ipc.barrier_potential_hessian(V, F, E, cand, dhat, kappa, rest_vertices=rest, project_to_psd=False)
    assert _rel(H.matrix.to_dense().numpy(), B.hessian(coll, mesh, Vn).toarray()) < 1e-9


@pytest.mark.parametrize("angle", [0.0, 1e-9, 1e-6, 1e-3, 1e-2])
def test_mollified_potential_is_differentiable_at_parallel_edges(angle):
    """The edge–edge distance has a kink at exactly parallel edges; m·b does not (m ~ |a×b|²), so
    central differences of the energy match the analytic gradient at and near parallel."""
    V = torch.tensor([[0, 0, 0], [1, 0, 0], [0.2, 0.01, 0.002], [1.2, 0.01 + angle, 0.002]], dtype=torch.float64)
    E = torch.tensor([[0, 1], [2, 3]])
    F = torch.zeros(0, 3, dtype=torch.int64)
    rest = V.clone()
    rest[3, 1] += 0.5
    cand = ipc.collision_candidates(V, F, E, 0.02)
    g = ipc.barrier_potential_gradient(V, F, E, cand, 0.02, 1.0, rest_vertices=rest)
    fd = torch.zeros_like(V)
    h = 1e-8
    for i in range(4):
        for c in range(3):
            d = torch.zeros_like(V)
            d[i, c] = h
            fd[i, c] = (ipc.barrier_potential(V + d, F, E, cand, 0.02, 1.0, rest_vertices=rest)
                        - ipc.barrier_potential(V - d, F, E, cand, 0.02, 1.0, rest_vertices=rest)) / (2 * h)
    assert float((g - fd).abs().max()) <= 1e-5 * float(fd.abs().max()) + 1e-12


def test_matches_reference_and_finite_differences():
    V, F, E, body, dhat, cand = _scene(4, seed=5)
    kappa = 2.0
    e = ipc.barrier_potential(V, F, E, cand, dhat, kappa)
    e_ref = ref.barrier_potential(V, F, E, cand.face_vertex, cand.edge_edge, dhat, kappa)
    assert abs(float(e - e_ref)) <= 1e-12 * abs(float(e_ref))
    # Gradient and (unprojected) Hessian against autograd of the reference.
    x = V.clone().requires_grad_()
    g_ref, = torch.autograd.grad(ref.barrier_potential(x, F, E, cand.face_vertex, cand.edge_edge, dhat, kappa), x)
    g = ipc.barrier_potential_gradient(V, F, E, cand, dhat, kappa)
    torch.testing.assert_close(g, g_ref, rtol=1e-10, atol=1e-10 * float(g_ref.abs().max()))
    H = ipc.barrier_potential_hessian(V, F, E, cand, dhat, kappa, project_to_psd=False).matrix.to_dense()
    # Hessian vs central differences of the analytic gradient (a few random directions).
    gen = torch.Generator().manual_seed(0)
    h = 1e-7
    for _ in range(3):
        d = torch.randn(V.shape, generator=gen, dtype=V.dtype)
        # Fixed rest positions: the mollifier thresholds must not move with the perturbation.
        fd = (ipc.barrier_potential_gradient(V + h * d, F, E, cand, dhat, kappa, rest_vertices=V)
              - ipc.barrier_potential_gradient(V - h * d, F, E, cand, dhat, kappa, rest_vertices=V)) / (2 * h)
        Hd = (H @ d.reshape(-1)).reshape(-1, 3)
        assert float((Hd - fd).abs().max()) <= 1e-5 * float(Hd.abs().max())


def test_projected_hessian_is_psd():
    V, F, E, body, dhat, cand = _scene(6, seed=2)
    H = ipc.barrier_potential_hessian(V, F, E, cand, dhat, 10.0)
    ev = torch.linalg.eigvalsh(H.local)
    assert float(ev.min()) >= -1e-12 * float(ev.abs().max())
    raw = ipc.barrier_potential_hessian(V, F, E, cand, dhat, 10.0, project_to_psd=False)
    assert float(torch.linalg.eigvalsh(raw.local).min()) < 0  # the projection did something
    # Projection is idempotent and keeps PSD blocks unchanged.
    twice = H.local.clone()
    for i in range(twice.shape[0]):
        twice[i] = torch.from_numpy(ipctk.project_to_psd(H.local[i].numpy()))
    torch.testing.assert_close(twice, H.local, rtol=0, atol=1e-9 * float(H.local.abs().max()))


def _interior_stencil(rng, edge_edge, gap):
    """Four vertices, unit-sized, whose closest points are interior: a point `gap` above a
    triangle's inside (p, t0, t1, t2), or two edges crossing `gap` apart (ea0, ea1, eb0, eb1)."""
    while True:
        if edge_edge:
            u, v = rng.normal(size=(2, 3))
            u, v = u / np.linalg.norm(u), v / np.linalg.norm(v)
            n = np.cross(u, v)
            if np.linalg.norm(n) < 0.3:  # far from parallel: the mollifier stays 1
                continue
            n /= np.linalg.norm(n)
            c = rng.normal(size=3)
            la, lb = rng.uniform(0.2, 1.0, size=(2, 2))
            return np.stack([c - la[0] * u, c + la[1] * u, c + gap * n - lb[0] * v, c + gap * n + lb[1] * v])
        t = rng.normal(size=(3, 3))
        n = np.cross(t[1] - t[0], t[2] - t[0])
        if np.linalg.norm(n) < 0.3 * max(np.sum((t - np.roll(t, 1, 0)) ** 2, 1)):  # not a sliver
            continue
        n /= np.linalg.norm(n)
        w = rng.dirichlet([2.0, 2.0, 2.0])
        return np.concatenate([(w @ t + gap * n)[None], t])


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10**6), edge_edge=st.booleans(), gap=st.floats(1e-4, 0.95),
       log_scale=st.integers(-3, 3), offset=st.sampled_from([0.0, 1.0, 1e3]))
def test_interior_projection_matches_ipctk(seed, edge_edge, gap, log_scale, offset):
    """Interior point–triangle and edge–edge blocks take the 5-dimensional projection
    (psd.h: project_to_psd_interior); it must equal IPC Toolkit's clamp of the same raw block,
    at tiny and huge sizes and far from the origin."""
    rng = np.random.default_rng(seed)
    scale = 10.0 ** log_scale
    V = torch.from_numpy(_interior_stencil(rng, edge_edge, gap) * scale + offset * scale)
    dhat, kappa = scale, 1.0 / scale ** 2
    if edge_edge:
        F, E = torch.zeros(0, 3, dtype=torch.int64), torch.tensor([[0, 1], [2, 3]])
        cand = ipc.Candidates(torch.zeros(0, 2, dtype=torch.int64), torch.tensor([[0, 1]]))
    else:
        F, E = torch.tensor([[1, 2, 3]]), torch.zeros(0, 2, dtype=torch.int64)
        cand = ipc.Candidates(torch.tensor([[0, 0]]), torch.zeros(0, 2, dtype=torch.int64))
    raw = ipc.barrier_potential_hessian(V, F, E, cand, dhat, kappa, project_to_psd=False, assemble=False).local[0]
    H = ipc.barrier_potential_hessian(V, F, E, cand, dhat, kappa, assemble=False).local[0]
    assert float(raw.abs().max()) > 0
    clamp = torch.from_numpy(ipctk.project_to_psd(raw.numpy()))
    torch.testing.assert_close(H, clamp, rtol=0, atol=1e-9 * float(clamp.abs().max()))
    # float32 takes the same path (or the general one where rounding hides the structure): against
    # the clamp of its own raw block (near contact a float32 raw block is itself off by ~1e-3).
    V32 = V.float()
    raw = ipc.barrier_potential_hessian(V32, F, E, cand, dhat, kappa, project_to_psd=False, assemble=False).local[0]
    clamp = torch.from_numpy(ipctk.project_to_psd(raw.double().numpy()))
    H32 = ipc.barrier_potential_hessian(V32, F, E, cand, dhat, kappa, assemble=False).local[0]
    torch.testing.assert_close(H32.double(), clamp, rtol=0, atol=1e-4 * float(clamp.abs().max()))


def test_autograd_first_and_second_order():
    V, F, E, body, dhat, cand = _scene(3, seed=6)
    x = V.clone().requires_grad_()
    f = lambda y: ipc.barrier_potential(y, F, E, cand, dhat, 3.0, rest_vertices=V)  # noqa: E731
    assert torch.autograd.gradcheck(f, [x], eps=1e-7, atol=1e-6, rtol=1e-5)
    assert torch.autograd.gradgradcheck(f, [x], eps=1e-7, atol=1e-5, rtol=1e-4)
    e = f(x)
    g, = torch.autograd.grad(e, x, create_graph=True)
    torch.testing.assert_close(g.detach(), ipc.barrier_potential_gradient(V, F, E, cand, dhat, 3.0))


def test_opcheck():
    V, F, E, body, dhat, cand = _scene(2, seed=7)
    fv, ee = cand
    ops = torch.ops.contactnet
    args = (V.clone().requires_grad_(), V, F, E, fv, ee, dhat, 2.0)
    torch.library.opcheck(ops.ipc_barrier_potential, args)
    torch.library.opcheck(ops.ipc_barrier_potential_gradient, args)
    torch.library.opcheck(ops.ipc_barrier_potential_hessian, (V, V, F, E, fv, ee, dhat, 2.0, True))


def test_projected_blocks_equal_one_candidate_at_a_time():
    """The CPU op evaluates a point–edge / point–point feature shared by several candidates once
    and copies its block into each stencil; every block must equal the candidate's own."""
    V, F, E, body, dhat, cand = _scene(5, seed=11)
    H = ipc.barrier_potential_hessian(V, F, E, cand, dhat, 3.0, assemble=False).local
    support = (H.reshape(-1, 4, 3, 12).abs().sum((2, 3)) > 0).sum(1)
    assert int((support == 3).sum()) > 100 and int((support == 2).sum()) > 0  # shared features exist
    nfv = cand.face_vertex.shape[0]
    for i in range(cand.count):
        one = ipc.Candidates(cand.face_vertex[i:i + 1], cand.edge_edge[:0]) if i < nfv else \
            ipc.Candidates(cand.face_vertex[:0], cand.edge_edge[i - nfv:i - nfv + 1])
        Hi = ipc.barrier_potential_hessian(V, F, E, one, dhat, 3.0, assemble=False).local[0]
        torch.testing.assert_close(H[i], Hi, rtol=1e-12, atol=1e-12 * float(Hi.abs().max()))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_assemble_hessian_is_the_coalesced_sum(dtype, device):
    """Random blocks on random stencils (repeated vertices within a stencil and unused vertices
    included) against a dense scatter-add; the result must be a valid coalesced COO tensor."""
    g = torch.Generator().manual_seed(3)
    n, nv = 200, 40
    local = torch.randn((n, 12, 12), generator=g, dtype=dtype)
    stencils = torch.randint(0, nv - 5, (n, 4), generator=g)
    stencils[::7, 2] = stencils[::7, 0]
    dofs = (3 * stencils[:, :, None] + torch.arange(3)).reshape(n, 12)
    dense = torch.zeros(3 * nv, 3 * nv, dtype=torch.float64)
    dense.index_put_((dofs[:, :, None].expand(n, 12, 12), dofs[:, None, :].expand(n, 12, 12)),
                     local.double(), accumulate=True)
    M = ipc.assemble_hessian(local.to(device), stencils.to(device), nv)
    assert M.is_coalesced() and M.shape == (3 * nv, 3 * nv) and M.dtype == dtype
    C = M.cpu()
    again = torch.sparse_coo_tensor(C.indices(), C.values(), C.shape, check_invariants=True).coalesce()
    torch.testing.assert_close(C.indices(), again.indices())
    tol = 1e-12 if dtype == torch.float64 else 1e-4
    torch.testing.assert_close(C.to_dense().double(), dense, rtol=tol, atol=tol)
    empty = ipc.assemble_hessian(local[:0].to(device), stencils[:0].to(device), nv)
    assert empty.is_coalesced() and empty.values().numel() == 0


def test_assemble_hessian_opcheck():
    g = torch.Generator().manual_seed(4)
    local = torch.randn((30, 12, 12), generator=g, dtype=torch.float64)
    stencils = torch.randint(0, 20, (30, 4), generator=g)
    torch.library.opcheck(torch.ops.contactnet.ipc_assemble_hessian, (local, stencils, 20))


def test_float32_close_to_float64(device):
    V, F, E, body, dhat, cand = _scene(4, seed=8)
    d = lambda t: t.to(device)  # noqa: E731
    c = ipc.Candidates(d(cand.face_vertex), d(cand.edge_edge))
    e64 = ipc.barrier_potential(d(V), d(F), d(E), c, dhat, 1.0)
    e32 = ipc.barrier_potential(d(V).float(), d(F), d(E), c, dhat, 1.0)
    assert abs(float(e32) - float(e64)) <= 1e-3 * abs(float(e64))


def test_intersecting_candidate_gives_infinite_energy():
    V = torch.tensor([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0.2, 0.2, 0.0]], dtype=torch.float64)
    F = torch.tensor([[0, 1, 2]])
    cand = ipc.Candidates(torch.tensor([[3, 0]]), torch.zeros(0, 2, dtype=torch.int64))
    assert torch.isposinf(ipc.barrier_potential(V, F, ipc.mesh_edges(F), cand, 0.1))


def test_bad_input():
    V, F, E, body, dhat, cand = _scene(2)
    with pytest.raises(ValueError, match="dhat"):
        ipc.barrier_potential(V, F, E, cand, 0.0)
    with pytest.raises(ValueError, match="kappa"):
        ipc.barrier_potential(V, F, E, cand, dhat, -1.0)
    with pytest.raises(ValueError, match="face_vertex"):
        ipc.barrier_potential(V, F, E, ipc.Candidates(cand.face_vertex + 10**6, cand.edge_edge), dhat)
    with pytest.raises(ValueError, match="edge_edge"):
        ipc.barrier_potential(V, F, E, ipc.Candidates(cand.face_vertex, cand.edge_edge[:, :1].contiguous()), dhat)
    with pytest.raises(ValueError, match="rest_vertices"):
        ipc.barrier_potential(V, F, E, cand, dhat, rest_vertices=V[:-1].contiguous())
    with pytest.raises(TypeError, match="candidates"):
        ipc.barrier_potential(V, F, E, cand.face_vertex, dhat)

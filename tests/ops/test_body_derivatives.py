"""The fused body-pair chain rule (ipc_body_pair_derivatives, and its summing form) against the dense torch chain rule
(contactnet.sim.reference.body_gradient_hessian, float64 to 1e-12 relative), autograd and finite differences of the
barrier energy in affine DOFs, padding, float32, bad input, opcheck."""

import pytest
import torch

from contactnet.ops import ipc
from contactnet.ops.ipc import body_pair_derivatives, body_pair_derivatives_sum
from contactnet.sim.reference import affine_jacobian, body_gradient_hessian
from tests.ops import ipc_cases


def _affine_scene(seed=9, shear=0.15):
    """Two stacked sheets as two affine bodies with strongly non-rigid A, within d̂ of each other."""
    V, F, E, body, dhat = ipc_cases.stacked_sheets(3, seed=seed)
    centers = torch.stack([V[body == b].mean(0) for b in range(2)])
    gen = torch.Generator().manual_seed(seed)
    A = torch.eye(3, dtype=V.dtype) + shear * torch.randn(2, 3, 3, generator=gen, dtype=V.dtype)
    # rest positions such that x(q) = V: x0 = A⁻¹ (V − p)
    x0 = torch.einsum("vij,vj->vi", torch.linalg.inv(A)[body], V - centers[body])
    q = torch.cat([centers, A.reshape(2, 9)], dim=1)  # (p, a1, a2, a3)
    return F, E, body, dhat, x0, q


def _positions(q, x0, body):
    p, A = q[:, :3], q[:, 3:].reshape(-1, 3, 3)
    return torch.einsum("vij,vj->vi", A[body], x0) + p[body]


def _local(q, x0, body, F, E, dhat, cand, kappa=3.0, project=False, mollifier_rest=None):
    """Per-candidate barrier derivatives at x(q); mollifier thresholds from mollifier_rest (default x(q))."""
    V = _positions(q, x0, body)
    g = ipc.barrier_potential_gradient(V, F, E, cand, dhat, kappa, mollifier_rest, per_candidate=True)
    H = ipc.barrier_potential_hessian(V, F, E, cand, dhat, kappa, mollifier_rest, project_to_psd=project,
                                      assemble=False)
    is_fv = torch.arange(g.shape[0]) < cand.face_vertex.shape[0]
    return g, H.local, H.stencils, is_fv


def _assemble(out, stencils, body, num_bodies=2):
    """Sum per-candidate body-pair derivatives into the (B·12,) gradient and (B·12, B·12) Hessian."""
    pair = body[stencils[:, [0, 3]]]  # (N, 2)
    g = torch.zeros(num_bodies, 12, dtype=out.gradient.dtype).index_add_(
        0, pair.reshape(-1), out.gradient.reshape(-1, 12))
    H = torch.zeros(num_bodies, num_bodies, 12, 12, dtype=out.hessian.dtype)
    H.index_put_((pair[:, :, None].expand(-1, 2, 2), pair[:, None, :].expand(-1, 2, 2)), out.hessian, accumulate=True)
    return g.reshape(-1), H.permute(0, 2, 1, 3).reshape(12 * num_bodies, 12 * num_bodies)


def test_equals_dense_chain_rule_float64():
    F, E, body, dhat, x0, q = _affine_scene()
    V = _positions(q, x0, body)
    cand = ipc.collision_candidates(V, F, E, dhat, vertex_body=body)
    assert cand.face_vertex.shape[0] > 0 and cand.edge_edge.shape[0] > 0
    g, H, st, is_fv = _local(q, x0, body, F, E, dhat, cand, project=True)
    out = body_pair_derivatives(g, H, st, is_fv, x0)
    dense = body_gradient_hessian(g, H, st, body, affine_jacobian(x0), 2)
    g_ours, H_ours = _assemble(out, st, body)
    torch.testing.assert_close(g_ours, dense.gradient.reshape(-1), rtol=1e-12, atol=1e-12 * float(g_ours.abs().max()))
    H_ref = dense.matrix.to_dense()
    torch.testing.assert_close(H_ours, H_ref, rtol=1e-12, atol=1e-12 * float(H_ref.abs().max()))
    # per candidate too: the 48×48 stencil-DOF Hessian summed over each side's vertices
    n = st.shape[0]
    side = torch.where(is_fv[:, None], torch.tensor([0, 1, 1, 1]), torch.tensor([0, 0, 1, 1]))  # (N, 4)
    S = torch.nn.functional.one_hot(side, 2).to(H.dtype)  # (N, 4, 2)
    per = torch.einsum("nvs,nvkwl,nwt->nstkl", S, dense.local.reshape(n, 4, 12, 4, 12), S)
    torch.testing.assert_close(out.hessian, per, rtol=1e-12, atol=1e-12 * float(per.abs().max()))


def test_is_the_derivative_of_the_energy_in_affine_dofs():
    """Unprojected: gradient and Hessian of Σ_k κ m_k b(d_k²) as a function of both bodies' q,
    by autograd and by central differences of the op's own gradient."""
    F, E, body, dhat, x0, q = _affine_scene(seed=4)
    V = _positions(q, x0, body)
    cand = ipc.collision_candidates(V, F, E, dhat, vertex_body=body)
    kappa = 3.0

    def energy(flat_q):
        return ipc.barrier_potential(_positions(flat_q.reshape(2, 12), x0, body), F, E, cand, dhat, kappa,
                                     rest_vertices=V)

    def fused(flat_q):
        qq = flat_q.reshape(2, 12)
        g, H, st, is_fv = _local(qq, x0, body, F, E, dhat, cand, kappa, mollifier_rest=V)
        return _assemble(body_pair_derivatives(g, H, st, is_fv, x0), st, body)

    flat = q.reshape(-1).clone()
    g, H = fused(flat)
    g_ref = torch.autograd.functional.jacobian(energy, flat)
    H_ref = torch.autograd.functional.hessian(energy, flat)
    torch.testing.assert_close(g, g_ref, rtol=1e-9, atol=1e-9 * float(g_ref.abs().max()))
    torch.testing.assert_close(H, H_ref, rtol=1e-8, atol=1e-8 * float(H_ref.abs().max()))
    eps = 1e-7
    fd_g = torch.stack([(energy(flat + eps * e) - energy(flat - eps * e)) / (2 * eps) for e in torch.eye(24, dtype=flat.dtype)])
    fd_H = torch.stack([(fused(flat + eps * e)[0] - fused(flat - eps * e)[0]) / (2 * eps) for e in torch.eye(24, dtype=flat.dtype)])
    torch.testing.assert_close(g, fd_g, rtol=1e-5, atol=1e-5 * float(g.abs().max()))
    torch.testing.assert_close(H, fd_H, rtol=1e-5, atol=1e-5 * float(H.abs().max()))


def test_padding_rows_give_zeros_and_float32_matches():
    F, E, body, dhat, x0, q = _affine_scene()
    V = _positions(q, x0, body)
    cand = ipc.collision_candidates(V, F, E, dhat, vertex_body=body)
    g, H, st, is_fv = _local(q, x0, body, F, E, dhat, cand)
    pad = 3
    out = body_pair_derivatives(torch.cat([g, torch.randn(pad, 12, dtype=g.dtype)]),
                                torch.cat([H, torch.randn(pad, 12, 12, dtype=H.dtype)]),
                                torch.cat([st, torch.full((pad, 4), -1)]), torch.cat([is_fv, torch.zeros(pad, dtype=torch.bool)]), x0)
    assert not out.gradient[-pad:].any() and not out.hessian[-pad:].any()
    full = body_pair_derivatives(g, H, st, is_fv, x0)
    assert torch.equal(out.gradient[:-pad], full.gradient) and torch.equal(out.hessian[:-pad], full.hessian)
    f32 = body_pair_derivatives(g.float(), H.float(), st, is_fv, x0.float())
    assert f32.hessian.dtype == torch.float32
    torch.testing.assert_close(f32.hessian.double(), full.hessian, rtol=1e-4, atol=1e-5 * float(full.hessian.abs().max()))


def test_empty_input():
    x0 = torch.zeros(4, 3, dtype=torch.float64)
    out = body_pair_derivatives(torch.zeros(0, 12, dtype=torch.float64), torch.zeros(0, 12, 12, dtype=torch.float64),
                                torch.zeros(0, 4, dtype=torch.int64), torch.zeros(0, dtype=torch.bool), x0)
    assert out.gradient.shape == (0, 2, 12) and out.hessian.shape == (0, 2, 2, 12, 12)


def _args(n=5, v=8):
    torch.manual_seed(0)
    return (torch.randn(n, 12, dtype=torch.float64), torch.randn(n, 12, 12, dtype=torch.float64),
            torch.randint(0, v, (n, 4)), torch.rand(n) < 0.5, torch.randn(v, 3, dtype=torch.float64))


@pytest.mark.parametrize("index, bad, err, match", [
    (0, torch.randn(5, 9, dtype=torch.float64), ValueError, "local_gradient"),
    (1, torch.randn(5, 12, 12, dtype=torch.float32), TypeError, "local_hessian"),
    (1, torch.randn(5, 12, 12, dtype=torch.float64).transpose(1, 2), ValueError, "local_hessian"),
    (4, torch.randn(8, 3, dtype=torch.float32), TypeError, "rest_vertices"),
    (2, torch.full((5, 4), 8), ValueError, "stencils"),
    (2, torch.zeros(5, 4, dtype=torch.float64), TypeError, "stencils"),
    (3, torch.zeros(5, dtype=torch.int64), TypeError, "is_face_vertex"),
    (3, torch.zeros(4, dtype=torch.bool), ValueError, "is_face_vertex"),
    (4, torch.randn(8, 2, dtype=torch.float64), ValueError, "rest_vertices"),
])
def test_bad_input_raises_clear_errors(index, bad, err, match):
    args = list(_args())
    args[index] = bad
    with pytest.raises(err, match=match):
        body_pair_derivatives(*args)


def test_opcheck():
    torch.library.opcheck(torch.ops.contactnet.ipc_body_pair_derivatives, _args())


def _sum_args(num_bodies=3, pad=2):
    F, E, body, dhat, x0, q = _affine_scene()
    V = _positions(q, x0, body)
    cand = ipc.collision_candidates(V, F, E, dhat, vertex_body=body)
    g, H, st, is_fv = _local(q, x0, body, F, E, dhat, cand, project=True)
    torch.manual_seed(3)
    n = st.shape[0] + pad
    g = torch.cat([g, torch.randn(pad, 12, dtype=g.dtype)])
    H = torch.cat([H, torch.randn(pad, 12, 12, dtype=H.dtype)])
    st = torch.cat([st, torch.full((pad, 4), -1)])
    is_fv = torch.cat([is_fv, torch.ones(pad, dtype=torch.bool)])
    rows = torch.randint(0, num_bodies, (n, 2))  # arbitrary rows: repeated ones must add up
    blocks = torch.randint(0, num_bodies ** 2, (n, 2, 2))
    return g, H, st, is_fv, x0, rows, blocks, num_bodies, num_bodies ** 2


def test_sum_equals_index_add_of_the_per_candidate_blocks_bitwise():
    g, H, st, is_fv, x0, rows, blocks, nb, nk = _sum_args()
    per = body_pair_derivatives(g, H, st, is_fv, x0)
    ok = st[:, 0] >= 0  # padding rows add nothing
    ref_g = torch.zeros(nb, 12, dtype=g.dtype).index_add_(0, rows[ok].reshape(-1), per.gradient[ok].reshape(-1, 12))
    ref_h = torch.zeros(nk, 12, 12, dtype=g.dtype).index_add_(0, blocks[ok].reshape(-1),
                                                               per.hessian[ok].reshape(-1, 12, 12))
    out = body_pair_derivatives_sum(g, H, st, is_fv, x0, rows, blocks, nb, nk)
    assert torch.equal(out.gradient, ref_g) and torch.equal(out.hessian, ref_h)
    assert ref_h.abs().max() > 0


def test_sum_bad_input_raises_clear_errors():
    g, H, st, is_fv, x0, rows, blocks, nb, nk = _sum_args()
    with pytest.raises(ValueError, match="block_index"):
        body_pair_derivatives_sum(g, H, st, is_fv, x0, rows, blocks, nb, nk - 1)
    with pytest.raises(ValueError, match="body_index"):
        body_pair_derivatives_sum(g, H, st, is_fv, x0, rows[:-1], blocks, nb, nk)
    with pytest.raises(TypeError, match="body_index"):
        body_pair_derivatives_sum(g, H, st, is_fv, x0, rows.double(), blocks, nb, nk)
    with pytest.raises(ValueError, match="num_bodies"):
        body_pair_derivatives_sum(g, H, st, is_fv, x0, rows, blocks, -1, nk)


def test_sum_opcheck():
    torch.library.opcheck(torch.ops.contactnet.ipc_body_pair_derivatives_sum, _sum_args())

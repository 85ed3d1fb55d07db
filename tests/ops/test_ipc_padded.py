"""Fixed-capacity broad phases (`collision_candidates_padded`, `swept_candidates_padded`), their
narrow phase (`prune_candidates_padded`) and the -1 padding rows every IPC op accepts: same pairs
as the variable-size search, counts that expose an overflow, masks, and zero contribution (no
impact for CCD) from padding."""

import pytest
import torch

from contactnet.ops import ipc
from tests.ops import ipc_cases as cases


def _sets(c: ipc.Candidates):
    fv, ee = c
    return ({tuple(r) for r in fv[fv[:, 0] >= 0].tolist()}, {tuple(r) for r in ee[ee[:, 0] >= 0].tolist()})


def _padding_is_minus_one_after_the_pairs(p: ipc.PaddedCandidates):
    for rows, n in zip(p.candidates, p.counts.tolist()):
        assert (rows[: min(n, rows.shape[0])] >= 0).all() and (rows[n:] == -1).all()


@pytest.mark.parametrize("seed", [0, 1])
def test_padded_matches_the_variable_size_search(seed, device):
    V, F, E = (t.to(device) for t in cases.random_triangle_soup(30, seed=seed))
    want = ipc.collision_candidates(V, F, E, 0.08)
    got = ipc.collision_candidates_padded(V, F, E, 0.08, capacity=want.count + 5)
    assert _sets(got.candidates) == _sets(want)
    assert got.counts.tolist() == [want.face_vertex.shape[0], want.edge_edge.shape[0]]
    assert not bool(got.overflow)
    _padding_is_minus_one_after_the_pairs(got)
    V1 = V + 0.05 * torch.randn(V.shape, generator=torch.Generator().manual_seed(seed), dtype=V.dtype).to(device)
    want = ipc.swept_candidates(V, V1, F, E, 0.01)
    got = ipc.swept_candidates_padded(V, V1, F, E, want.count, 0.01)
    assert _sets(got.candidates) == _sets(want)


def test_vertex_body_and_masks():
    V, F, E, body, dhat = cases.stacked_sheets(4, seed=2)
    want = ipc.collision_candidates(V, F, E, 1.5 * dhat, vertex_body=body)
    got = ipc.collision_candidates_padded(V, F, E, 1.5 * dhat, 4 * want.count, vertex_body=body)
    assert _sets(got.candidates) == _sets(want)
    # Masked-out primitives take part in no pair; the rest are unchanged.
    g = torch.Generator().manual_seed(0)
    vm, fm, em = (torch.rand(n, generator=g) < 0.6 for n in (V.shape[0], F.shape[0], E.shape[0]))
    masked = ipc.collision_candidates_padded(V, F, E, 1.5 * dhat, 4 * want.count, vertex_body=body,
                                             vertex_active=vm, face_active=fm, edge_active=em)
    fv, ee = _sets(want)
    assert _sets(masked.candidates) == ({(v, f) for v, f in fv if vm[v] and fm[f]},
                                        {(a, b) for a, b in ee if em[a] and em[b]})


def test_overflow_is_counted_and_the_kept_pairs_are_real():
    V, F, E = cases.random_triangle_soup(30, seed=0)
    want = ipc.collision_candidates(V, F, E, 0.08)
    got = ipc.collision_candidates_padded(V, F, E, 0.08, capacity=5)
    assert got.candidates.face_vertex.shape == (5, 2) and got.candidates.edge_edge.shape == (5, 2)
    assert got.counts.tolist() == [want.face_vertex.shape[0], want.edge_edge.shape[0]] and bool(got.overflow)
    fv, ee = _sets(got.candidates)
    assert len(fv) == 5 and fv <= _sets(want)[0] and ee <= _sets(want)[1]
    empty = ipc.collision_candidates_padded(V, F, E, 0.08, capacity=0)
    assert empty.candidates.count == 0 and bool(empty.overflow)


def test_padding_rows_contribute_nothing(device):
    V, F, E = (t.to(device) for t in cases.random_triangle_soup(30, seed=3))
    dhat = 0.08
    c = ipc.collision_candidates(V, F, E, dhat)
    pad = torch.full((7, 2), -1, dtype=torch.int64, device=device)
    p = ipc.Candidates(torch.cat([c.face_vertex, pad]), torch.cat([c.edge_edge, pad]))
    nfv = c.face_vertex.shape[0]
    real = torch.ones(p.count, dtype=torch.bool, device=device)
    real[nfv: nfv + 7] = False
    real[-7:] = False
    for fn in (ipc.barrier_potential, ipc.barrier_potential_gradient):
        full = fn(V, F, E, p, dhat, per_candidate=True)
        torch.testing.assert_close(full[real], fn(V, F, E, c, dhat, per_candidate=True))
        assert (full[~real] == 0).all()
    h = ipc.barrier_potential_hessian(V, F, E, p, dhat, assemble=False).local
    assert (h[~real] == 0).all()
    vel = 0.01 * torch.ones_like(V)
    for fn in (ipc.friction_potential, ipc.friction_potential_gradient):
        full = fn(vel, V, F, E, p, dhat, 1.0, 0.5, 1e-3, per_candidate=True)
        torch.testing.assert_close(full[real], fn(vel, V, F, E, c, dhat, 1.0, 0.5, 1e-3, per_candidate=True))
        assert (full[~real] == 0).all()
    h = ipc.friction_potential_hessian(vel, V, F, E, p, dhat, 1.0, 0.5, 1e-3, assemble=False).local
    assert (h[~real] == 0).all()
    toi = ipc.ccd_time_of_impact(V, V + 0.1, F, E, p, tmax=0.7)
    torch.testing.assert_close(toi[real], ipc.ccd_time_of_impact(V, V + 0.1, F, E, c, tmax=0.7))
    assert (toi[~real] == 0.7).all()
    torch.testing.assert_close(ipc.barrier_potential(V, F, E, p, dhat), ipc.barrier_potential(V, F, E, c, dhat))


def test_collision_free_steps_take_each_environments_smallest_time_of_impact(device):
    """`collision_free_steps`: per environment, the smallest time of impact of its candidates (of
    its first stencil vertex), 1 without any, padding ignored; exact (a min), the same in the
    device form (one pass, no per-candidate times) on the CPU; bad arguments named."""
    V, F, E = (t.to(device) for t in cases.random_triangle_soup(40, seed=4))
    g = torch.Generator().manual_seed(5)
    V1 = V + (0.15 * torch.randn(V.shape, generator=g, dtype=V.dtype)).to(device)
    vertex_env = (torch.arange(V.shape[0], device=device) >= V.shape[0] // 2) * 2  # envs 0 and 2 of 4
    c = ipc.swept_candidates(V, V1, F, E, 0.0)
    pad = torch.full((9, 2), -1, dtype=torch.int64, device=device)
    padded = ipc.Candidates(torch.cat([c.face_vertex, pad]), torch.cat([pad, c.edge_edge]))
    toi = ipc.ccd_time_of_impact(V, V1, F, E, c)
    env = vertex_env[ipc.candidate_stencils(F, E, c)[:, 0]]
    want = torch.ones(4, dtype=V.dtype, device=device).scatter_reduce(0, env, toi, "amin")
    assert float(want[0]) < 1 and float(want[2]) < 1 and want[1] == 1 and want[3] == 1
    for cand in (c, padded):
        assert torch.equal(ipc.collision_free_steps(V, V1, F, E, cand, vertex_env, 4), want)
        if device == "cpu":
            got = torch.ops.contactnet._ipc_collision_free_steps_device_form(V, V1, F, E, *cand, vertex_env, 4, 0.0,
                                                                             0.9, 1_000_000)
            assert torch.equal(got, want)
    assert torch.equal(ipc.collision_free_steps(V, V1, F, E, ipc.Candidates(pad, pad), vertex_env, 4),
                       torch.ones_like(want))
    with pytest.raises(ValueError, match="num_envs"):
        ipc.collision_free_steps(V, V1, F, E, c, vertex_env, 0)
    with pytest.raises(ValueError, match="vertex_env"):
        ipc.collision_free_steps(V, V1, F, E, c, vertex_env, 2)
    with pytest.raises(ValueError, match="vertex_env"):
        ipc.collision_free_steps(V, V1, F, E, c, vertex_env[1:], 4)
    with pytest.raises(ValueError, match="conservative_rescaling"):
        ipc.collision_free_steps(V, V1, F, E, c, vertex_env, 4, conservative_rescaling=2.0)


@pytest.mark.parametrize("swept", [True, False])
def test_pruning_keeps_the_list_shape(swept, device):
    """`prune_candidates_padded`: the rows `prune_candidates` keeps, in order, at the front of
    `capacity` rows (-1 after them), padding rows of the input dropped, the counts kept, and an
    overflow flag when the capacity is short (the first `capacity` kept rows survive)."""
    V, F, E = cases.random_triangle_soup(60, seed=5)
    V1 = V + 0.03 * torch.randn(V.shape, generator=torch.Generator().manual_seed(5), dtype=V.dtype)
    broad = ipc.swept_candidates(V, V1, F, E, 0.04)
    pad = torch.full((3, 2), -1, dtype=torch.int64)
    padded = ipc.Candidates(torch.cat([pad, broad.face_vertex, pad]), torch.cat([broad.edge_edge[:5], pad,
                                                                                   broad.edge_edge[5:]]))
    v1 = V1 if swept else None
    want = ipc.prune_candidates(V, F, E, broad, 0.04, vertices_t1=v1)
    assert 0 < want.count < broad.count
    V, F, E, V1 = (t.to(device) for t in (V, F, E, V1))
    padded = ipc.Candidates(*(t.to(device) for t in padded))
    v1 = V1 if swept else None
    counts = [want.face_vertex.shape[0], want.edge_edge.shape[0]]
    for capacity in (max(counts), max(counts) + 9, min(counts) - 1, 0):
        got = ipc.prune_candidates_padded(V, F, E, padded, 0.04, capacity, vertices_t1=v1)
        assert got.counts.tolist() == counts
        assert bool(got.overflow) == (capacity < max(counts))
        for rows, kept in zip(got.candidates, want):
            assert rows.shape == (capacity, 2)
            n = min(capacity, kept.shape[0])
            assert torch.equal(rows[:n].cpu(), kept[:n]) and bool((rows[n:] == -1).all())


def test_bad_input():
    V, F, E = cases.random_triangle_soup(3)
    with pytest.raises(ValueError, match="capacity"):
        ipc.collision_candidates_padded(V, F, E, 0.1, -1)
    with pytest.raises(ValueError, match="capacity"):
        ipc.swept_candidates_padded(V, V, F, E, 2.5)
    with pytest.raises(ValueError, match="capacity"):
        ipc.prune_candidates_padded(V, F, E, ipc.collision_candidates(V, F, E, 0.1), 0.1, -1)
    with pytest.raises(ValueError, match="vertices_t1"):
        ipc.prune_candidates_padded(V, F, E, ipc.collision_candidates(V, F, E, 0.1), 0.1, 4, vertices_t1=V[:-1])
    with pytest.raises(ValueError, match="face_active"):
        ipc.collision_candidates_padded(V, F, E, 0.1, 4, face_active=torch.ones(F.shape[0] + 1, dtype=torch.bool))
    with pytest.raises(TypeError, match="edge_active"):
        ipc.collision_candidates_padded(V, F, E, 0.1, 4, edge_active=torch.ones(E.shape[0]))
    with pytest.raises(ValueError, match="padding row"):
        ipc.barrier_potential(V, F, E, ipc.Candidates(torch.tensor([[-1, 0]]), E[:0]), 0.1)
    with pytest.raises(ValueError, match="candidates.edge_edge"):
        ipc.barrier_potential(V, F, E, ipc.Candidates(F[:0, :2].contiguous(), torch.tensor([[-2, -2]])), 0.1)


def test_trusted_indices_skips_only_value_checks():
    V, F, E = cases.random_triangle_soup(3)
    with ipc.trusted_indices():
        ipc.collision_candidates_padded(V, F, E, 0.1, 4)
        with pytest.raises(TypeError, match="faces"):
            ipc.collision_candidates_padded(V, F.double(), E, 0.1, 4)
    with pytest.raises(ValueError, match="faces"):
        ipc.collision_candidates_padded(V, F + 100, E, 0.1, 4)


def test_opcheck():
    V, F, E, body, dhat = cases.stacked_sheets(2, seed=1)
    mask = torch.ones(V.shape[0], dtype=torch.bool)
    torch.library.opcheck(torch.ops.contactnet.ipc_collision_candidates_padded, (V, F, E, body, 0.2, 16))
    torch.library.opcheck(torch.ops.contactnet.ipc_collision_candidates_padded, (V, F, E, None, 0.2, 16, mask))
    torch.library.opcheck(torch.ops.contactnet.ipc_swept_candidates_padded, (V, V + 0.1, F, E, None, 0.01, 8))
    fv, ee = ipc.swept_candidates(V, V + 0.1, F, E, 0.01)
    torch.library.opcheck(torch.ops.contactnet.ipc_prune_candidates_padded, (V, V + 0.1, F, E, fv, ee, 0.01, 8))
    torch.library.opcheck(torch.ops.contactnet.ipc_prune_candidates_padded, (V, None, F, E, fv, ee, 0.2, 8))
    torch.library.opcheck(torch.ops.contactnet.ipc_collision_free_steps,
                          (V, V + 0.1, F, E, fv, ee, torch.zeros(V.shape[0], dtype=torch.int64), 1, 0.0, 0.9, 1000))

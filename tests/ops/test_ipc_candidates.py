"""Collision candidates: the sort-and-sweep broad phase + exact filter against brute force and IPC
Toolkit, compared as sets."""

import numpy as np
import pytest
import torch

from contactnet.ops import ipc
from contactnet.ops.reference import ipc as ref

ipctk = pytest.importorskip("ipctk")


def _sets(c):
    return {tuple(r) for r in c.face_vertex.tolist()}, {tuple(r) for r in c.edge_edge.tolist()}


@pytest.mark.parametrize("seed", [0, 1])
def test_soup_matches_brute_force(seed, device):
    V, F, E = ref.random_triangle_soup(30, seed=seed)
    dhat = 0.08
    got = _sets(ipc.collision_candidates(V.to(device), F.to(device), E.to(device), dhat))
    want = ref.brute_force_candidates(V, F, E, dhat)
    assert got == want
    assert len(want[0]) > 10 and len(want[1]) > 10


def test_vertex_body_excludes_within_body_pairs():
    V, F, E, body, dhat = ref.stacked_sheets(4, seed=2)
    c_all = _sets(ipc.collision_candidates(V, F, E, 1.5 * dhat))
    c_body = _sets(ipc.collision_candidates(V, F, E, 1.5 * dhat, vertex_body=body))
    want = ref.brute_force_candidates(V, F, E, 1.5 * dhat, vertex_body=body)
    assert c_body == want
    assert c_body[0] < c_all[0] and c_body[1] < c_all[1]  # within-sheet pairs exist at 1.5 dhat


def _ipctk_candidates(V, F, E, dhat):
    mesh = ipctk.CollisionMesh(V.numpy(), E.numpy().astype(np.int32), F.numpy().astype(np.int32))
    cand = ipctk.Candidates()
    cand.build(mesh, V.numpy(), dhat / 2)
    fv, ee = set(), set()
    Vn = V.numpy()
    for c in cand.fv_candidates:
        f = F[c.face_id].tolist()
        if ipctk.point_triangle_distance(Vn[c.vertex_id], *Vn[f]) < dhat**2:
            fv.add((c.vertex_id, c.face_id))
    for c in cand.ee_candidates:
        a, b = sorted((c.edge0_id, c.edge1_id))
        if ipctk.edge_edge_distance(*Vn[E[a].tolist()], *Vn[E[b].tolist()]) < dhat**2:
            ee.add((a, b))
    return fv, ee


def test_sheets_match_ipctk():
    V, F, E, body, dhat = ref.stacked_sheets(12, seed=3)
    got = _sets(ipc.collision_candidates(V, F, E, dhat))
    want = _ipctk_candidates(V, F, E, dhat)
    assert got == want
    assert len(got[0]) > 200 and len(got[1]) > 200


def test_edge_cases(device):
    V = torch.rand(5, 3, dtype=torch.float64, device=device)
    empty_f = torch.zeros(0, 3, dtype=torch.int64, device=device)
    empty_e = torch.zeros(0, 2, dtype=torch.int64, device=device)
    c = ipc.collision_candidates(V, empty_f, empty_e, 0.1)
    assert c.face_vertex.shape == (0, 2) and c.edge_edge.shape == (0, 2) and c.count == 0
    # One triangle and its own vertices: adjacent pairs are never candidates.
    F = torch.tensor([[0, 1, 2]], device=device)
    c = ipc.collision_candidates(V, F, ipc.mesh_edges(F), 10.0)
    assert {tuple(r) for r in c.face_vertex.tolist()} == {(3, 0), (4, 0)}
    assert c.edge_edge.shape == (0, 2)
    # No vertices at all.
    c = ipc.collision_candidates(torch.zeros(0, 3, device=device), empty_f, empty_e, 0.1)
    assert c.count == 0


def test_degenerate_triangle_matches_brute_force():
    V = torch.tensor([[0, 0, 0], [1, 0, 0], [2, 0, 0], [0.5, 0.05, 0.0], [1.5, -0.02, 0.01]], dtype=torch.float64)
    F = torch.tensor([[0, 1, 2]])
    E = torch.tensor([[0, 1], [1, 2], [0, 2], [3, 4]])
    got = _sets(ipc.collision_candidates(V, F, E, 0.1))
    assert got == ref.brute_force_candidates(V, F, E, 0.1)


def test_float32_same_set():
    V, F, E = ref.random_triangle_soup(40, seed=4)
    a = _sets(ipc.collision_candidates(V, F, E, 0.05))
    b = _sets(ipc.collision_candidates(V.float(), F, E, 0.05))
    # Pairs within float32 rounding of dhat may differ; require near-identity.
    assert len(a[0] ^ b[0]) <= 1 and len(a[1] ^ b[1]) <= 1


def test_swept_candidates_cover_moving_pairs():
    V, F, E = ref.random_triangle_soup(20, seed=5)
    V1 = V + 0.05 * torch.randn(V.shape, generator=torch.Generator().manual_seed(0), dtype=V.dtype)
    c = ipc.swept_candidates(V, V1, F, E, 0.0)
    fv, ee = _sets(c)
    # Brute force over swept boxes.
    lo = torch.minimum(V, V1)
    hi = torch.maximum(V, V1)
    def box(ids):
        return lo[ids].amin(0), hi[ids].amax(0)
    want_fv = set()
    for f, tri in enumerate(F.tolist()):
        bl, bh = box(tri)
        for p in range(V.shape[0]):
            if p not in tri and bool(((lo[p] <= bh) & (bl <= hi[p])).all()):
                want_fv.add((p, f))
    assert fv == want_fv


def test_bad_input():
    V, F, E = ref.random_triangle_soup(3)
    with pytest.raises(ValueError, match="dhat"):
        ipc.collision_candidates(V, F, E, 0.0)
    with pytest.raises(ValueError, match="dhat"):
        ipc.collision_candidates(V, F, E, -1.0)
    with pytest.raises(ValueError, match="faces"):
        ipc.collision_candidates(V, F + 100, E, 0.1)
    with pytest.raises(TypeError, match="faces"):
        ipc.collision_candidates(V, F.int(), E, 0.1)
    with pytest.raises(ValueError, match="edges"):
        ipc.collision_candidates(V, F, E[:, :1].contiguous(), 0.1)
    with pytest.raises(ValueError, match="vertex_body"):
        ipc.collision_candidates(V, F, E, 0.1, vertex_body=torch.zeros(2, dtype=torch.int64))
    with pytest.raises(ValueError, match="vertices"):
        ipc.collision_candidates(V[:, :2].contiguous(), F, E, 0.1)


def test_opcheck():
    V, F, E = ref.random_triangle_soup(6, seed=1)
    body = torch.arange(V.shape[0]) // 3
    torch.library.opcheck(torch.ops.contactnet.ipc_collision_candidates, (V, F, E, body, 0.2))
    torch.library.opcheck(torch.ops.contactnet.ipc_collision_candidates, (V, F, E, None, 0.2))
    torch.library.opcheck(torch.ops.contactnet.ipc_swept_candidates, (V, V + 0.1, F, E, None, 0.01))

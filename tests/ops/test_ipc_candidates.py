"""Collision candidates: the uniform-grid broad phase + exact filter against brute force and IPC
Toolkit, compared as sets."""

import numpy as np
import pytest
import torch

from contactnet.ops import ipc
from contactnet.ops.reference import ipc as ref
from tests.ops import ipc_cases as cases

ipctk = pytest.importorskip("ipctk")


def _sets(c):
    return {tuple(r) for r in c.face_vertex.tolist()}, {tuple(r) for r in c.edge_edge.tolist()}


@pytest.mark.parametrize("seed", [0, 1])
def test_soup_matches_brute_force(seed, device):
    V, F, E = cases.random_triangle_soup(30, seed=seed)
    dhat = 0.08
    got = _sets(ipc.collision_candidates(V.to(device), F.to(device), E.to(device), dhat))
    want = ref.brute_force_candidates(V, F, E, dhat)
    assert got == want
    assert len(want[0]) > 10 and len(want[1]) > 10


def test_vertex_body_excludes_within_body_pairs():
    V, F, E, body, dhat = cases.stacked_sheets(4, seed=2)
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
    V, F, E, body, dhat = cases.stacked_sheets(12, seed=3)
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
    V, F, E = cases.random_triangle_soup(40, seed=4)
    a = _sets(ipc.collision_candidates(V, F, E, 0.05))
    b = _sets(ipc.collision_candidates(V.float(), F, E, 0.05))
    # Pairs within float32 rounding of dhat may differ; require near-identity.
    assert len(a[0] ^ b[0]) <= 1 and len(a[1] ^ b[1]) <= 1


def test_swept_candidates_cover_moving_pairs():
    V, F, E = cases.random_triangle_soup(20, seed=5)
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


def _swept_box_pairs(V, V1, F, E, inflate):
    """Brute force: face–vertex and edge–edge pairs (sharing no vertex) whose boxes around both
    positions, grown by inflate, overlap."""
    lo, hi = torch.minimum(V, V1) - inflate, torch.maximum(V, V1) + inflate

    def boxes(prims):
        return lo[prims].amin(1), hi[prims].amax(1)

    def overlap(a_lo, a_hi, b_lo, b_hi):
        return ((a_lo[:, None] <= b_hi[None]) & (b_lo[None] <= a_hi[:, None])).all(-1)

    fl, fh = boxes(F)
    el, eh = boxes(E)
    fv = overlap(lo, hi, fl, fh) & ~(torch.arange(V.shape[0])[:, None, None] == F[None]).any(-1)
    ee = overlap(el, eh, el, eh) & ~(E[:, None, :, None] == E[None, :, None, :]).any(-1).any(-1)
    ee = torch.triu(ee, diagonal=1)
    return {tuple(r) for r in fv.nonzero().tolist()}, {tuple(r) for r in ee.nonzero().tolist()}


def test_grid_with_huge_boxes_matches_brute_force():
    """A ground quad much larger than the other triangles, and one body sweeping far: boxes that
    cover many grid cells (or force larger cells) lose no pair and report none twice."""
    V, F, E = cases.random_triangle_soup(40, seed=7, scale=0.05)
    ground = torch.tensor([[-3, -3, 0.1], [3, -3, 0.1], [3, 3, 0.1], [-3, 3, 0.1]], dtype=V.dtype)
    n = V.shape[0]
    V = torch.cat([V, ground])
    F = torch.cat([F, torch.tensor([[n, n + 1, n + 2], [n, n + 2, n + 3]])])
    E = ipc.mesh_edges(F)
    dhat = 0.05
    c = ipc.collision_candidates(V, F, E, dhat)
    assert _sets(c) == ref.brute_force_candidates(V, F, E, dhat)
    assert c.face_vertex.shape[0] == len(set(map(tuple, c.face_vertex.tolist())))
    V1 = V.clone()
    V1[:30] += torch.tensor([2.0, -1.0, 0.5], dtype=V.dtype)  # a long sweep for part of the soup
    c = ipc.swept_candidates(V, V1, F, E, 0.01)
    fv, ee = _sets(c)
    assert (fv, ee) == _swept_box_pairs(V, V1, F, E, 0.005)
    assert len(fv) == c.face_vertex.shape[0] and len(ee) == c.edge_edge.shape[0] > 0


def test_bad_input():
    V, F, E = cases.random_triangle_soup(3)
    with pytest.raises(ValueError, match="dhat"):
        ipc.collision_candidates(V, F, E, 0.0)
    with pytest.raises(ValueError, match="dhat"):
        ipc.collision_candidates(V, F, E, -1.0)
    with pytest.raises(ValueError, match="faces"):
        ipc.collision_candidates(V, F + 100, E, 0.1)
    with pytest.raises(TypeError, match="faces"):  # (integer dtypes are converted, floats are refused)
        ipc.collision_candidates(V, F.double(), E, 0.1)
    with pytest.raises(ValueError, match="edges"):
        ipc.collision_candidates(V, F, E[:, :1].contiguous(), 0.1)
    with pytest.raises(ValueError, match="vertex_body"):
        ipc.collision_candidates(V, F, E, 0.1, vertex_body=torch.zeros(2, dtype=torch.int64))
    with pytest.raises(ValueError, match="vertices"):
        ipc.collision_candidates(V[:, :2].contiguous(), F, E, 0.1)


def test_opcheck():
    V, F, E = cases.random_triangle_soup(6, seed=1)
    body = torch.arange(V.shape[0]) // 3
    torch.library.opcheck(torch.ops.contactnet.ipc_collision_candidates, (V, F, E, body, 0.2))
    torch.library.opcheck(torch.ops.contactnet.ipc_collision_candidates, (V, F, E, None, 0.2))
    torch.library.opcheck(torch.ops.contactnet.ipc_swept_candidates, (V, V + 0.1, F, E, None, 0.01))

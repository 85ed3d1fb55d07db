"""Conservative CCD: thousands of random point–triangle and edge–edge trajectories never step into
penetration (or below the minimum separation); agreement with IPC Toolkit's AdditiveCCD and its
collision-free step size; bad input."""

import numpy as np
import pytest
import torch

from contactnet.ops import ipc

ipctk = pytest.importorskip("ipctk")


def _trajectories(n, seed, edge_edge):
    """n independent 4-vertex primitives (as one mesh) aimed at each other."""
    g = torch.Generator().manual_seed(seed)
    x0 = torch.rand(n, 4, 3, generator=g, dtype=torch.float64) - 0.5
    # Separate the two halves of each stencil, then move them through each other.
    side = torch.tensor([1.0, -1.0, -1.0, -1.0] if not edge_edge else [1.0, 1.0, -1.0, -1.0], dtype=torch.float64)
    x0[:, :, 2] = 0.1 * x0[:, :, 2] + 0.3 * side
    dx = 0.3 * torch.randn(n, 4, 3, generator=g, dtype=torch.float64)
    dx[:, :, 2] -= 0.7 * side
    x1 = x0 + dx
    ids = torch.arange(4 * n).reshape(n, 4)
    if edge_edge:
        F = torch.zeros(0, 3, dtype=torch.int64)
        E = ids.reshape(-1, 2).contiguous()
        cand = ipc.Candidates(torch.zeros(0, 2, dtype=torch.int64), torch.stack([2 * torch.arange(n), 2 * torch.arange(n) + 1], 1))
    else:
        F = ids[:, 1:].contiguous()
        E = torch.zeros(0, 2, dtype=torch.int64)
        cand = ipc.Candidates(torch.stack([ids[:, 0], torch.arange(n)], 1), torch.zeros(0, 2, dtype=torch.int64))
    return x0.reshape(-1, 3).contiguous(), x1.reshape(-1, 3).contiguous(), F, E, cand


def _min_distance_along(x0, x1, F, E, cand, toi, samples=64):
    """Smallest squared distance of each candidate on t in [0, toi] (dense samples + the end)."""
    dist = ipc.edge_edge_distance_squared if cand.edge_edge.shape[0] else ipc.point_triangle_distance_squared
    st = ipc.candidate_stencils(F, E, cand)
    best = torch.full((st.shape[0],), float("inf"), dtype=x0.dtype)
    for s in torch.linspace(0, 1, samples + 1, dtype=x0.dtype):
        t = (s * toi)[:, None, None]
        x = (x0[st] + t * (x1[st] - x0[st]))
        best = torch.minimum(best, dist(*[x[:, k].contiguous() for k in range(4)]))
    return best


@pytest.mark.parametrize("edge_edge", [False, True])
@pytest.mark.parametrize("min_distance", [0.0, 0.01])
def test_never_steps_into_penetration(edge_edge, min_distance):
    x0, x1, F, E, cand = _trajectories(2000, seed=1 + edge_edge, edge_edge=edge_edge)
    toi = ipc.ccd_time_of_impact(x0, x1, F, E, cand, min_distance=min_distance)
    assert bool(((toi >= 0) & (toi <= 1)).all())
    hits = toi < 1
    assert int(hits.sum()) > 200  # many trajectories do collide
    d2 = _min_distance_along(x0, x1, F, E, cand, toi)
    assert float(d2.min()) > min_distance**2
    # Independent exact check on the truncated trajectories [0, toi]: IPC Toolkit's Tight Inclusion
    # CCD (an interval root finder) finds no impact closer than min_distance.
    st = ipc.candidate_stencils(F, E, cand)
    ti = ipctk.TightInclusionCCD()
    fn = ti.edge_edge_ccd if edge_edge else ti.point_triangle_ccd
    for i in torch.nonzero(hits).flatten()[:300].tolist():
        a = x0[st[i]]
        b = a + toi[i] * (x1[st[i]] - a)
        hit, _ = fn(*a.numpy(), *b.numpy(), min_distance, 1.0)
        assert not hit, i


@pytest.mark.parametrize("edge_edge", [False, True])
def test_matches_ipctk_additive_ccd(edge_edge):
    x0, x1, F, E, cand = _trajectories(300, seed=3, edge_edge=edge_edge)
    toi = ipc.ccd_time_of_impact(x0, x1, F, E, cand, min_distance=1e-3)
    st = ipc.candidate_stencils(F, E, cand)
    accd = ipctk.AdditiveCCD()
    fn = accd.edge_edge_ccd if edge_edge else accd.point_triangle_ccd
    for i in range(st.shape[0]):
        a, b = x0[st[i]].numpy(), x1[st[i]].numpy()
        hit, t = fn(*a, *b, 1e-3, 1.0)
        want = t if hit else 1.0
        assert abs(float(toi[i]) - want) <= 1e-9 * max(want, 1e-12), (i, float(toi[i]), want)


def _sphere_pair(seed, dtype=torch.float64):
    import trimesh

    m = trimesh.creation.icosphere(subdivisions=2)
    V = torch.tensor(np.vstack([m.vertices, m.vertices + [2.05, 0, 0]]), dtype=dtype)
    F = torch.tensor(np.vstack([m.faces, m.faces + len(m.vertices)]), dtype=torch.int64)
    g = torch.Generator().manual_seed(seed)
    d = torch.zeros_like(V)
    d[: len(m.vertices), 0] = 0.3
    d += 0.02 * torch.randn(V.shape, generator=g, dtype=dtype)
    return V.contiguous(), (V + d).contiguous(), F, ipc.mesh_edges(F)


@pytest.mark.parametrize("min_distance", [0.0, 0.01])
def test_collision_free_step_matches_ipctk(min_distance):
    for seed in range(3):
        V0, V1, F, E = _sphere_pair(seed)
        step = float(ipc.collision_free_step(V0, V1, F, E, min_distance))
        mesh = ipctk.CollisionMesh(V0.numpy(), E.numpy().astype(np.int32), F.numpy().astype(np.int32))
        want = ipctk.compute_collision_free_stepsize(mesh, V0.numpy(), V1.numpy(), min_distance, None, ipctk.AdditiveCCD())
        assert abs(step - want) <= 1e-9 * want
        # The default (Tight Inclusion) step is within the tolerances of both methods: both are
        # conservative, ACCD stops at 90 %-gap, TI rescales by 0.8.
        ti = ipctk.compute_collision_free_stepsize(mesh, V0.numpy(), V1.numpy(), min_distance)
        assert 0.5 * ti <= step <= 1.25 * ti
        Vs = V0 + step * (V1 - V0)
        assert ipctk.is_step_collision_free(mesh, V0.numpy(), Vs.numpy(), min_distance)
        assert not ipctk.has_intersections(mesh, Vs.numpy())


def test_no_motion_and_separated():
    V0, V1, F, E = _sphere_pair(0)
    assert float(ipc.collision_free_step(V0, V0, F, E)) == 1.0
    far = V0.clone()
    far[: len(V0) // 2] -= torch.tensor([5.0, 0, 0], dtype=V0.dtype)
    assert float(ipc.collision_free_step(far, far + 0.01, F, E)) == 1.0


def test_starting_closer_than_min_distance_gives_zero():
    x0, x1, F, E, cand = _trajectories(5, seed=4, edge_edge=False)
    toi = ipc.ccd_time_of_impact(x0, x1, F, E, cand, min_distance=10.0)
    assert bool((toi == 0).all())


def test_float32_conservative():
    x0, x1, F, E, cand = _trajectories(500, seed=5, edge_edge=True)
    toi = ipc.ccd_time_of_impact(x0.float(), x1.float(), F, E, cand).double()
    d2 = _min_distance_along(x0, x1, F, E, cand, toi)
    assert float(d2.min()) > 0


def test_opcheck():
    x0, x1, F, E, cand = _trajectories(4, seed=6, edge_edge=False)
    torch.library.opcheck(torch.ops.contactnet.ipc_ccd, (x0, x1, F, E, *cand, 0.0, 1.0, 0.9, 1000))


def test_bad_input():
    x0, x1, F, E, cand = _trajectories(4, seed=7, edge_edge=False)
    with pytest.raises(ValueError, match="min_distance"):
        ipc.ccd_time_of_impact(x0, x1, F, E, cand, min_distance=-1.0)
    with pytest.raises(ValueError, match="conservative_rescaling"):
        ipc.ccd_time_of_impact(x0, x1, F, E, cand, conservative_rescaling=1.5)
    with pytest.raises(ValueError, match="max_iterations"):
        ipc.ccd_time_of_impact(x0, x1, F, E, cand, max_iterations=0)
    with pytest.raises(ValueError, match="vertices_t1"):
        ipc.ccd_time_of_impact(x0, x1[:-1].contiguous(), F, E, cand)
    with pytest.raises(ValueError, match="min_distance"):
        ipc.collision_free_step(x0, x1, F, E, min_distance=float("nan"))

"""The stepper's fused potential op against its torch composition, the narrow-phase pruning of
candidate lists, and the trajectories that both leave unchanged."""

import math
import sys

import pytest
import torch

from contactnet.ops import ipc
from contactnet.sim import Scene, Stepper, box_mesh, potential, scenes
from tests.ops.mesh_cases import random_soup

CUBE = box_mesh((0.05, 0.05, 0.05), name="cube")


def tilted_stack(tilt=0.02, gap=5e-4):
    scene = Scene()
    scene.add_ground()
    scene.add_body(CUBE, pose=[0, 0, 0.025 + gap, 1, 0, 0, 0])
    scene.add_body(CUBE, pose=[0.01, 0, 0.077 + 2 * gap, math.cos(tilt / 2), math.sin(tilt / 2), 0, 0])
    return scene


def stacks_or_bowl(scene: str, envs: int) -> list[Scene]:
    """`envs` tilted stacks of growing tilt, or one shaken bowl."""
    if scene == "stack":
        return [tilted_stack(tilt=0.02 * (e + 1)) for e in range(envs)]
    return [scenes.bowl_shake(seed=3)]


def potential_inputs(sim: Stepper, seed: int, pad: int = 0):
    """The arguments of `potential.energy` at a random state near the current one, with the friction
    lag of the step's start; `pad` rows of -1 appended to the candidate list."""
    q_hat, w = sim._targets(sim.time + sim.dt)
    x_t, near = sim._contacts_at_start(sim._adaptive)
    lag = sim._friction_lag(near)
    g = torch.Generator().manual_seed(seed)
    q = sim.q + 1e-5 * torch.randn(sim.q.shape, generator=g, dtype=sim.q.dtype) * sim.free_dof[..., None]
    x = sim.positions(q)
    x1 = sim.positions(q + 2e-4 * sim.free_dof[..., None])
    cand = sim._mode.search(sim.packed, x, x1, sim.dhat, q, q + 2e-4 * sim.free_dof[..., None])
    if pad:
        fill = torch.full((pad, 2), -1, dtype=torch.int64)
        cand = ipc.Candidates(torch.cat([cand.face_vertex, fill]), torch.cat([cand.edge_edge, fill]))
    return sim.packed, sim._coefficients, q, q_hat, w, x_t, lag, x, cand


def assert_rel(a, b, rtol=1e-12):
    scale = float(b.abs().max())
    torch.testing.assert_close(a, b, rtol=rtol, atol=rtol * scale)


@pytest.mark.parametrize("scene, envs", [("stack", 2), ("bowl", 1)])
def test_fused_potential_equals_the_torch_reference(scene, envs):
    """Energy, gradient and PSD-projected Hessian of the fused op against the torch composition of
    the per-candidate ops, float64 to 1e-12 relative, with friction, padding rows and environments
    of different contacts."""
    built = stacks_or_bowl(scene, envs)
    sim = Stepper(built, mu=0.4)
    for _ in range(200):  # until the objects touch
        if sim.step().contacts.min() > 0:
            break
    sim.step()
    for seed in range(3):
        args = potential_inputs(sim, seed, pad=3 * seed)
        assert args[-1].count > 0 and args[6].candidates.count > 0
        assert_rel(potential.energy(*args), potential.energy_reference(*args))
        g, H = potential.gradient_hessian(*args)
        g_ref, H_ref = potential.gradient_hessian_reference(*args)
        assert_rel(g, g_ref)
        assert_rel(H, H_ref)


@pytest.mark.parametrize("envs", [1, 3])
def test_fused_derivatives_are_the_same_bits_on_any_number_of_threads(envs):
    """The CPU sums add each entry's terms in candidate order, by environment (as many as threads)
    or by body (fewer): one thread and two give the same bits, on one environment (its bodies
    share the threads) and on three."""
    sim = Stepper([tilted_stack(tilt=0.02 * (e + 1)) for e in range(envs)], mu=0.4)
    for _ in range(30):
        sim.step()
    args = potential_inputs(sim, seed=0, pad=2)
    assert args[-1].count > 0 and args[6].candidates.count > 0
    before = torch.get_num_threads()
    try:
        results = []
        for threads in (1, 2):
            torch.set_num_threads(threads)
            results.append(potential.gradient_hessian(*args))
    finally:
        torch.set_num_threads(before)
    (g1, H1), (g2, H2) = results
    assert torch.equal(g1, g2) and torch.equal(H1, H2)


def test_frictionless_hessian_kept_and_reused_gives_the_same_bits():
    """keep_frictionless returns the Hessian of every term but friction (the call with no friction
    pairs); passed back at the same state, the op computes only the gradient and friction's part
    and returns the same gradient and Hessian, bit for bit."""
    sim = Stepper([tilted_stack(0.02), tilted_stack(0.05)], mu=0.4)
    for _ in range(5):
        sim.step()
    args = potential_inputs(sim, 1)
    packed, c, q, q_hat, w, x_t, lag, x, cand = args
    assert cand.count > 0 and lag.candidates.count > 0
    g, H, kept = potential.gradient_hessian(*args, keep_frictionless=True)
    none = lag.candidates.face_vertex[:0]
    no_friction = potential.FrictionLag(ipc.Candidates(none, none), lag.mu[:0])
    _, H_frictionless = potential.gradient_hessian(packed, c, q, q_hat, w, x_t, no_friction, x, cand)
    assert torch.equal(kept, H_frictionless) and not torch.equal(kept, H)
    reused = kept.clone()
    g2, H2, kept2 = potential.gradient_hessian(*args, frictionless_hessian=reused, keep_frictionless=True)
    assert torch.equal(g2, g) and torch.equal(H2, H) and torch.equal(kept2, kept)
    # The kept part handed back is returned as it is, and friction was not added into it.
    assert kept2 is reused and torch.equal(reused, kept)
    with pytest.raises(ValueError, match="frictionless_hessian"):
        potential.gradient_hessian(*args, frictionless_hessian=kept[:1])


def test_fused_gradient_matches_finite_differences():
    sim = Stepper(tilted_stack(), mu=0.4)
    for _ in range(3):
        sim.step()
    packed, c, q, q_hat, w, x_t, lag, _, cand = potential_inputs(sim, 5)

    def energy(q):
        return potential.energy(packed, c, q, q_hat, w, x_t, lag, sim.positions(q), cand)

    g, _ = potential.gradient_hessian(packed, c, q, q_hat, w, x_t, lag, sim.positions(q), cand)
    d = torch.randn(q.shape, generator=torch.Generator().manual_seed(6), dtype=q.dtype) * sim.free_dof[..., None]
    eps = 1e-9
    fd = (energy(q + eps * d) - energy(q - eps * d)) / (2 * eps)
    assert fd.item() == pytest.approx((g.reshape(-1) @ d.reshape(-1)).item(), rel=1e-5)


def test_fused_potential_rejects_bad_arguments():
    sim = Stepper(tilted_stack())
    packed, c, q, q_hat, w, x_t, lag, x, cand = potential_inputs(sim, 0)
    base = dict(q=q, q_hat=q_hat, weight=w, mass_matrix=packed.M, ortho_weight=packed.ortho_weight, vertices=x,
                rest_vertices=packed.rest, faces=packed.faces, edges=packed.edges, vertex_body=packed.vertex_body,
                candidates=cand, lagged_vertices=x_t, lag_candidates=lag.candidates, lag_mu=lag.mu, dt=c.dt,
                dhat=c.dhat, kappa=c.kappa, eps_v=c.eps_v)
    for change, match in [({"q_hat": q_hat[:, :1]}, "q_hat"), ({"weight": w.float()}, "weight"),
                          ({"lag_mu": lag.mu[:-1]}, "lag_mu"), ({"dt": 0.0}, "dt"),
                          ({"vertex_body": packed.vertex_body + 100}, "vertex_body"),
                          ({"candidates": ipc.Candidates(cand.face_vertex[:, :1], cand.edge_edge)}, "face_vertex")]:
        with pytest.raises((ValueError, TypeError), match=match):
            ipc.affine_potential_derivatives(**{**base, **change})


def _soup_motion(seed: int):
    """Two random soups a few mm apart moving towards each other, as one packed mesh."""
    g = torch.Generator().manual_seed(seed)
    va, fa = (torch.as_tensor(a) for a in random_soup(40, seed=seed))
    vb, fb = (torch.as_tensor(a) for a in random_soup(40, seed=seed + 100))
    vb = vb + torch.tensor([0.0, 0.0, float(va[:, 2].max() - vb[:, 2].min()) + 0.003], dtype=vb.dtype)
    v0 = torch.cat([va, vb]).double()
    faces = torch.cat([fa, fb + va.shape[0]])
    edges = ipc.mesh_edges(faces)
    v1 = v0 + 0.004 * torch.randn(v0.shape, generator=g, dtype=v0.dtype)
    return v0, v1, faces, edges


def _pair_distances(x, faces, edges, cand):
    fv, ee = cand
    t = x[faces[fv[:, 1]]]
    d_fv = ipc.point_triangle_distance_squared(x[fv[:, 0]], t[:, 0].contiguous(), t[:, 1].contiguous(),
                                               t[:, 2].contiguous())
    a, b = x[edges[ee[:, 0]]], x[edges[ee[:, 1]]]
    d_ee = ipc.edge_edge_distance_squared(a[:, 0].contiguous(), a[:, 1].contiguous(), b[:, 0].contiguous(),
                                          b[:, 1].contiguous())
    return torch.cat([d_fv, d_ee])


@pytest.mark.parametrize("seed", range(4))
def test_prune_keeps_every_pair_that_comes_within_reach(seed):
    """Swept: no dropped pair comes within reach anywhere on the motion (sampled densely), the kept
    ones are a subsequence of the input; static: exactly the pairs with d² < reach²."""
    v0, v1, faces, edges = _soup_motion(seed)
    reach = 1e-3
    swept = ipc.swept_candidates(v0, v1, faces, edges, reach)
    kept = ipc.prune_candidates(v0, faces, edges, swept, reach, vertices_t1=v1)
    assert kept.count < swept.count
    for k, s in zip(kept, swept):
        rows = {tuple(r) for r in s.tolist()}
        assert all(tuple(r) in rows for r in k.tolist())
    kept_rows = [{tuple(r) for r in k.tolist()} for k in kept]
    dropped = ipc.Candidates(*(s[torch.tensor([tuple(r) not in kr for r in s.tolist()], dtype=torch.bool)]
                               for s, kr in zip(swept, kept_rows)))
    for t in torch.linspace(0, 1, 101, dtype=torch.float64):
        d2 = _pair_distances(v0 + t * (v1 - v0), faces, edges, dropped)
        assert bool((d2 >= reach**2).all())
    near = ipc.collision_candidates(v0, faces, edges, 5 * reach)
    static = ipc.prune_candidates(v0, faces, edges, near, reach)
    d2 = _pair_distances(v0, faces, edges, near)
    nfv = near.face_vertex.shape[0]
    assert torch.equal(static.face_vertex, near.face_vertex[d2[:nfv] < reach**2])
    assert torch.equal(static.edge_edge, near.edge_edge[d2[nfv:] < reach**2])


def test_prune_ignores_a_motion_both_sides_share():
    """A shared translation of 50 × reach moves no distance: translated alone, the swept prune keeps
    just the pairs within reach at the start (the absolute bound kept every pair within 101 ×
    reach); with random motion on top, no dropped pair comes within reach on the way."""
    v0, v1, faces, edges = _soup_motion(1)
    reach = 1e-3
    shift = 50 * reach * torch.nn.functional.normalize(torch.tensor([5.0, -3.0, 2.0], dtype=v0.dtype), dim=0)
    moved = v0 + shift
    swept = ipc.swept_candidates(v0, moved, faces, edges, reach)
    kept = ipc.prune_candidates(v0, faces, edges, swept, reach, vertices_t1=moved)
    static = ipc.prune_candidates(v0, faces, edges, swept, reach)
    assert swept.count > 10 * kept.count > 0
    assert all(torch.equal(k, s) for k, s in zip(kept, static))
    v1 = v1 + shift
    swept = ipc.swept_candidates(v0, v1, faces, edges, reach)
    kept = ipc.prune_candidates(v0, faces, edges, swept, reach, vertices_t1=v1)
    kept_rows = [{tuple(r) for r in k.tolist()} for k in kept]
    dropped = ipc.Candidates(*(s[torch.tensor([tuple(r) not in kr for r in s.tolist()], dtype=torch.bool)]
                               for s, kr in zip(swept, kept_rows)))
    assert dropped.count > 0
    for t in torch.linspace(0, 1, 101, dtype=torch.float64):
        assert bool((_pair_distances(v0 + t * (v1 - v0), faces, edges, dropped) >= reach**2).all())


def test_prune_drops_padding_and_rejects_bad_arguments():
    v0, v1, faces, edges = _soup_motion(0)
    cand = ipc.collision_candidates(v0, faces, edges, 1e-2)
    fill = torch.full((2, 2), -1, dtype=torch.int64)
    padded = ipc.Candidates(torch.cat([fill, cand.face_vertex]), torch.cat([cand.edge_edge, fill]))
    assert ipc.prune_candidates(v0, faces, edges, padded, 1.0).count == cand.count
    with pytest.raises(ValueError, match="reach"):
        ipc.prune_candidates(v0, faces, edges, cand, -1.0)
    with pytest.raises(ValueError, match="vertices_t1"):
        ipc.prune_candidates(v0, faces, edges, cand, 1e-3, vertices_t1=v1[:-1])


def test_trajectories_equal_the_unfused_unpruned_stepper(monkeypatch):
    """The fused potential, the pruning and the neighbour lists are the same math as the torch
    potential on every Newton iteration's full broad-phase list. 30 steps of a tilted stack with
    friction end within 1e-12 m of it; the shaken bowl, whose objects land in those steps (one
    step takes 73 Newton iterations), within 1e-9 m when Newton runs to 1e-7 m/s. The two sum in
    different orders, so each Newton solve stops at a slightly different point inside its
    tolerance, and an impact amplifies that: at the default 1e-5 m/s the bowls end 1e-8 m apart,
    at 1e-9 m/s 1e-12 m apart, so the gap is the solver's tolerance, not different math. Pruning
    (of the lists and of every query) changes no bit."""
    from contactnet.sim import contact_search
    from contactnet.sim.modes import Adaptive

    def run(reference: bool, pruned: bool = True):
        with monkeypatch.context() as m:
            if not pruned:
                m.setattr(ipc, "prune_candidates", lambda x0, faces, edges, cand, reach, vertices_t1=None: cand)
            if reference:
                m.setattr(potential, "energy", potential.energy_reference)
                m.setattr(potential, "gradient_hessian", potential.gradient_hessian_reference)
                m.setattr(Adaptive, "search", lambda self, scene, x0, x1, reach, q0, q1=None, active=None:
                          contact_search.search(scene, x0, x1, reach, q0, q1, active))
            sims = [Stepper(tilted_stack(), mu=0.4), Stepper([scenes.bowl_shake(seed=1)], tolerance=1e-7)]
            for sim in sims:
                for _ in range(30):
                    sim.step()
            return [sim.positions(sim.q) for sim in sims]

    (stack, bowl), (stack_ref, bowl_ref) = run(False), run(True)
    assert float((stack - stack_ref).abs().max()) < 1e-12
    assert float((bowl - bowl_ref).abs().max()) < 1e-9
    unpruned_stack, unpruned_bowl = run(False, pruned=False)
    assert torch.equal(stack, unpruned_stack) and torch.equal(bowl, unpruned_bowl)


def test_reusing_the_last_iterations_hessian_changes_no_bit(monkeypatch):
    """A step starts where the last one's final Newton iteration was, and takes that iteration's
    Hessian of every term but friction instead of computing it again: the trajectories of a tilted
    stack with friction and of the shaken bowl are the same bits as with every Hessian computed
    afresh. A state changed in place between steps (reset) is not served a stale Hessian."""
    calls = {"reused": 0}
    real = potential.gradient_hessian

    def counted(*args, frictionless_hessian=None, **kwargs):
        calls["reused"] += frictionless_hessian is not None
        return real(*args, frictionless_hessian=frictionless_hessian, **kwargs)

    def afresh(*args, frictionless_hessian=None, **kwargs):
        return real(*args, **kwargs)

    def run(gradient_hessian):
        with monkeypatch.context() as m:
            m.setattr(potential, "gradient_hessian", gradient_hessian)
            sims = [Stepper([tilted_stack(0.02), tilted_stack(0.05)], mu=0.4), Stepper([scenes.bowl_shake(seed=1)])]
            out = []
            for sim in sims:
                for k in range(30):
                    if k == 20:
                        sim.q.copy_(sim.packed.q_init)  # in place: the kept Hessian's state is gone
                        sim.qdot.zero_()
                    sim.step()
                out.append(sim.positions(sim.q))
            return out

    reused, fresh = run(counted), run(afresh)
    assert calls["reused"] >= 40
    assert all(torch.equal(a, b) for a, b in zip(reused, fresh))


def test_finished_environments_leave_the_friction_pairs_and_change_no_bit(monkeypatch):
    """Once an environment has converged, the adaptive mode leaves its friction pairs out of the
    step's later energies and derivatives (as its search leaves out its contact pairs): the pairs
    kept are exactly the active environments', in their order, with their μ; and trajectories of
    two shaken bowls are the same bits as with every environment's friction pairs."""
    from contactnet.sim.modes import Adaptive

    sim = Stepper([tilted_stack(0.02), tilted_stack(0.05)], mu=0.4)
    for _ in range(5):
        sim.step()
    _, near = sim._contacts_at_start(sim._adaptive)
    lag = sim._friction_lag(near)
    active = torch.tensor([False, True])
    kept = sim._adaptive.friction_pairs(sim.packed, lag, active)
    fv, ee = lag.candidates
    env_fv, env_ee = sim.packed.vertex_env[fv[:, 0]], sim.packed.vertex_env[sim.edges[ee[:, 0], 0]]
    assert torch.equal(kept.candidates.face_vertex, fv[env_fv == 1])
    assert torch.equal(kept.candidates.edge_edge, ee[env_ee == 1])
    assert torch.equal(kept.mu, lag.mu[torch.cat([env_fv, env_ee]) == 1])
    assert 0 < kept.mu.numel() < lag.mu.numel()
    assert sim._adaptive.friction_pairs(sim.packed, lag, torch.tensor([True, True])) is lag

    def run():
        sims = Stepper([scenes.bowl_shake(seed=1), scenes.bowl_shake(seed=2)])
        for _ in range(30):
            sims.step()
        return sims.positions(sims.q)

    fewer = run()
    with monkeypatch.context() as m:
        m.setattr(Adaptive, "friction_pairs", lambda self, scene, lag, active: lag)
        every = run()
    assert torch.equal(fewer, every)


def _settled_stacks() -> Stepper:
    sim = Stepper([tilted_stack(0.02), tilted_stack(0.05)], mu=0.4)
    for _ in range(3):
        sim.step()
    return sim


def _recorded_searches(monkeypatch, record=lambda args: args[3]):
    """(calls, the real search): contact_search.search, appending record(its arguments) to calls."""
    from contactnet.sim import contact_search

    calls, real = [], contact_search.search
    monkeypatch.setattr(contact_search, "search", lambda *a, **k: calls.append(record(a)) or real(*a, **k))
    return calls, real


def _assert_holds(got: ipc.Candidates, want: ipc.Candidates, needed: torch.Tensor | None = None) -> None:
    """Every pair of `want` (those where needed (Nfv + Nee,) is true, if given) is a pair of `got`."""
    nfv = want.face_vertex.shape[0]
    for kind, (rows, got_rows) in enumerate(zip(want, got, strict=True)):
        if needed is not None:
            rows = rows[needed[:nfv] if kind == 0 else needed[nfv:]]
        assert {tuple(r) for r in rows.tolist()} <= {tuple(r) for r in got_rows.tolist()}, kind


def test_neighbour_list_holds_every_pair_within_reach(monkeypatch):
    """Queries of a Verlet list (static and swept, small moves reuse it, long ones search alone)
    return every pair that the broad phase + pruning returns and that is within reach at either
    end of the move; the list is searched again only when a query leaves its margin."""
    from contactnet.sim import contact_search

    sim = _settled_stacks()
    P, reach = sim.packed, sim.dhat
    searches, real_search = _recorded_searches(monkeypatch)
    lists = contact_search.NeighbourList(max_margin=4.0)  # a move of 1.5 reach rebuilds, 10 searches alone
    g = torch.Generator().manual_seed(3)
    q0 = sim.q
    for move, active in [(0.0, None), (0.3, None), (0.5, torch.tensor([True, False])), (1.5, None), (10.0, None)]:
        d = torch.randn(q0.shape, generator=g, dtype=q0.dtype) * sim.free_dof[..., None]
        q1 = q0 + d * (move * reach / float(contact_search.relative_displacement_bound(P, d).max()))
        x0, x1 = sim.positions(q0), sim.positions(q1)
        swept = move > 0
        got = lists.query(P, x0, x1 if swept else None, reach, q0, q1 if swept else None, active)
        want = ipc.prune_candidates(x0, P.faces, P.edges, real_search(P, x0, x1 if swept else None, reach, q0,
                                                                      q1 if swept else None, active),
                                    reach, vertices_t1=x1 if swept else None)
        near = [d2 < reach**2 for d2 in (_pair_distances(x, P.faces, P.edges, want) for x in (x0, x1))]
        needed = near[0] | near[1] if swept else near[0]
        _assert_holds(got, want, needed)
        assert bool(needed.any())
    # moves in units of reach: built at the static query (margin = reach); 0.3 and 0.5 reuse it
    # (the latter for one environment); 1.5 leaves the margin and rebuilds with margin 3; 10
    # searches alone
    assert searches == pytest.approx([3 * reach, 7 * reach, reach])


def test_neighbour_list_searches_again_only_the_environments_that_leave_their_margins(monkeypatch):
    """One environment moves out of its margin: only it is searched again (the other keeps its
    list), and the query still holds every pair within reach."""
    from contactnet.sim import contact_search

    sim = _settled_stacks()
    P, reach = sim.packed, sim.dhat
    calls, real_search = _recorded_searches(monkeypatch, lambda args: (args[3], args[6].tolist()))
    lists = contact_search.NeighbourList()
    q0 = sim.q
    d = torch.randn(q0.shape, generator=torch.Generator().manual_seed(5), dtype=q0.dtype) * sim.free_dof[..., None]
    d[0] = 0.0  # environment 0 stays
    q1 = q0 + d * (1.5 * reach / float(contact_search.relative_displacement_bound(P, d).max()))
    lists.query(P, sim.positions(q0), None, reach, q0)
    x1 = sim.positions(q1)
    got = lists.query(P, x1, None, reach, q1)
    want = ipc.prune_candidates(x1, P.faces, P.edges, real_search(P, x1, None, reach, q1), reach)
    _assert_holds(got, want)
    assert want.count > 0
    lists.query(P, x1, None, reach, q1, active=torch.tensor([True, False]))
    assert calls == [(pytest.approx(3 * reach), [True, True]), (pytest.approx(3 * reach), [False, True])]


def test_neighbour_list_queries_within_the_margin_hold_every_pair_within_reach(monkeypatch):
    """Queries anywhere within a list's margin (static and swept, small and large moves, objects in
    two shaken bowls: thousands of listed pairs at all distances) return every pair within reach
    at either end, from the list alone."""
    from contactnet.sim import contact_search

    sim = Stepper([scenes.bowl_shake(seed=0), scenes.bowl_shake(seed=3)], on_failure="ignore")
    for _ in range(30):
        sim.step()
    P, reach = sim.packed, sim.dhat
    q0 = sim.q
    lists = contact_search.NeighbourList()
    lists.query(P, sim.positions(q0), None, reach, q0)
    listed = sum(t.shape[0] for t in lists.fv + lists.ee)
    searches, real_search = _recorded_searches(monkeypatch)
    g = torch.Generator().manual_seed(11)
    for trial in range(16):
        d = torch.randn(q0.shape, generator=g, dtype=q0.dtype) * sim.free_dof[..., None]
        d *= (trial / 16) * reach / float(contact_search.relative_displacement_bound(P, d).max())
        qa, qb = q0 + d * float(torch.rand((), generator=g)), q0 + d
        xa, xb = sim.positions(qa), sim.positions(qb)
        swept = trial % 2 == 1
        got = lists.query(P, xa, xb if swept else None, reach, qa, qb if swept else None)
        needed = [ipc.prune_candidates(x, P.faces, P.edges, real_search(P, x, None, reach, q), reach)
                  for x, q in ((xa, qa), (xb, qb))[: 2 if swept else 1]]
        for want in needed:
            _assert_holds(got, want)
        assert got.count < listed
    assert searches == []  # every query was answered from the list
    assert listed > 1000


def test_neighbour_list_follows_a_translation_shared_by_the_environment(monkeypatch):
    """A translation shared by every body of an environment changes no distance: a list built
    before it serves the queries after it (no new search, however far), and they still hold every
    pair within reach. The relative bound never exceeds the absolute one."""
    from contactnet.sim import contact_search

    scene = Scene()
    cube = box_mesh((0.05, 0.05, 0.05))
    scene.add_body(cube, pose=[0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0])
    scene.add_body(cube, pose=[0.01, 0.0, 0.0505, 1.0, 0.0, 0.0, 0.0])  # 0.5 mm above the first
    sim = Stepper(scene)
    P, reach = sim.packed, sim.dhat
    searches, real_search = _recorded_searches(monkeypatch)
    lists = contact_search.NeighbourList()
    q0 = sim.q
    g = torch.Generator().manual_seed(0)
    jitter = torch.randn(q0.shape, generator=g, dtype=q0.dtype)
    jitter *= 0.2 * reach / float(contact_search.displacement_bound(P, jitter).max())
    q1 = q0 + jitter
    q1[..., :3] += torch.tensor([0.03, -0.02, 0.05], dtype=q0.dtype)  # 30-50 times reach
    x0, x1 = sim.positions(q0), sim.positions(q1)
    lists.query(P, x0, None, reach, q0)
    for xa, xb, qa, qb in [(x0, x1, q0, q1), (x1, None, q1, None)]:
        got = lists.query(P, xa, xb, reach, qa, qb)
        want = ipc.prune_candidates(xa, P.faces, P.edges, real_search(P, xa, xb, reach, qa, qb), reach,
                                    vertices_t1=xb)
        near = [_pair_distances(x, P.faces, P.edges, want) < reach**2 for x in (xa, xb) if x is not None]
        needed = near[0] | near[-1]
        _assert_holds(got, want, needed)
        assert bool(needed.any())
    assert searches == pytest.approx([3 * reach])  # the list's one search, at q0
    for _ in range(20):
        dq = torch.randn(q0.shape, generator=g, dtype=q0.dtype)
        assert bool((contact_search.relative_displacement_bound(P, dq)
                     <= contact_search.displacement_bound(P, dq) * (1 + 1e-12)).all())


def contact_forces_reference(sim: Stepper, x, x_t, cand, lag):
    """The torch composition `Stepper._finish` used before the fused op: per-candidate barrier and
    friction gradients added into the bodies, contacts and smallest distance per environment."""
    from contactnet.sim import contact_search

    E, B = sim.num_envs, sim.max_bodies
    forces = torch.zeros(E * B, 3, dtype=sim.dtype)
    contacts = torch.zeros(E, dtype=torch.int64)
    min_distance = torch.full((E,), float("inf"), dtype=sim.dtype)
    if cand.count:
        st = ipc.candidate_stencils(sim.faces, sim.edges, cand)
        g = ipc.barrier_potential_gradient(x, sim.faces, sim.edges, cand, sim.dhat, sim.kappa, sim.rest,
                                           per_candidate=True)
        forces.index_add_(0, sim.vertex_body[st].reshape(-1), -g.reshape(-1, 3))
        env = sim.packed.candidate_env(cand)
        real = torch.cat([cand.face_vertex[:, 0], cand.edge_edge[:, 0]]) >= 0
        contacts.index_add_(0, env, real.long())
        d = torch.where(real, contact_search.candidate_distances(sim.packed, x, cand), float("inf"))
        min_distance = min_distance.scatter_reduce(0, env, d, "amin")
    fcand, fmu = lag
    if fcand.count:
        st = ipc.candidate_stencils(sim.faces, sim.edges, fcand)
        g = ipc.friction_potential_gradient(x - x_t, x_t, sim.faces, sim.edges, fcand, sim.dhat, sim.kappa, 1.0,
                                            sim.eps_v * sim.dt, sim.rest, per_candidate=True)
        forces.index_add_(0, sim.vertex_body[st].reshape(-1), -(fmu[:, None] * g).reshape(-1, 3))
    return forces, contacts, min_distance


@pytest.mark.parametrize("scene", ["stack", "bowl"])
def test_contact_forces_equal_the_torch_composition(scene):
    """`ipc.affine_contact_forces` (the stepper's end-of-step forces and statistics) against the
    per-candidate ops it replaced: forces to 1e-12 relative, counts exactly, distances to 1e-15 m;
    padding rows count nowhere, and an environment without contacts reports inf."""
    built = [tilted_stack(tilt=0.02), tilted_stack(gap=0.05)] if scene == "stack" else [scenes.bowl_shake(seed=3)]
    sim = Stepper(built, mu=0.4)
    for _ in range(200):
        if sim.step().contacts.max() > 0:
            break
    for _ in range(3):
        sim.step()
    x_t, near = sim._contacts_at_start(sim._adaptive)
    lag = sim._friction_lag(near)
    x = sim.positions(sim.q + 1e-5 * sim.free_dof[..., None])
    cand = ipc.prune_candidates(x, sim.faces, sim.edges, sim._adaptive.search(sim.packed, x, None, sim.dhat, sim.q),
                                sim.dhat)
    fill = torch.full((3, 2), -1, dtype=torch.int64)
    padded = ipc.Candidates(torch.cat([cand.face_vertex, fill]), torch.cat([cand.edge_edge, fill]))
    assert cand.count > 0 and lag.candidates.count > 0
    for c in (cand, padded):
        forces, contacts, dmin = ipc.affine_contact_forces(
            x, x_t, sim.rest, sim.faces, sim.edges, sim.vertex_body, c, *lag, sim.num_envs, sim.max_bodies, sim.dt,
            sim.dhat, sim.kappa, sim.eps_v)
        ref = contact_forces_reference(sim, x, x_t, c, lag)
        assert_rel(forces, ref[0])
        assert torch.equal(contacts, ref[1]) and int(contacts.sum()) == cand.count
        torch.testing.assert_close(dmin, ref[2], rtol=0, atol=1e-15)
        alone = ipc.contact_statistics(x, sim.faces, sim.edges, sim.vertex_body, c, sim.num_envs, sim.max_bodies)
        assert torch.equal(alone[0], contacts) and torch.equal(alone[1], dmin)
    if scene == "stack":
        assert int(contacts[1]) == 0 and dmin[1] == float("inf")


def test_contact_forces_reject_bad_arguments():
    sim = Stepper([tilted_stack()], mu=0.4)
    x = sim.positions(sim.q)
    none = ipc.Candidates(torch.zeros(0, 2, dtype=torch.int64), torch.zeros(0, 2, dtype=torch.int64))
    mu = torch.zeros(0, dtype=sim.dtype)

    def call(**kw):
        args = dict(vertices=x, lagged_vertices=x, rest_vertices=sim.rest, faces=sim.faces, edges=sim.edges,
                    vertex_body=sim.vertex_body, candidates=none, lag_candidates=none, lag_mu=mu, num_envs=1,
                    num_bodies=sim.max_bodies, dt=0.01, dhat=1e-3, kappa=1.0, eps_v=1e-3)
        args.update(kw)
        return ipc.affine_contact_forces(**args)

    forces, contacts, dmin = call()
    assert not forces.any() and int(contacts) == 0 and dmin.isinf().all()
    with pytest.raises(ValueError, match="lagged_vertices"):
        call(lagged_vertices=x[:-1])
    with pytest.raises(TypeError, match="rest_vertices"):
        call(rest_vertices=sim.rest.float())
    with pytest.raises(ValueError, match="lag_mu"):
        call(lag_mu=torch.zeros(2, dtype=sim.dtype))
    with pytest.raises(ValueError, match="num_bodies"):
        call(num_bodies=0)
    with pytest.raises(ValueError, match="vertex_body"):
        call(num_bodies=1)  # bodies beyond E·B
    with pytest.raises(ValueError, match="dhat"):
        call(dhat=0.0)


def test_contact_statistics_keep_a_nan_distance_and_reject_bad_arguments():
    """A pair with a non-finite position reads as touching (distance 0) in its environment,
    whatever the pairs' order, as in `affine_contact_forces`; the other environment's is
    unaffected. Bad arguments raise, naming them."""
    sim = Stepper([tilted_stack(), tilted_stack()], mu=0.4)
    for _ in range(200):
        if bool((sim.step().contacts > 0).all()):
            break
    x = sim.positions(sim.q)
    cand = sim._adaptive.search(sim.packed, x, None, sim.dhat, sim.q)
    counts, dmin = ipc.contact_statistics(x, sim.faces, sim.edges, sim.vertex_body, cand, 2, sim.max_bodies)
    assert bool((counts > 0).all()) and bool(dmin.isfinite().all())
    fv, ee = cand
    env = sim.packed.candidate_env(cand)
    bad = x.clone()
    edge = ee[env[fv.shape[0]:] == 0][-1, 0]  # environment 0's last edge–edge pair
    bad[sim.edges[edge, 0]] = float("nan")
    for order in (cand, ipc.Candidates(fv.flip(0), ee.flip(0))):
        n, d = ipc.contact_statistics(bad, sim.faces, sim.edges, sim.vertex_body, order, 2, sim.max_bodies)
        assert torch.equal(n, counts) and d[0] == 0 and d[1] == dmin[1]
        forces_op = ipc.affine_contact_forces(bad, x, sim.rest, sim.faces, sim.edges, sim.vertex_body, order,
                                              *sim._friction_lag(order), 2, sim.max_bodies, sim.dt, sim.dhat,
                                              sim.kappa, sim.eps_v)
        assert torch.equal(forces_op[2], d)
    args = (x, sim.faces, sim.edges, sim.vertex_body, cand)
    with pytest.raises(ValueError, match="num_bodies"):
        ipc.contact_statistics(*args, 2, 0)
    with pytest.raises(ValueError, match="vertex_body"):
        ipc.contact_statistics(*args, 1, 1)
    with pytest.raises(ValueError, match="vertices"):
        ipc.contact_statistics(x[:, :2], *args[1:], 2, sim.max_bodies)


# The GPU's form of the candidate sums (csrc/ipc/candidate_sums.h: one index per candidate, adds
# into its environment's or bodies' rows, no per-candidate arrays), run serially on the CPU.
DEVICE_FORM_OPS = ("ipc_affine_potential", "ipc_affine_potential_derivatives", "ipc_affine_contact_forces",
                   "ipc_contact_statistics", "ipc_collision_free_steps")


def _use_device_form(monkeypatch):
    for name in DEVICE_FORM_OPS:
        monkeypatch.setattr(torch.ops.contactnet, name, getattr(torch.ops.contactnet, f"_{name}_device_form"))


@pytest.mark.parametrize("scene, envs", [("stack", 2), ("bowl", 1)])
def test_device_form_of_the_sums_equals_the_cpu_form(scene, envs, monkeypatch):
    """Energy, derivatives (fresh, kept and reused Hessians), contact forces and statistics of the
    device form against the CPU's, on lists mostly of padding (as the fixed-shape step's): the
    energies, forces and statistics to the bit (same terms, same candidate order), the Hessians
    to 1e-12 relative (the CPU copies a shared feature's Hessian between candidates)."""
    built = stacks_or_bowl(scene, envs)
    sim = Stepper(built, mu=0.4)
    for _ in range(200):
        if sim.step().contacts.min() > 0:
            break
    sim.step()
    packed, c, q, q_hat, w, x_t, lag, x, cand = potential_inputs(sim, seed=1, pad=400)
    assert cand.count > 0 and lag.candidates.count > 0
    host = {"energy": potential.energy(packed, c, q, q_hat, w, x_t, lag, x, cand),
            "derivatives": potential.gradient_hessian(packed, c, q, q_hat, w, x_t, lag, x, cand,
                                                      keep_frictionless=True)}
    stats_args = (x, sim.faces, sim.edges, sim.vertex_body, cand, sim.num_envs, sim.max_bodies)
    forces_args = (x, x_t, sim.rest, sim.faces, sim.edges, sim.vertex_body, cand, *lag, sim.num_envs,
                   sim.max_bodies, sim.dt, sim.dhat, sim.kappa, sim.eps_v)
    host["forces"] = ipc.affine_contact_forces(*forces_args)
    host["statistics"] = ipc.contact_statistics(*stats_args)
    host["reused"] = potential.gradient_hessian(packed, c, q, q_hat, w, x_t, lag, x, cand,
                                                frictionless_hessian=host["derivatives"][2].clone())
    _use_device_form(monkeypatch)
    assert torch.equal(potential.energy(packed, c, q, q_hat, w, x_t, lag, x, cand), host["energy"])
    got = potential.gradient_hessian(packed, c, q, q_hat, w, x_t, lag, x, cand, keep_frictionless=True)
    for a, b in zip(got, host["derivatives"]):
        assert_rel(a, b)
    reused = potential.gradient_hessian(packed, c, q, q_hat, w, x_t, lag, x, cand,
                                        frictionless_hessian=host["derivatives"][2].clone())
    for a, b in zip(reused, host["reused"]):
        assert torch.equal(a, b)
    for a, b in zip(ipc.affine_contact_forces(*forces_args), host["forces"]):
        assert torch.equal(a, b)
    for a, b in zip(ipc.contact_statistics(*stats_args), host["statistics"]):
        assert torch.equal(a, b)
    # Padding alone adds nothing (the same as empty lists): no contacts, distances inf.
    fill = torch.full((5, 2), -1, dtype=torch.int64)
    padding, nothing = ipc.Candidates(fill, fill), ipc.Candidates(fill[:0], fill[:0])
    padded = (potential.FrictionLag(padding, torch.ones(10, dtype=sim.dtype)), x, padding)
    empty = (potential.FrictionLag(nothing, lag.mu[:0]), x, nothing)
    assert torch.equal(potential.energy(packed, c, q, q_hat, w, x_t, *padded),
                       potential.energy(packed, c, q, q_hat, w, x_t, *empty))
    for a, b in zip(potential.gradient_hessian(packed, c, q, q_hat, w, x_t, *padded),
                    potential.gradient_hessian(packed, c, q, q_hat, w, x_t, *empty)):
        assert torch.equal(a, b)
    counts, dmin = ipc.contact_statistics(x, sim.faces, sim.edges, sim.vertex_body, padding, sim.num_envs,
                                          sim.max_bodies)
    assert not counts.any() and dmin.isinf().all()


def _bounded(cand: ipc.Candidates, pad: int, extents=None) -> ipc.BoundedCandidates:
    """cand's rows, then `pad` rows of -1 per kind, bounded by cand's counts (or `extents`)."""
    fill = torch.full((pad, 2), -1, dtype=torch.int64)
    fv, ee = cand
    extents = torch.tensor([fv.shape[0], ee.shape[0]]) if extents is None else torch.tensor(extents)
    return ipc.BoundedCandidates(torch.cat([fv, fill]), torch.cat([ee, fill]), extents)


@pytest.mark.parametrize("form", ["cpu", "device"])
def test_rows_past_the_extents_are_skipped_as_padding(form, monkeypatch):
    """`BoundedCandidates`: the potential, its derivatives, the CCD bound and the contact forces
    and statistics skip the rows past the extents unread, in either form, and give the bits of the
    lists without them; extents past the rows are clamped; extents of 0 leave nothing; bad
    extents are named."""
    sim = Stepper([tilted_stack(0.02), tilted_stack(0.05)], mu=0.4)
    for _ in range(5):
        sim.step()
    packed, c, q, q_hat, w, x_t, lag, x, cand = potential_inputs(sim, seed=2)
    assert cand.count > 0 and lag.candidates.count > 0
    want_e = potential.energy(packed, c, q, q_hat, w, x_t, lag, x, cand)
    want_d = potential.gradient_hessian(packed, c, q, q_hat, w, x_t, lag, x, cand)
    x1 = sim.positions(q + 3e-3 * sim.free_dof[..., None] * torch.linspace(-1, 1, 12, dtype=q.dtype))
    steps = (x, x1, sim.faces, sim.edges)
    want_s = ipc.collision_free_steps(*steps, cand, sim.packed.vertex_env, 2)
    assert float(want_s.min()) < 1
    forces_args = (sim.rest, sim.faces, sim.edges, sim.vertex_body)
    tail = (2, sim.max_bodies, sim.dt, sim.dhat, sim.kappa, sim.eps_v)
    want_f = ipc.affine_contact_forces(x, x_t, *forces_args, cand, *lag, *tail)
    if form == "device":
        _use_device_form(monkeypatch)
    # Rows past the extents: padding, or real pairs that must not count (here: the lists again).
    fv, ee = cand
    doubled = ipc.BoundedCandidates(torch.cat([fv, fv]), torch.cat([ee, ee]), torch.tensor([fv.shape[0], ee.shape[0]]))
    lag_fv, lag_ee = lag.candidates
    lag_doubled = potential.FrictionLag(
        ipc.BoundedCandidates(torch.cat([lag_fv, lag_fv]), torch.cat([lag_ee, lag_ee]),
                              torch.tensor([lag_fv.shape[0], lag_ee.shape[0]])),
        torch.cat([lag.mu[:lag_fv.shape[0]], lag.mu[:lag_fv.shape[0]], lag.mu[lag_fv.shape[0]:],
                   lag.mu[lag_fv.shape[0]:]]))
    for bounded, bounded_lag in ((_bounded(cand, 300), lag), (doubled, lag_doubled),
                                 (_bounded(cand, 0, [10**9, 10**9]), lag)):
        assert torch.equal(potential.energy(packed, c, q, q_hat, w, x_t, bounded_lag, x, bounded), want_e)
        got = potential.gradient_hessian(packed, c, q, q_hat, w, x_t, bounded_lag, x, bounded)
        for a, b in zip(got, want_d):
            if form == "device":
                assert_rel(a, b)
            else:
                assert torch.equal(a, b)
        assert torch.equal(ipc.collision_free_steps(*steps, bounded, sim.packed.vertex_env, 2), want_s)
        got_f = ipc.affine_contact_forces(x, x_t, *forces_args, bounded, *bounded_lag, *tail)
        assert all(torch.equal(a, b) for a, b in zip(got_f, want_f))
    nothing = _bounded(cand, 3, [0, 0])
    assert torch.equal(ipc.collision_free_steps(*steps, nothing, sim.packed.vertex_env, 2), torch.ones_like(want_s))
    for extents, error in (([1, 2, 3], ValueError), ([-1, 0], ValueError), ([0.0, 1.0], TypeError)):
        bad = ipc.BoundedCandidates(*cand, torch.tensor(extents))
        with pytest.raises(error, match="extents"):
            potential.energy(packed, c, q, q_hat, w, x_t, lag, x, bad)
        with pytest.raises(error, match="extents"):
            ipc.collision_free_steps(*steps, bad, sim.packed.vertex_env, 2)


def test_fixed_step_bounded_by_the_lists_extents_changes_no_bit(monkeypatch):
    """The fixed step's lists carry their counts as extents (the ops skip the padding past them
    unread): the trajectory is the one without extents, bit for bit."""
    def run():
        sim = Stepper([scenes.bowl_shake(seed=3)], fixed_iterations=4, mu=0.4, on_failure="ignore")
        for _ in range(15):
            info = sim.step()
        return sim.q, info.contacts

    q, contacts = run()
    assert bool((contacts > 0).all())
    for module in ("contactnet.ops.ipc.affine_potential", "contactnet.ops.ipc.ccd"):
        monkeypatch.setattr(sys.modules[module], "candidate_extents", lambda *args: None)
    q2, _ = run()
    assert torch.equal(q, q2)


@pytest.mark.parametrize("scene, envs", [("stack", 2), ("bowl", 1)])
def test_fixed_step_with_the_device_form_follows_the_cpu_form(scene, envs, monkeypatch):
    """The fixed-iteration step (the GPU's flow: padded lists) with the device form of the sums
    follows the CPU form's trajectory within 1e-9 over 12 steps with contacts."""
    built = stacks_or_bowl(scene, envs)

    def run():
        sim = Stepper(built, fixed_iterations=4, mu=0.4, on_failure="ignore")
        for _ in range(12):
            info = sim.step()
        sim.validate()
        return sim.q, sim.contact_forces, info.contacts

    q, forces, contacts = run()
    assert bool((contacts > 0).all())
    _use_device_form(monkeypatch)
    q2, forces2, contacts2 = run()
    torch.testing.assert_close(q2, q, rtol=0, atol=1e-9)
    torch.testing.assert_close(forces2, forces, rtol=1e-6, atol=1e-9)
    assert torch.equal(contacts2, contacts)


def test_opcheck_with_extents():
    """The stepper's ops with extents pass torch's op checks (schema, fake kernels)."""
    sim = Stepper([tilted_stack(0.02), tilted_stack(0.05)], mu=0.4)
    for _ in range(5):
        sim.step()
    packed, c, q, q_hat, w, x_t, lag, x, cand = potential_inputs(sim, seed=3, pad=4)
    extents = {"extents": torch.tensor([cand.face_vertex.shape[0] - 4, cand.edge_edge.shape[0] - 4]),
               "lag_extents": torch.tensor([lag.candidates.face_vertex.shape[0], 0])}
    args = (q, q_hat, w, packed.M, packed.ortho_weight, x, packed.rest, packed.faces, packed.edges, packed.vertex_body,
            *cand, x_t, *lag.candidates, lag.mu, c.dt, c.dhat, c.kappa, c.eps_v)
    ops = torch.ops.contactnet
    torch.library.opcheck(ops.ipc_affine_potential, args, extents)
    torch.library.opcheck(ops.ipc_affine_potential_derivatives, args, {"keep_frictionless": True, **extents})
    torch.library.opcheck(ops.ipc_affine_contact_forces,
                          (x, x_t, packed.rest, packed.faces, packed.edges, packed.vertex_body, *cand, *lag.candidates,
                           lag.mu, 2, sim.max_bodies, c.dt, c.dhat, c.kappa, c.eps_v), extents)
    torch.library.opcheck(ops.ipc_contact_statistics, (x, packed.faces, packed.edges, packed.vertex_body, *cand, 2,
                                                       sim.max_bodies), {"extents": extents["extents"]})

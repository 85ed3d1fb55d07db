import math

import pytest
import torch

from contactnet.ops.mesh_query import hulls_separated
from contactnet.planning import CollisionChecker, CollisionWorld, choose_tau, hybrid_summary
from contactnet.planning.hybrid import certified_verdicts, defer, hybrid_verdict
from tests.ops.mesh_cases import box_mesh
from tests.planning.scenes import make_world, random_pairs, tiny_net

TAU = 1.0  # the tiny net makes errors on both sides of it (asserted), so a wrong mask shows
# Penetration estimates bisect until the whole batch is within penetration_tol (1e-3 by default),
# so a pair's value depends on its batch to that tolerance.
SD = {"atol": 1e-3, "rtol": 0}


def _pose(x=0.0, y=0.0):
    return torch.tensor([x, y, 0.0, 1, 0, 0, 0])


@pytest.fixture(scope="module")
def scene():
    """Two environments with two enabled obstacles each (one disabled slot in env 1) and 300 random
    queries of random meshes, positions around the obstacles, rotations uniform."""
    from contactnet.data.pairs import random_quaternions

    w = make_world(num_envs=2, max_obstacles=3)
    w.add_obstacle("s0", "star_prism", _pose(0.0), env=0)
    w.add_obstacle("t0", "t_bracket", _pose(0.25), env=0)
    w.add_obstacle("g1", "gear_prism", _pose(0.0), env=1)
    w.add_obstacle("l1", "l_bracket", _pose(0.25), env=1, enabled=False)
    w.add_obstacle("s1", "star_prism", _pose(0.0, 0.22), env=1)
    g = torch.Generator().manual_seed(1)
    n = 300
    ids = torch.randint(4, (n,), generator=g)
    low, high = torch.tensor([-0.2, -0.2, -0.1]), torch.tensor([0.45, 0.4, 0.1])
    xyz = low + (high - low) * torch.rand(n, 3, generator=g)
    poses = torch.cat([xyz, random_quaternions(n, g).float()], 1)
    env = torch.randint(2, (n,), generator=g)
    return w, ids, poses, env


def _three(world, model):
    return (CollisionChecker(world, "exact"), CollisionChecker(world, "locc", model),
            CollisionChecker(world, "hybrid", model, tau=TAU))


def test_pairwise_is_exact_where_deferred_free_where_hulls_are_apart_and_learned_elsewhere(world, trained):
    ids_a, ids_b, pa, pb = random_pairs(world, 400, seed=7)
    exact, learned, hybrid = _three(world, trained)
    e, l = exact.pairwise(ids_a, ids_b, pa, pb), learned.pairwise(ids_a, ids_b, pa, pb)
    # A (20, 20) batch: the result keeps the batch shape.
    h = hybrid.pairwise(ids_a.view(20, 20), ids_b.view(20, 20), pa.view(20, 20, 7), pb.view(20, 20, 7))
    h = type(h)(*(None if t is None else t.reshape(-1) for t in h))
    d, apart = h.deferred, hulls_separated(world.library, ids_a, ids_b, pa, pb)
    assert apart.any() and not e.colliding[apart].any()  # the certificate holds
    assert torch.equal(d, defer(l.logit, TAU, apart))
    kept = ~d & ~apart
    wrong = l.colliding != e.colliding
    assert wrong[d].any() and wrong[kept].any() and (wrong & apart).any()
    assert torch.equal(h.colliding[d], e.colliding[d])
    assert torch.equal(h.colliding[kept], l.colliding[kept]) and l.colliding[kept].all()
    assert not h.colliding[apart].any()
    assert h.colliding[e.colliding].all()  # never a missed collision
    assert torch.equal(h.probability[d | apart], e.probability[d | apart])
    torch.testing.assert_close(h.probability[kept], l.probability[kept])
    # The network runs only where the hulls are not certified apart; the exact check gives verdicts only.
    torch.testing.assert_close(h.logit[~apart], l.logit[~apart])
    assert h.logit[apart].isneginf().all() and h.signed_distance is None


def test_world_query_is_decided_per_obstacle_slot(scene, trained):
    w, ids, poses, env = scene
    exact, learned, hybrid = _three(w, trained)
    e, l, h = (c.world_query(ids, poses, env) for c in (exact, learned, hybrid))
    enabled = torch.isfinite(e.per_obstacle)  # the exact backend marks disabled slots +inf
    assert enabled.all(-1).logical_not().any() and enabled.any(-1).all()
    d, n = h.deferred, w.max_obstacles
    apart = hulls_separated(w.library, ids[:, None].expand(-1, n).reshape(-1), w.obstacle_mesh[env].reshape(-1),
                            poses[:, None].expand(-1, n, 7).reshape(-1, 7),
                            w.obstacle_pose[env].reshape(-1, 7)).reshape(d.shape)
    assert torch.equal(d, enabled & defer(l.per_obstacle, TAU, apart))
    assert not (d & apart).any()
    exact_slot, learned_slot = e.per_obstacle < 0, l.per_obstacle > 0
    wrong = enabled & (exact_slot != learned_slot)
    assert (wrong & d).any() and (wrong & ~d).any()
    expected = torch.where(d, exact_slot, learned_slot & ~apart).any(-1)
    assert torch.equal(h.colliding, expected)
    # Neither pure backend's verdict: the merge is per slot.
    assert not torch.equal(h.colliding, e.colliding) and not torch.equal(h.colliding, l.colliding)
    run = enabled & ~apart  # the slots the network saw
    assert run.any() and (enabled & apart).any()
    torch.testing.assert_close(h.per_obstacle[run], l.per_obstacle[run])
    assert h.per_obstacle[~run].isneginf().all() and h.signed_distance is None
    prob = torch.where(d, exact_slot.float(), torch.where(apart, 0.0, torch.sigmoid(l.per_obstacle))).max(-1).values
    torch.testing.assert_close(h.probability, prob)


def test_huge_tau_is_the_exact_backend_with_hull_certified_pairs_skipped(world, scene, trained):
    ids_a, ids_b, pa, pb = random_pairs(world, 200, seed=8)
    e = CollisionChecker(world, "exact").pairwise(ids_a, ids_b, pa, pb)
    h = CollisionChecker(world, "hybrid", trained, tau=1e9).pairwise(ids_a, ids_b, pa, pb)
    apart = hulls_separated(world.library, ids_a, ids_b, pa, pb)
    assert apart.any() and torch.equal(h.deferred, ~apart)
    assert torch.equal(h.colliding, e.colliding) and torch.equal(h.probability, e.probability)
    w, ids, poses, env = scene
    e = CollisionChecker(w, "exact").world_query(ids, poses, env)
    h = CollisionChecker(w, "hybrid", trained, tau=math.inf).world_query(ids, poses, env)
    assert not (h.deferred & ~torch.isfinite(e.per_obstacle)).any()  # no disabled slot
    assert torch.equal(h.colliding, e.colliding) and torch.equal(h.probability, e.probability)


def test_tiny_tau_keeps_every_collide_verdict_and_checks_every_free_one(world, scene, trained):
    ids_a, ids_b, pa, pb = random_pairs(world, 200, seed=8)
    e = CollisionChecker(world, "exact").pairwise(ids_a, ids_b, pa, pb)
    l = CollisionChecker(world, "locc", trained).pairwise(ids_a, ids_b, pa, pb)
    h = CollisionChecker(world, "hybrid", trained, tau=1e-6).pairwise(ids_a, ids_b, pa, pb)
    apart = hulls_separated(world.library, ids_a, ids_b, pa, pb)
    assert torch.equal(h.deferred, ~l.colliding & ~apart)
    assert torch.equal(h.colliding, (l.colliding & ~apart) | (h.deferred & e.colliding))
    assert h.colliding[e.colliding].all()
    w, ids, poses, env = scene
    l = CollisionChecker(w, "locc", trained).world_query(ids, poses, env)
    h = CollisionChecker(w, "hybrid", trained, tau=1e-6).world_query(ids, poses, env)
    assert not (h.deferred & (l.per_obstacle > 0)).any() and h.deferred.any()


def test_hybrid_takes_a_global_ocn_and_costs_like_the_learned_backend(scene):
    w, ids, poses, env = scene
    net = tiny_net("global_ocn", seed=1)  # untrained: the verdicts below do not depend on it
    e = CollisionChecker(w, "exact").world_query(ids[:40], poses[:40], env[:40])
    hybrid = CollisionChecker(w, "hybrid", net, tau=math.inf)
    assert torch.equal(hybrid.world_query(ids[:40], poses[:40], env[:40]).colliding, e.colliding)
    learned = CollisionChecker(w, "global_ocn", net)
    x = poses[:40].clone().requires_grad_()
    cost = hybrid.cost(ids[:40], x, env[:40])
    torch.testing.assert_close(cost, learned.cost(ids[:40], poses[:40], env[:40]))
    (g,) = torch.autograd.grad(cost.sum(), x)
    assert torch.isfinite(g).all() and g.abs().sum() > 0


def test_hybrid_arguments_raise_clear_errors(world, trained):
    for tau in (None, 0.0, -1.0, math.nan, "1", True):
        with pytest.raises(ValueError, match="tau: backend 'hybrid' needs a threshold tau > 0"):
            CollisionChecker(world, "hybrid", trained, tau=tau)
    with pytest.raises(ValueError, match="tau: only the 'hybrid' backend"):
        CollisionChecker(world, "locc", trained, tau=1.0)
    with pytest.raises(ValueError, match="tau: only the 'hybrid' backend"):
        CollisionChecker(world, "exact", tau=1.0)
    for model in (None, torch.nn.Linear(2, 1)):
        with pytest.raises(ValueError, match="model: backend 'hybrid' needs a LOCC or GlobalOCN"):
            CollisionChecker(world, "hybrid", model, tau=1.0)
    assert "tau=2.0" in repr(CollisionChecker(world, "hybrid", trained, tau=2))


# logit:   4    -3    2    -1    0.5  -0.2     learned verdict: T F T F T F
# label:   T     F    F     F    F     T       wrong "collide": 2, 0.5 (free verdicts are all checked)
LOGITS = torch.tensor([4.0, -3.0, 2.0, -1.0, 0.5, -0.2])
LABELS = torch.tensor([1, 0, 0, 0, 0, 1])
APART = torch.tensor([False, True, False, False, True, False])  # certified free: -3 and 0.5


@pytest.mark.parametrize("max_error, tau, tau_apart", [
    (0.5, 0.0, 0.0),  # 2/6 kept errors already allowed: only free verdicts are checked
    (0.34, 0.0, 0.0),
    (0.2, 2.0, 0.0),  # check 0.5 too: 1/6 (with the hulls, 0.5 is certified: 1/6 at tau 0)
    (0.1, 4.0, 4.0),  # the error at 2 must go too: 0/6
    (0.0, 4.0, 4.0),
])
def test_choose_tau_on_a_hand_made_example(max_error, tau, tau_apart):
    assert choose_tau(LOGITS, LABELS, max_error) == tau
    assert choose_tau(LOGITS.double().view(2, 3), LABELS.bool().view(2, 3), max_error) == tau
    assert choose_tau(LOGITS, LABELS, max_error, APART) == tau_apart


def test_choose_tau_ties_and_everything_deferred():
    # Tied logit 1: the wrong one cannot be checked without its tie, so tau moves to 2.
    assert choose_tau(torch.tensor([1.0, 1.0, 2.0]), torch.tensor([False, True, True]), 0.0) == 2.0
    # The most confident query is wrong: only deferring everything meets max_error = 0.
    assert choose_tau(torch.tensor([5.0, -1.0]), torch.tensor([0, 0]), 0.0) == math.inf
    assert choose_tau(torch.tensor([5.0, -1.0]), torch.tensor([0, 0]), 0.5) == 0.0


def test_choose_tau_is_the_smallest_candidate_meeting_the_target():
    g = torch.Generator().manual_seed(0)
    logits = (torch.randn(500, generator=g) * 3).round(decimals=1)  # rounded: many ties
    labels = (logits + torch.randn(500, generator=g) * 2) > 0
    candidates = torch.cat([torch.zeros(1), logits[logits > 0].unique()])
    for max_error in (0.0, 0.01, 0.05, 0.1, 0.2):
        tau = choose_tau(logits, labels, max_error)
        summary = hybrid_summary(logits, labels, tau)
        assert 1 - summary["accuracy"] <= max_error + 1e-12
        smaller = candidates[candidates < tau]
        for t in smaller[-3:].tolist():  # the largest smaller candidates fail (errors only grow below)
            assert 1 - hybrid_summary(logits, labels, t)["accuracy"] > max_error


def test_hybrid_summary_on_a_hand_made_example():
    s = hybrid_summary(LOGITS, LABELS, 1.0)  # checks -3, -1, 0.5, -0.2; keeps 4 (right) and 2 (wrong)
    expected = {"deferred": 4 / 6, "certified": 0.0, "accuracy": 5 / 6,
                "balanced_accuracy": (2 / 2 + 3 / 4) / 2,  # colliding: 0, 5 right; free: 1, 3, 4 of 1-4
                "missed_collisions": 0.0,
                "learned_accuracy": 3 / 6,
                "learned_balanced_accuracy": (1 / 2 + 2 / 4) / 2}
    assert s.keys() == expected.keys()
    for k, v in expected.items():
        assert s[k] == pytest.approx(v), k
    s = hybrid_summary(LOGITS, LABELS, 1.0, APART)  # -3 and 0.5 certified free, no exact check
    assert s["deferred"] == pytest.approx(2 / 6) and s["certified"] == pytest.approx(2 / 6)
    assert s["accuracy"] == pytest.approx(5 / 6)
    assert hybrid_summary(LOGITS, LABELS, 0.0)["deferred"] == pytest.approx(3 / 6)  # the free verdicts
    assert hybrid_summary(LOGITS, LABELS, math.inf)["accuracy"] == 1.0
    # One class only: the balanced accuracy is that class's recall.
    one = hybrid_summary(torch.tensor([1.0, -2.0, -3.0]), torch.tensor([0, 0, 0]), 0.5)
    assert one["learned_balanced_accuracy"] == pytest.approx(2 / 3) and one["balanced_accuracy"] == 2 / 3


def test_choose_tau_and_summary_reject_bad_input():
    with pytest.raises(ValueError, match="logits: expected at least one validation query"):
        choose_tau(torch.zeros(0), torch.zeros(0), 0.1)
    with pytest.raises(ValueError, match="labels: shape"):
        choose_tau(torch.zeros(3), torch.zeros(2), 0.1)
    with pytest.raises(ValueError, match="labels: expected bool or 0/1"):
        choose_tau(torch.zeros(2), torch.tensor([0, 2]), 0.1)
    with pytest.raises(ValueError, match="logits: expected a float tensor"):
        choose_tau(torch.zeros(2, dtype=torch.long), torch.zeros(2), 0.1)
    with pytest.raises(ValueError, match="logits: contains NaN"):
        choose_tau(torch.tensor([math.nan]), torch.zeros(1), 0.1)
    for bad in (-0.1, 1.5, math.nan, None):
        with pytest.raises(ValueError, match="max_error: expected an error rate in"):
            choose_tau(LOGITS, LABELS, bad)
    for bad in (-1.0, math.nan, None):
        with pytest.raises(ValueError, match="tau: expected a threshold >= 0"):
            hybrid_summary(LOGITS, LABELS, bad)


def test_defer_checks_every_free_verdict_unless_the_hulls_are_apart():
    logit = torch.tensor([-5.0, 5.0, -5.0, 0.5, -math.inf, 5.0])
    apart = torch.tensor([True, False, False, False, True, True])
    assert defer(logit, 1.0, apart).tolist() == [False, False, True, True, False, False]
    assert defer(logit, 1.0).tolist() == [True, False, True, True, False, False]
    # Neither a logit of exactly 0 (at tau 0) nor a NaN one is ever kept as a verdict.
    assert defer(torch.tensor([0.0, math.nan, 0.5]), 0.0).tolist() == [True, True, False]
    exact = torch.tensor([False, True, True, False, False, False])
    assert hybrid_verdict(logit, defer(logit, 1.0, apart), exact, apart).tolist() == [False, True, True, False, False, False]
    # A certified pair is free whatever its label says (a label within min_gap of touching):
    # choose_tau counts it against the budget, whatever tau.
    logits, labels = torch.tensor([-5.0, 2.0, 3.0]), torch.tensor([1, 1, 0])
    assert choose_tau(logits, labels, 0.0) == math.inf
    assert choose_tau(logits, labels, 0.4, torch.tensor([True, False, False])) == math.inf
    assert choose_tau(logits, labels, 0.7, torch.tensor([True, False, False])) == 0.0
    s = hybrid_summary(logits, labels, 0.0, torch.tensor([True, False, False]))
    assert s["missed_collisions"] == 1.0 and s["certified"] == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="separated: expected a bool tensor with one entry per logit"):
        choose_tau(logits, labels, 0.0, torch.tensor([1, 0, 0]))


def test_hybrid_checks_a_confident_free_verdict_exactly_and_certifies_pairs_apart(monkeypatch):
    """A small box deep inside a large one: no surfaces near, so a net of local crops may call it
    free with confidence. The hybrid must ask the exact kernels (containment: colliding). A pair
    far apart is free by its hulls, whatever the net says."""
    w = CollisionWorld(num_points=64)
    w.add_mesh("big", box_mesh((0.4, 0.4, 0.4)))
    w.add_mesh("small", box_mesh((0.02, 0.02, 0.02)))
    hybrid = CollisionChecker(w, "hybrid", tiny_net("locc"), tau=1.0)
    for value in (-10.0, 10.0):
        monkeypatch.setattr(hybrid, "_logits", lambda ids_a, *rest, v=value: torch.full(ids_a.shape, v))
        inside, apart = _pose(0.05), _pose(1.0)
        r = hybrid.pairwise(["big", "small", "big"], ["small", "big", "small"], torch.stack([_pose()] * 3),
                            torch.stack([inside, _pose(-0.05), apart]))
        assert r.colliding.tolist() == [True, True, False]
        assert r.deferred.tolist() == ([True, True, False] if value < 0 else [False, False, False])


def test_certified_verdicts_run_each_part_only_where_it_decides():
    """The network sees only live queries whose hulls are not certified apart; the exact check
    only the deferred ones; the verdicts are `hybrid_verdict`'s on the full logits."""
    g = torch.Generator().manual_seed(3)
    k = 400
    separated = torch.rand(k, generator=g) < 0.4
    live = torch.rand(k, generator=g) < 0.9
    full = torch.randn(k, generator=g) * 3
    truth = torch.rand(k, generator=g) < 0.5
    seen = {}

    def logits_at(rows):
        seen["net"] = rows
        return full[rows]

    def collide_at(rows):
        seen["exact"] = rows
        return truth[rows]

    colliding, logit, deferred = certified_verdicts(separated, logits_at, collide_at, TAU, torch.float32, live)
    assert torch.equal(seen["net"], torch.nonzero(live & ~separated).squeeze(1))
    assert torch.equal(seen["exact"], torch.nonzero(deferred).squeeze(1))
    run = live & ~separated
    assert torch.equal(logit[run], full[run]) and logit[~run].isneginf().all()
    want = defer(full, TAU, separated) & live
    assert torch.equal(deferred, want)
    assert torch.equal(colliding, hybrid_verdict(full, want, truth, separated) & live)
    # Nothing to run: neither part is called.
    seen.clear()
    colliding, logit, deferred = certified_verdicts(torch.ones(5, dtype=torch.bool), logits_at, collide_at, TAU,
                                                    torch.float64)
    assert not seen and not colliding.any() and not deferred.any() and logit.dtype == torch.float64

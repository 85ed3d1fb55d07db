"""The body-level broad phase (`contact_search.body_search`): the same candidate set as the
all-primitive search on random scenes, under fast (swept) motion and strongly non-rigid affine maps,
padded or not; a cost that follows the contacts, not the mesh sizes (traversal counters, no timing);
and stepper trajectories unchanged (within 1e-9) when it replaces the all-primitive search."""

import math

import pytest
import torch

from contactnet.geometry.mesh import Mesh
from contactnet.ops import ipc
from contactnet.sim import Scene, Stepper, box_mesh, contact_search, scenes
from contactnet.sim.contact_search import body_search, search, search_all_primitives, search_padded
from contactnet.sim.packed import pack_scenes
from contactnet.sim.scenes import procedural_mesh, shake_trajectory

NODE_PAIRS, BODY_PAIRS, BODY_PAIRS_NEAR = 2, 0, 1  # rows of BodySearch.stats


def pair_set(c: ipc.Candidates) -> tuple[set, set]:
    fv, ee = c
    return ({tuple(r) for r in fv.tolist() if r[0] >= 0}, {tuple(r) for r in ee.tolist() if r[0] >= 0})


def pair_keys(pairs: torch.Tensor) -> torch.Tensor:
    """A candidate list as a set, compared in bulk: the sorted unique keys (first << 32) | second
    of its rows, padding left out."""
    pairs = pairs[pairs[:, 0] >= 0]
    return torch.unique((pairs[:, 0] << 32) | pairs[:, 1])


def random_rotation(g: torch.Generator) -> torch.Tensor:
    Q, R = torch.linalg.qr(torch.randn(3, 3, generator=g, dtype=torch.float64))
    Q = Q * torch.sign(torch.diagonal(R))
    return Q if torch.det(Q) > 0 else -Q


def random_scene(seed: int) -> Scene:
    """Procedural bodies of mixed kinds (dynamic, static, kinematic) crowded into a 0.12 m box."""
    g = torch.Generator().manual_seed(seed)
    scene = Scene()
    families = ("mug", "ring", "l_bracket", "cup", "star_prism")
    for i in range(5):
        mesh = procedural_mesh(families[(seed + i) % len(families)], 100 * seed + i, 0.06)
        kind = ("dynamic", "dynamic", "static", "kinematic", "dynamic")[i]
        trajectory = shake_trajectory() if kind == "kinematic" else None
        scene.add_body(mesh, pose=[0.0, 0.0, 0.1 * i, 1, 0, 0, 0], kind=kind, trajectory=trajectory, mass=1.0)
    return scene


def random_states(packed, g: torch.Generator, spread: float, stretch: float) -> torch.Tensor:
    """(E, B, 12) affine states: random rotations times (when stretch > 0) a random non-rigid
    factor I + stretch·N, centres uniform in a box of side `spread` (bodies overlap and touch)."""
    E, B = packed.num_envs, packed.max_bodies
    q = torch.zeros(E, B, 12, dtype=torch.float64)
    for e in range(E):
        for b in range(B):
            A = random_rotation(g) @ (torch.eye(3, dtype=torch.float64)
                                      + stretch * torch.randn(3, 3, generator=g, dtype=torch.float64))
            q[e, b, 3:] = A.reshape(9)
            q[e, b, :3] = spread * (torch.rand(3, generator=g, dtype=torch.float64) - 0.5)
    return q


def both_searches(packed, q0, q1, reach):
    x0 = packed.positions(q0)
    x1 = None if q1 is None else packed.positions(q1)
    want = search_all_primitives(packed, x0, x1, reach)
    got = body_search(packed, x0, x1, reach, q0, q1)
    return want, got


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("reach", [2e-3, 1e-2])
def test_same_pairs_as_the_all_primitive_search_on_random_scenes(seed, reach):
    packed = pack_scenes([random_scene(seed), random_scene(seed + 10)], 0.5, 1e8, torch.device("cpu"))
    q = random_states(packed, torch.Generator().manual_seed(seed), spread=0.16, stretch=0.0)
    want, got = both_searches(packed, q, None, reach)
    assert want.count > 20  # the scenes are crowded: many pairs, several body pairs
    assert pair_set(got.candidates) == pair_set(want)
    # each pair once
    assert got.candidates.face_vertex.shape[0] == len(pair_set(want)[0])
    assert got.candidates.edge_edge.shape[0] == len(pair_set(want)[1])


def test_same_pairs_in_the_same_order_at_any_thread_count():
    """A near body pair with a large tree is traversed in parts (its subtrees) that the threads
    take in turn; the parts' lists are joined in part order, so the threads change nothing."""
    packed = pack_scenes([random_scene(0), random_scene(1)], 0.5, 1e8, torch.device("cpu"))
    roots = packed.trees.root[packed.trees.root >= 0]
    assert int(packed.trees.node[roots, 2].max()) > 256  # some trees are split
    q0 = random_states(packed, torch.Generator().manual_seed(4), spread=0.16, stretch=0.0)
    q1 = q0 + 1e-3 * torch.randn(q0.shape, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    x0, x1 = packed.positions(q0), packed.positions(q1)
    before = torch.get_num_threads()
    try:
        runs = []
        for threads in (1, 2, 3):
            torch.set_num_threads(threads)
            runs.append([body_search(packed, x0, x, 1e-2, q0, q) for x, q in ((None, None), (x1, q1))])
    finally:
        torch.set_num_threads(before)
    for run in runs[1:]:
        for got, want in zip(run, runs[0]):
            assert torch.equal(got.candidates.face_vertex, want.candidates.face_vertex)
            assert torch.equal(got.candidates.edge_edge, want.candidates.edge_edge)
            assert torch.equal(got.stats, want.stats)
    assert runs[0][0].candidates.count > 100


def test_trees_are_the_same_at_any_thread_count():
    """The trees are built in parallel, one per body and kind, then joined in (kind, body) order:
    the same arrays on any number of threads, each body's root where its rows begin."""
    packed = pack_scenes([random_scene(0), random_scene(1)], 0.5, 1e8, torch.device("cpu"))
    before = torch.get_num_threads()
    try:
        built = []
        for threads in (1, 3):
            torch.set_num_threads(threads)
            built.append(ipc.body_trees(packed.rest, packed.faces, packed.edges, packed.vertex_body,
                                        packed.num_envs * packed.max_bodies))
    finally:
        torch.set_num_threads(before)
    assert all(torch.equal(a, b) for a, b in zip(*built))
    box, node, prim, root = built[0]
    assert torch.equal(torch.sort(prim[:packed.rest.shape[0]]).values, torch.arange(packed.rest.shape[0]))
    for kind in range(3):
        rows = root[:, kind][root[:, kind] >= 0]
        assert bool((rows[1:] > rows[:-1]).all())  # one tree after another
        first, count = node[rows, 1], node[rows, 2]
        assert bool((first[1:] == first[:-1] + count[:-1]).all())  # each over its body's slots


@pytest.mark.parametrize("body_level", [True, False])
def test_active_environments_keep_exactly_their_pairs(body_level):
    """search(active=...) returns the full search's pairs of the active environments, no others
    (the adaptive step searches only the environments still iterating)."""
    packed = pack_scenes([random_scene(s) for s in (0, 1, 2)], 0.5, 1e8, torch.device("cpu"))
    g = torch.Generator().manual_seed(5)
    q0 = random_states(packed, g, spread=0.16, stretch=0.0)
    q1 = q0 + 0.01 * torch.randn(q0.shape, generator=g, dtype=torch.float64)
    x0, x1 = packed.positions(q0), packed.positions(q1)
    states = (q0, q1) if body_level else (None, None)
    full_fv, full_ee = (pair_keys(c) for c in search(packed, x0, x1, 2e-3, *states))
    active = torch.tensor([True, False, True])
    got_fv, got_ee = (pair_keys(c) for c in search(packed, x0, x1, 2e-3, *states, active=active))
    env = packed.vertex_env
    keep_fv = full_fv[active[env[full_fv >> 32]]]  # a face-vertex pair's environment: its vertex's
    keep_ee = full_ee[active[env[packed.edges[full_ee >> 32, 0]]]]
    assert len(keep_fv) < len(full_fv) and len(keep_fv) and len(keep_ee)  # each environment has pairs
    assert torch.equal(got_fv, keep_fv) and torch.equal(got_ee, keep_ee)


def small_turn(g: torch.Generator, angle: float) -> torch.Tensor:
    axis = torch.randn(3, generator=g, dtype=torch.float64)
    axis = axis / axis.norm()
    K = torch.tensor([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]], dtype=torch.float64)
    return torch.linalg.matrix_exp(angle * K)


@pytest.mark.parametrize("seed", [0, 1])
def test_same_pairs_under_fast_motion(seed):
    """Swept boxes: each body moves by up to 3 cm and turns by 0.4 rad (23°) in the step."""
    packed = pack_scenes([random_scene(seed), random_scene(seed + 3)], 0.5, 1e8, torch.device("cpu"))
    g = torch.Generator().manual_seed(seed)
    q0 = random_states(packed, g, spread=0.25, stretch=0.0)
    q1 = q0.clone()
    for e in range(packed.num_envs):
        for b in range(packed.max_bodies):
            q1[e, b, 3:] = (small_turn(g, 0.4) @ q0[e, b, 3:].reshape(3, 3)).reshape(9)
    q1[..., :3] += 0.03 * (torch.rand(q0[..., :3].shape, generator=g, dtype=torch.float64) - 0.5)
    want, got = both_searches(packed, q0, q1, 1e-3)
    assert want.count > 100
    assert pair_set(got.candidates) == pair_set(want)


@pytest.mark.parametrize("stretch", [0.3, 0.8])
def test_same_pairs_with_strongly_non_rigid_maps(stretch):
    packed = pack_scenes([random_scene(4)], 0.5, 1e8, torch.device("cpu"))
    g = torch.Generator().manual_seed(7)
    q0 = random_states(packed, g, spread=0.1, stretch=stretch)
    q1 = q0.clone()  # stretched further and moved
    for b in range(packed.max_bodies):
        q1[0, b, 3:] = (q0[0, b, 3:].reshape(3, 3) @ (torch.eye(3, dtype=torch.float64) + 0.2 * stretch * torch.randn(
            3, 3, generator=g, dtype=torch.float64))).reshape(9)
    q1[..., :3] += 0.02 * (torch.rand(q0[..., :3].shape, generator=g, dtype=torch.float64) - 0.5)
    sv = torch.linalg.svdvals(q0[..., 3:].reshape(-1, 3, 3))
    assert float((sv[:, 0] / sv[:, 2]).max()) > 2  # far from a rotation
    for q1_or_none, reach in ((None, 5e-3), (q1, 1e-3)):
        want, got = both_searches(packed, q0, q1_or_none, reach)
        assert want.count > 20
        assert pair_set(got.candidates) == pair_set(want)


def test_padded_body_search_matches_and_reports_overflow():
    packed = pack_scenes([random_scene(5), random_scene(6)], 0.5, 1e8, torch.device("cpu"))
    q = random_states(packed, torch.Generator().manual_seed(5), spread=0.16, stretch=0.1)
    x = packed.positions(q)
    want = search_all_primitives(packed, x, None, 5e-3)
    n = max(want.face_vertex.shape[0], want.edge_edge.shape[0])
    got = search_padded(packed, x, None, 5e-3, n, q)
    assert not bool(got.overflow) and pair_set(got.candidates) == pair_set(want)
    assert bool(search_padded(packed, x, None, 5e-3, n - 1, q).overflow)
    # the compacted `search` runs the body-level search when it has the states
    assert pair_set(search(packed, x, None, 5e-3, q)) == pair_set(want)


@pytest.mark.parametrize("swept", [False, True])
def test_padded_body_search_lists_the_compact_pairs_in_order(swept):
    """The fixed-capacity lists hold the compact lists' pairs in the same order at any thread
    count; a short capacity keeps the first rows of each kind."""
    packed = pack_scenes([random_scene(0), random_scene(1)], 0.5, 1e8, torch.device("cpu"))
    q0 = random_states(packed, torch.Generator().manual_seed(4), spread=0.16, stretch=0.05)
    q1 = q0 + 1e-3 * torch.randn(q0.shape, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    q1 = q1 if swept else None
    x0, x1 = packed.positions(q0), None if q1 is None else packed.positions(q1)
    xs0, qs0, xs1, qs1 = contact_search._shifted(packed, x0, x1, q0, q1)
    args = (xs0, packed.faces, packed.edges, packed.trees, qs0, packed.body_pairs, 1e-2)
    kwargs = dict(vertices_t1=xs1, q_t1=qs1, vertex_body=packed.vertex_group)
    want = ipc.body_candidates(*args, **kwargs).candidates
    counts = [want.face_vertex.shape[0], want.edge_edge.shape[0]]
    assert min(counts) > 50
    before = torch.get_num_threads()
    try:
        for threads, capacity in ((1, max(counts) + 3), (3, max(counts) + 3), (2, min(counts) - 7)):
            torch.set_num_threads(threads)
            got = ipc.body_candidates_padded(*args, capacity, **kwargs)
            assert got.counts.tolist() == counts and bool(got.overflow) == (capacity < max(counts))
            for rows, kept in zip(got.candidates, want):
                n = min(capacity, kept.shape[0])
                assert torch.equal(rows[:n], kept[:n]) and bool((rows[n:] == -1).all())
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("shared_motion", [False, True])
def test_pruning_search_lists_the_pruned_pairs_in_order(shared_motion):
    """prune=True: the pairs of the swept search that `prune_candidates` keeps, in the same order,
    compact and padded (counts of the kept pairs), on fast random motion and on a motion most
    pairs share (a translation of 3 cm on top: the shaken bowl's case)."""
    packed = pack_scenes([random_scene(2), random_scene(3)], 0.5, 1e8, torch.device("cpu"))
    g = torch.Generator().manual_seed(8)
    q0 = random_states(packed, g, spread=0.16, stretch=0.05)
    q1 = q0 + 2e-3 * torch.randn(q0.shape, generator=g, dtype=torch.float64)
    if shared_motion:
        q1[..., :3] += torch.tensor([0.03, 0.0, -0.01], dtype=torch.float64)
    x0, x1 = packed.positions(q0), packed.positions(q1)
    xs0, qs0, xs1, qs1 = contact_search._shifted(packed, x0, x1, q0, q1)
    reach = 1e-3
    args = (xs0, packed.faces, packed.edges, packed.trees, qs0, packed.body_pairs, reach)
    kwargs = dict(vertices_t1=xs1, q_t1=qs1, vertex_body=packed.vertex_group)
    swept = ipc.body_candidates(*args, **kwargs).candidates
    want = ipc.prune_candidates(xs0, packed.faces, packed.edges, swept, reach, vertices_t1=xs1)
    assert swept.count > want.count > 0
    got = ipc.body_candidates(*args, **kwargs, prune=True).candidates
    assert all(torch.equal(a, b) for a, b in zip(got, want))
    padded = ipc.body_candidates_padded(*args, swept.count, **kwargs, prune=True)
    assert padded.counts.tolist() == [want.face_vertex.shape[0], want.edge_edge.shape[0]]
    for rows, kept in zip(padded.candidates, want):
        assert torch.equal(rows[:kept.shape[0]], kept) and bool((rows[kept.shape[0]:] == -1).all())
    torch.library.opcheck(torch.ops.contactnet.ipc_body_candidates_padded,
                          (xs0, xs1, packed.faces, packed.edges, packed.vertex_group, qs0, qs1, packed.body_pairs,
                           *packed.trees, reach, 64, True))
    # A static search's filter already is the pruning's test at reach.
    static = (xs0, packed.faces, packed.edges, packed.trees, qs0, packed.body_pairs, 5e-3)
    static_want = ipc.body_candidates(*static, vertex_body=packed.vertex_group).candidates
    static_got = ipc.body_candidates(*static, vertex_body=packed.vertex_group, prune=True).candidates
    assert all(torch.equal(a, b) for a, b in zip(static_got, static_want))


# ---- cost: traversal counters, no timing -----------------------------------------------------


def plate(n: int, size: float = 0.4) -> Mesh:
    """A flat n × n grid of 2n² triangles, size × size metres, in the plane z = 0."""
    s = torch.linspace(-size / 2, size / 2, n + 1, dtype=torch.float64)
    X, Y = torch.meshgrid(s, s, indexing="ij")
    v = torch.stack([X.reshape(-1), Y.reshape(-1), torch.zeros((n + 1) ** 2, dtype=torch.float64)], 1)
    i = torch.arange(n)
    a = (i[:, None] * (n + 1) + i[None, :]).reshape(-1)
    quads = torch.stack([a, a + n + 1, a + n + 2, a + 1], 1)
    faces = torch.cat([quads[:, [0, 1, 2]], quads[:, [0, 2, 3]]])
    return Mesh(v, faces, name=f"plate{n}")


CUBE = box_mesh((0.05, 0.05, 0.05), name="cube")


def cube_on_plate(n: int, far_plate: int | None = None) -> Stepper:
    """A cube 0.5 mm above an n × n plate (static); optionally a far_plate × far_plate static plate
    a metre away, touching nothing."""
    scene = Scene()
    scene.add_body(plate(n), kind="static", mass=1.0, name="plate")
    scene.add_body(CUBE, pose=[0.013, 0.007, 0.0255, 1, 0, 0, 0])
    if far_plate is not None:
        scene.add_body(plate(far_plate), pose=[3.0, 0, 0, 1, 0, 0, 0], kind="static", mass=1.0, name="far")
    return Stepper(scene, dhat=1e-3)


def node_pairs(sim: Stepper, reach: float) -> tuple[torch.Tensor, int]:
    x = sim.positions(sim.q)
    found = body_search(sim.packed, x, None, reach, sim.q)
    return found.stats, found.candidates.count


def test_traversal_follows_contacts_not_mesh_size():
    """A cube face down on a plate 100× finer: the pairs within d̂ (plate vertices under the cube)
    grow with the resolution, and the node pairs traversed grow no faster than they do (a bounded
    number per pair found), nowhere near the 100× of the plate's size; the trees' depth is what a
    finer mesh adds."""
    coarse, fine = cube_on_plate(20), cube_on_plate(200)  # 800 and 80,000 plate triangles
    assert fine.faces.shape[0] > 50 * coarse.faces.shape[0]
    (s_coarse, n_coarse), (s_fine, n_fine) = node_pairs(coarse, 1e-3), node_pairs(fine, 1e-3)
    assert n_coarse >= 10 and n_fine >= 10
    per_pair_coarse, per_pair_fine = int(s_coarse[NODE_PAIRS]) / n_coarse, int(s_fine[NODE_PAIRS]) / n_fine
    assert per_pair_coarse < 16 and per_pair_fine < 16
    assert int(s_fine[NODE_PAIRS]) / int(s_coarse[NODE_PAIRS]) < 2 * n_fine / n_coarse
    s_more, n_more = node_pairs(fine, 1e-2)  # more pairs within a larger reach: more node pairs
    assert n_more > 4 * n_fine and int(s_more[NODE_PAIRS]) > int(s_fine[NODE_PAIRS])


def test_a_far_100k_triangle_body_costs_no_traversal():
    """A 100k-triangle static plate 3 m from everything adds one body-pair box test per search and
    not one node pair; the stepper's steps traverse exactly as without it."""
    near, with_far = cube_on_plate(20), cube_on_plate(20, far_plate=224)
    assert with_far.faces.shape[0] - near.faces.shape[0] >= 100_000
    s_near, n_near = node_pairs(near, 1e-3)
    s_far, n_far = node_pairs(with_far, 1e-3)
    assert n_far == n_near
    assert int(s_far[NODE_PAIRS]) == int(s_near[NODE_PAIRS])
    assert int(s_far[BODY_PAIRS]) == int(s_near[BODY_PAIRS]) + 1  # cube–far plate: tested, culled
    assert int(s_far[BODY_PAIRS_NEAR]) == int(s_near[BODY_PAIRS_NEAR])
    # over whole steps (every search of a step, swept ones included)
    counts = []
    for sim in (near, with_far):
        seen = []
        real = contact_search.body_search

        def counting(*args, **kwargs):
            found = real(*args, **kwargs)
            seen.append(int(found.stats[NODE_PAIRS]))
            return found

        contact_search.body_search = counting
        try:
            for _ in range(3):
                sim.step()
        finally:
            contact_search.body_search = real
        counts.append(seen)
    assert counts[0] and counts[0] == counts[1]


# ---- stepper trajectories --------------------------------------------------------------------


def run(scene_list, steps: int, body_level: bool, monkeypatch, **kwargs) -> torch.Tensor:
    if not body_level:
        monkeypatch.setattr(contact_search, "_body_level", lambda *a: False)
    sim = Stepper(scene_list, on_failure="ignore", **kwargs)
    qs = []
    for _ in range(steps):
        sim.step()
        qs.append(sim.q.clone())
    monkeypatch.undo()
    return torch.stack(qs)


@pytest.mark.parametrize("name", ["stack", "bowl", "mixed_envs", "fixed"])
def test_stepper_trajectories_unchanged(name, monkeypatch):
    """The candidate sets are the same, only their order differs (so sums round differently)."""
    if name == "stack":
        args, steps, kw = [scenes.cube_stack(count=4)], 15, {}
    elif name == "bowl":
        args, steps, kw = [scenes.bowl_shake(seed=0)], 12, {}
    elif name == "mixed_envs":
        args, steps, kw = [scenes.cube_stack(count=3), scenes.ring_on_peg()], 10, {}
    else:
        args, steps, kw = [scenes.cube_stack(count=3)], 10, {"fixed_iterations": 6}
    old = run(args, steps, False, monkeypatch, **kw)
    new = run(args, steps, True, monkeypatch, **kw)
    assert float((new - old).abs().max()) <= 1e-9
    assert float((old[-1] - old[0]).abs().max()) > 1e-6  # the bodies moved


def test_body_search_needs_the_trees_and_matching_states():
    sim = Stepper([scenes.cube_stack(count=2)])
    x = sim.positions(sim.q)
    with pytest.raises(TypeError, match="trees"):
        ipc.body_candidates(x, sim.faces, sim.edges, None, sim.q.reshape(-1, 12), sim.packed.body_pairs, 1e-3)
    with pytest.raises(ValueError, match="reach"):
        body_search(sim.packed, x, None, 0.0, sim.q)
    with pytest.raises(RuntimeError, match="q_t0"):
        ipc.body_candidates(x, sim.faces, sim.edges, sim.packed.trees, sim.q.reshape(-1, 6), sim.packed.body_pairs,
                            1e-3)
    with pytest.raises(RuntimeError, match="q_t1"):
        ipc.body_candidates(x, sim.faces, sim.edges, sim.packed.trees, sim.q.reshape(-1, 12), sim.packed.body_pairs,
                            1e-3, vertices_t1=x)
    # without the states, `search` keeps the all-primitive search (its tests call it that way)
    assert math.isfinite(search(sim.packed, x, None, 1e-3).count)

import numpy as np
import pytest
import torch

from contactnet.models.checkpoint import HYBRID_TAU_KEY
from contactnet.ops import mesh_collide
from contactnet.ops.mesh_query import hulls_separated
from contactnet.planning import CollisionChecker
from contactnet.planning.hybrid import defer
from tests.planning.scenes import make_world, random_pairs, tiny_net

IDENTITY = [0.0, 0, 0, 1, 0, 0, 0]


def _pose(x=0.0, y=0.0, z=0.0, dtype=torch.float32):
    return torch.tensor([x, y, z, 1, 0, 0, 0], dtype=dtype)


def test_learned_and_exact_agree_on_clear_cases(world, trained):
    exact = CollisionChecker(world, "exact")
    learned = CollisionChecker(world, "locc", trained)
    ids_a, ids_b, pa, pb = random_pairs(world, 600, seed=7)  # not the training seed
    e = exact.pairwise(ids_a, ids_b, pa, pb)
    p = learned.pairwise(ids_a, ids_b, pa, pb)
    far, deep = e.signed_distance > 0.05, e.signed_distance < -0.02
    assert far.sum() > 50 and deep.sum() > 50
    assert (~p.colliding[far]).float().mean() >= 0.97
    assert p.colliding[deep].float().mean() >= 0.93
    assert bool((e.colliding == (e.signed_distance < 0)).all())


def test_exact_signed_distance_values(world):
    exact = CollisionChecker(world, "exact", penetration_tol=1e-4)
    ids_a, ids_b, pa, pb = random_pairs(world, 300, seed=3)
    r = exact.pairwise(ids_a, ids_b, pa, pb)
    lib = world.library
    assert torch.equal(r.colliding, mesh_collide(lib, ids_a, ids_b, pa, pb))
    # The values-only path (no witness points for colliding pairs) gives the same values.
    with_grad = exact.pairwise(ids_a, ids_b, pa.clone().requires_grad_(), pb).signed_distance
    torch.testing.assert_close(with_grad.detach(), r.signed_distance)
    # Penetration estimate: moving B back along the centre line by -sd separates, by -sd - 2 tol not.
    hit = r.colliding
    u = pa[hit, :3] - pb[hit, :3]
    u = u / u.norm(dim=1, keepdim=True)
    t = -r.signed_distance[hit]
    out = pb[hit].clone()
    out[:, :3] -= (t + 1e-5)[:, None] * u
    assert not bool(mesh_collide(lib, ids_a[hit], ids_b[hit], pa[hit], out).any())
    back = pb[hit].clone()
    back[:, :3] -= (t - 3e-4).clamp_min(0)[:, None] * u
    assert bool(mesh_collide(lib, ids_a[hit], ids_b[hit], pa[hit], back).all())


def test_exact_gradient_matches_finite_differences(world64):
    exact = CollisionChecker(world64, "exact")
    ids_a, ids_b, pa, pb = random_pairs(world64, 64, seed=11)
    sd0 = exact.pairwise(ids_a, ids_b, pa, pb).signed_distance
    keep = sd0 > 0.005  # separated, away from contact
    ids_a, ids_b, pa, pb = ids_a[keep][:12], ids_b[keep][:12], pa[keep][:12], pb[keep][:12]
    x = torch.cat([pa, pb], 1).requires_grad_()
    sd = exact.pairwise(ids_a, ids_b, x[:, :7], x[:, 7:]).signed_distance
    (grad,) = torch.autograd.grad(sd.sum(), x)
    h = 1e-6
    fd = torch.empty_like(x)
    with torch.no_grad():
        for k in range(14):
            e = torch.zeros_like(x)
            e[:, k] = h
            plus = exact.pairwise(ids_a, ids_b, (x + e)[:, :7], (x + e)[:, 7:]).signed_distance
            minus = exact.pairwise(ids_a, ids_b, (x - e)[:, :7], (x - e)[:, 7:]).signed_distance
            fd[:, k] = (plus - minus) / (2 * h)
    torch.testing.assert_close(grad, fd, atol=2e-6, rtol=1e-4)
    # Translations: d/dt_A = n, d/dt_B = -n, unit vectors.
    torch.testing.assert_close(grad[:, :3].norm(dim=1), torch.ones(len(grad), dtype=torch.float64))
    torch.testing.assert_close(grad[:, :3], -grad[:, 7:10])


def _central_differences(f, x: torch.Tensor, h: float) -> torch.Tensor:
    """(Q, D) derivatives of f: (Q, D) -> (Q,) row by row, one coordinate at a time."""
    fd = torch.empty_like(x)
    with torch.no_grad():
        for k in range(x.shape[1]):
            e = torch.zeros_like(x)
            e[:, k] = h
            fd[:, k] = (f(x + e) - f(x - e)) / (2 * h)
    return fd


def test_exact_gradient_matches_finite_differences_when_penetrating(world64):
    """The penetration estimate -t (bisection along the centre line, here to 1e-10 m) is piecewise
    smooth: away from changes of the touching features its gradient is its derivative, including
    the turn of the centre line as the poses move."""
    exact = CollisionChecker(world64, "exact", penetration_tol=1e-10)
    ids_a, ids_b, pa, pb = random_pairs(world64, 64, seed=11)
    sd0 = exact.pairwise(ids_a, ids_b, pa, pb).signed_distance
    keep = sd0 < -0.003  # penetrating, away from the contact boundary
    ids_a, ids_b, pa, pb = ids_a[keep][:12], ids_b[keep][:12], pa[keep][:12], pb[keep][:12]
    x = torch.cat([pa, pb], 1).requires_grad_()
    sd = exact.pairwise(ids_a, ids_b, x[:, :7], x[:, 7:]).signed_distance
    assert bool((sd < 0).all())
    (grad,) = torch.autograd.grad(sd.sum(), x)

    def f(y):
        return exact.pairwise(ids_a, ids_b, y[:, :7], y[:, 7:]).signed_distance

    fd, fd_fine = _central_differences(f, x, 1e-5), _central_differences(f, x, 1e-6)
    scale = 1 + fd.abs()
    smooth = ((fd - fd_fine).abs() <= 1e-4 * scale).all(1)  # no feature change within ±1e-5
    assert int(smooth.sum()) >= 6
    assert bool(((grad - fd).abs() <= 1e-4 * scale)[smooth].all()), (grad - fd)[smooth].abs().max()


@pytest.mark.parametrize("kind", ["locc", "global_ocn"])
def test_learned_logit_and_cost_pass_gradcheck_in_float64(world64, kind):
    net = tiny_net("locc" if kind == "locc" else "global").double()
    learned = CollisionChecker(world64, kind, net)
    ids_a, ids_b, pa, pb = random_pairs(world64, 6, seed=5, spread=0.8)
    assert learned.embeddings().features.dtype == torch.float64

    def logit(poses_a, poses_b):
        return learned.pairwise(ids_a, ids_b, poses_a, poses_b).logit

    assert torch.autograd.gradcheck(logit, (pa.clone().requires_grad_(), pb.clone().requires_grad_()),
                                    eps=1e-6, atol=1e-6, rtol=1e-4)
    w = make_world(max_obstacles=2, dtype=torch.float64)
    w.add_obstacle("o1", "star_prism", _pose(0.0, dtype=torch.float64))
    w.add_obstacle("o2", "gear_prism", _pose(0.06, 0.02, dtype=torch.float64))
    on_w = CollisionChecker(w, kind, net, eta=0.05)
    poses = torch.stack([_pose(x, 0.01, dtype=torch.float64) for x in (-0.05, 0.0, 0.03, 0.1)])
    poses[:, 3:] = torch.tensor([0.9, 0.3, -0.2, 0.1], dtype=torch.float64)
    assert torch.autograd.gradcheck(lambda p: on_w.cost("l_bracket", p), (poses.requires_grad_(),),
                                    eps=1e-6, atol=1e-6, rtol=1e-4)


def test_exact_gradient_inside_collision_pushes_apart(world):
    exact = CollisionChecker(world, "exact")
    pa = _pose(0.01).repeat(4, 1).requires_grad_()
    pb = _pose().repeat(4, 1)
    sd = exact.pairwise(["l_bracket", "star_prism", "t_bracket", "gear_prism"], "star_prism", pa, pb).signed_distance
    assert bool((sd < 0).all())
    (g,) = torch.autograd.grad(sd.sum(), pa)
    step = pa.detach().clone()
    step[:, :3] += 0.01 * g[:, :3] / g[:, :3].norm(dim=1, keepdim=True)
    after = exact.pairwise(["l_bracket", "star_prism", "t_bracket", "gear_prism"], "star_prism", step, pb)
    assert bool((after.signed_distance > sd.detach()).all())


def test_learned_gradient_flows_to_poses(world, trained):
    learned = CollisionChecker(world, "locc", trained)
    poses = torch.tensor([[0.05, 0.0, 0.0, 1, 0, 0, 0]] * 3, requires_grad=True)
    r = learned.pairwise("t_bracket", "l_bracket", poses, torch.tensor([IDENTITY] * 3))
    (g,) = torch.autograd.grad(r.logit.sum(), poses)
    assert torch.isfinite(g).all() and g[:, :3].abs().sum() > 0
    assert not any(p.requires_grad for p in trained.parameters())


@pytest.mark.parametrize("backend", ["exact", "locc"])
def test_multi_environment_routing(world, trained, backend):
    from tests.planning.scenes import make_world

    w = make_world(num_envs=3, max_obstacles=3)
    w.add_obstacle("e0", "star_prism", _pose(0.0), env=0)
    w.add_obstacle("e1", "star_prism", _pose(2.0), env=1)
    w.add_obstacle("e2a", "t_bracket", _pose(-2.0), env=2)
    w.add_obstacle("e2b", "gear_prism", _pose(0.0), env=2, enabled=False)
    checker = CollisionChecker(w, backend, trained if backend == "locc" else None)
    poses = torch.stack([_pose(0.0), _pose(0.0), _pose(0.0), _pose(2.0), _pose(-2.0)])
    env = torch.tensor([0, 1, 2, 1, 2])
    r = checker.world_query("l_bracket", poses, env)
    assert r.colliding.tolist() == [True, False, False, True, True]
    assert r.per_obstacle.shape == (5, 3)
    # Per obstacle values equal the pairwise query against that env's obstacle; disabled slots masked.
    pair = checker.pairwise("l_bracket", "star_prism", poses[[0, 1, 3]],
                            torch.stack([_pose(0.0), _pose(2.0), _pose(2.0)]))
    value = pair.signed_distance if backend == "exact" else pair.logit
    torch.testing.assert_close(r.per_obstacle[[0, 1, 3], 0], value)
    masked = float("inf") if backend == "exact" else float("-inf")
    assert bool((r.per_obstacle[4, 1:] == masked).all()) and bool((r.per_obstacle[0, 1:] == masked).all())


@pytest.mark.parametrize("backend", ["exact", "locc"])
def test_pose_update_by_name_without_reallocation(trained, backend):
    from tests.planning.scenes import make_world

    w = make_world(num_envs=1, max_obstacles=2)
    w.add_obstacle("box", "gear_prism", _pose(0.0))
    checker = CollisionChecker(w, backend, trained if backend == "locc" else None)
    q = _pose(0.0)[None]
    assert checker.world_query("star_prism", q).colliding.item()
    ptrs = [t.data_ptr() for t in w.buffers()]
    table = checker.embeddings() if backend == "locc" else None
    w.set_pose("box", _pose(1.0))
    assert not checker.world_query("star_prism", q).colliding.item()
    w.set_pose("box", _pose(0.0))
    w.disable("box")
    assert not checker.world_query("star_prism", q).colliding.item()
    assert checker.cost("star_prism", q).item() == 0.0
    w.enable("box")
    assert checker.world_query("star_prism", q).colliding.item()
    assert [t.data_ptr() for t in w.buffers()] == ptrs
    if table is not None:
        assert checker.embeddings() is table  # embeddings cached across pose updates


def test_cost_descends_out_of_collision(world):
    from tests.planning.scenes import make_world

    w = make_world(num_envs=1, max_obstacles=2)
    w.add_obstacle("o", "t_bracket", _pose(0.0))
    checker = CollisionChecker(w, "exact", eta=0.02)
    pose = _pose(0.03, 0.01)[None].requires_grad_()
    opt = torch.optim.Adam([pose], lr=0.01)
    start = checker.cost("l_bracket", pose).item()
    for _ in range(25):
        cost = checker.cost("l_bracket", pose).sum()
        opt.zero_grad()
        cost.backward()
        opt.step()
    assert start > 0.02 and checker.cost("l_bracket", pose).item() < 0.2 * start


def test_numpy_and_list_poses_are_taken_as_tensors(world, trained):
    """Poses as users hold them (numpy float64, nested lists) give what the same tensor gives."""
    poses = torch.stack([_pose(0.05), _pose(0.3, 0.1)]).double()
    for checker in (CollisionChecker(world, "exact"), CollisionChecker(world, "locc", trained)):
        assert torch.equal(checker.pairwise("l_bracket", "l_bracket", poses.numpy(), poses.tolist()).colliding,
                           checker.pairwise("l_bracket", "l_bracket", poses, poses).colliding)
        torch.testing.assert_close(checker.cost("l_bracket", poses.float().numpy()), checker.cost("l_bracket", poses.float()))
        got, want = checker.world_query("l_bracket", poses.tolist()), checker.world_query("l_bracket", poses)
        assert torch.equal(got.colliding, want.colliding)
        ids = np.full(2, int(world.mesh_ids("l_bracket")), dtype=np.int32)  # numpy mesh ids too
        assert torch.equal(checker.world_query(ids, poses.numpy()).colliding, want.colliding)
        with pytest.raises(ValueError, match=r"poses: expected a tensor or array of shape \(\.\.\., 7\)"):
            checker.world_query("l_bracket", "identity")


def test_bad_input_raises_clear_errors(world, trained):
    for checker in (CollisionChecker(world, "exact"), CollisionChecker(world, "locc", trained)):
        good = _pose()[None]
        with pytest.raises(ValueError, match="a: unknown mesh 'teapot'"):
            checker.pairwise("teapot", "l_bracket", good, good)
        with pytest.raises(ValueError, match="poses_a: expected shape"):
            checker.pairwise("l_bracket", "l_bracket", torch.zeros(1, 6), good)
        with pytest.raises(ValueError, match="poses_b: shape"):
            checker.pairwise("l_bracket", "l_bracket", good, good.repeat(2, 1))
        with pytest.raises(ValueError, match="poses_a: contains NaN"):
            checker.pairwise("l_bracket", "l_bracket", torch.full((1, 7), float("nan")), good)
        with pytest.raises(ValueError, match="poses: contains NaN"):
            checker.world_query("l_bracket", torch.full((2, 7), float("nan")))
        with pytest.raises(ValueError, match=r"poses: contains a zero quaternion; poses are "
                                             r"\[x, y, z, qw, qx, qy, qz\]"):
            checker.cost("l_bracket", torch.zeros(1, 7))
        with pytest.raises(ValueError, match="a, b: id shapes"):
            checker.pairwise(torch.tensor([0, 1, 2]), "l_bracket", good.repeat(2, 1), good.repeat(2, 1))
        with pytest.raises(ValueError, match="env_idx: environment indices"):
            checker.world_query("l_bracket", good, torch.tensor([4]))
        with pytest.raises(ValueError, match="mesh: unknown mesh"):
            checker.cost("nope", good)
    with pytest.raises(ValueError, match="backend"):
        CollisionChecker(world, "fcl")
    with pytest.raises(ValueError, match="model: backend 'global_ocn' needs a GlobalOCN"):
        CollisionChecker(world, "global_ocn", trained)


def test_from_checkpoint(world, trained, tmp_path):
    net = tiny_net("global_ocn", seed=3)
    for model, backend in ((trained, "locc"), (net, "global_ocn")):
        enc = model.encoder
        config = {"_target_": f"contactnet.models.{type(model).__name__}", "head_hidden": 64,
                  "encoder": {"_target_": "contactnet.models.ShapeEncoder", "grid": enc.grid, "hidden": enc.hidden,
                              "features": enc.features, "channels": 16}}
        path = tmp_path / f"{backend}.ckpt"
        torch.save({"contactnet_net_config": config,
                    "state_dict": {f"net.{k}": v for k, v in model.state_dict().items()}}, path)
        loaded = CollisionChecker.from_checkpoint(path, world, eta=0.05)
        assert loaded.backend == backend and loaded.eta == 0.05
        ids_a, ids_b, pa, pb = random_pairs(world, 32, seed=5)
        direct = CollisionChecker(world, backend, model).pairwise(ids_a, ids_b, pa, pb).logit
        torch.testing.assert_close(loaded.pairwise(ids_a, ids_b, pa, pb).logit, direct)
    with pytest.raises(ValueError, match="holds no hybrid threshold"):
        CollisionChecker.from_checkpoint(path, world, backend="hybrid")
    assert CollisionChecker.from_checkpoint(path, world, backend="hybrid", tau=2.5).tau == 2.5
    # Training stores the thresholds it chose on its validation split (calibrate_checkpoint).
    taus = [{"frames": 1, "max_error": 0.0, "tau": 3.25}, {"frames": 1, "max_error": 0.001, "tau": 0.0},
            {"frames": 4, "max_error": 0.0, "tau": 2.75}]
    torch.save({**torch.load(path, weights_only=True), HYBRID_TAU_KEY: {"split": "val", "data_root": "d", "taus": taus}},
               path)
    assert CollisionChecker.from_checkpoint(path, world, backend="hybrid").tau == 3.25
    assert CollisionChecker.from_checkpoint(path, world, backend="hybrid", frames=4).tau == 2.75
    assert 0 < CollisionChecker.from_checkpoint(path, world, backend="hybrid", max_error=0.001).tau <= 1e-6
    with pytest.raises(ValueError, match="max_error, frames"):
        CollisionChecker.from_checkpoint(path, world, backend="hybrid", frames=2)


def test_learned_hot_path_traces_without_graph_breaks(world, trained):
    w = world
    checker = CollisionChecker(w, "locc", trained, validate=False)
    checker.embeddings()
    ids = torch.tensor([0, 1, 2])
    poses = torch.stack([_pose(0.0), _pose(0.1), _pose(0.3)])
    env = torch.zeros(3, dtype=torch.long)
    eager = checker.cost(ids, poses, env)
    compiled = torch.compile(lambda p: checker.cost(ids, p, env), backend="eager", fullgraph=True)
    torch.testing.assert_close(compiled(poses), eager)


def test_devices_agree(accelerator, trained):
    from tests.planning.scenes import make_world

    device = accelerator
    results = {}
    for dev in ("cpu", device):
        w = make_world(num_envs=2, max_obstacles=2, device=dev)
        w.add_obstacle("o", "star_prism", _pose(0.02), env=1)
        ids_a, ids_b, pa, pb = random_pairs(w, 64, seed=2)
        out = []
        for backend in ("exact", "locc"):
            checker = CollisionChecker(w, backend, trained if backend == "locc" else None)
            r = checker.pairwise(ids_a.to(dev), ids_b.to(dev), pa.to(dev), pb.to(dev))
            out.append((r.signed_distance if backend == "exact" else r.logit).cpu())
            poses = torch.stack([_pose(0.0), _pose(0.05)]).to(dev).requires_grad_()
            cost = checker.cost("l_bracket", poses, torch.tensor([1, 1], device=dev))
            out += [cost.detach().cpu(), torch.autograd.grad(cost.sum(), poses)[0].cpu()]
        results[dev] = out
    names = [f"{backend} {what}" for backend in ("exact", "locc") for what in ("pairwise", "cost", "cost gradient")]
    # The exact cost's gradient on rotation follows its witness points; at these axis-aligned poses
    # the bodies meet face to face, where many witnesses are equally close and each device's
    # traversal (best-first on the CPU, depth-first on a GPU) keeps the first it meets. Its
    # gradient on translation is the same for all of them.
    results["cpu"][2], results[device][2] = results["cpu"][2][:, :3], results[device][2][:, :3]
    for name, a, b in zip(names, results["cpu"], results[device], strict=True):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-3, msg=lambda m: f"{name}: {m}\ncpu {a}\n{device} {b}")


def test_float64_world_with_learned_backend(world64, trained):
    learned = CollisionChecker(world64, "locc", trained)
    poses = torch.stack([_pose(0.0, dtype=torch.float64), _pose(0.3, dtype=torch.float64)]).requires_grad_()
    r = learned.pairwise("l_bracket", "gear_prism", poses, torch.stack([_pose(dtype=torch.float64)] * 2))
    (g,) = torch.autograd.grad(r.logit.sum(), poses)
    assert g.dtype == torch.float64 and torch.isfinite(g).all()


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_learned_cost_in_a_cuda_graph_follows_pose_updates(trained):
    from tests.planning.scenes import make_world

    w = make_world(num_envs=2, max_obstacles=3, device="cuda")
    w.add_obstacle("o", "star_prism", _pose(0.0), env=1)
    checker = CollisionChecker(w, "locc", trained, validate=False)
    checker.embeddings()
    ids = torch.zeros(16, dtype=torch.long, device="cuda")
    env = torch.ones(16, dtype=torch.long, device="cuda")
    poses = torch.stack([_pose(x) for x in torch.linspace(-0.2, 0.2, 16).tolist()]).cuda()
    with torch.no_grad():
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(2):
                checker.cost(ids, poses, env)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static = checker.cost(ids, poses, env)
        for x in (0.0, 0.1, 5.0):
            w.set_pose("o", _pose(x))  # in place: the captured graph reads the new pose
            graph.replay()
            torch.testing.assert_close(static, checker.cost(ids, poses, env))


@pytest.mark.parametrize("sites", ["points", "both"])
def test_point_probing_net_through_the_checker(world64, sites):
    """A LOCC whose co-occupancy probes surface points: the checker's cached table carries the
    world's sampled points, and its logits are the net's own on freshly encoded clouds."""
    from contactnet.models import LOCC, ShapeEncoder

    torch.manual_seed(0)
    net = LOCC(ShapeEncoder(grid=4, hidden=32, features=16, channels=16), 32, cross_features=8, cross_points=64,
               cross_cells=16 if sites == "both" else 0, cross_sites=sites).double()
    checker = CollisionChecker(world64, "locc", net)
    ids_a, ids_b, pa, pb = random_pairs(world64, 40, seed=5, spread=0.8)
    emb = net.encode(*(t.double() for t in (world64.points, world64.normals, world64.aabb)))
    want = net.predict(emb.map(lambda x: x[ids_a]), emb.map(lambda x: x[ids_b]), pa, pb)
    torch.testing.assert_close(checker.pairwise(ids_a, ids_b, pa, pb).logit, want)
    assert checker.embeddings().points is not None


def test_frame_averaged_logits_are_the_mean_over_turned_objects(world64):
    """frames=F: each logit is the mean of the net's logits on the objects encoded in the F frames
    (reframe_object: turned, re-centred, the poses composed with the inverse); frames=1 is the
    net on the world's own clouds; the hybrid defers by the averaged logit."""
    from contactnet.geometry.frames import frame_quaternions, reframe_object
    from contactnet.geometry.poses import compose_poses
    from contactnet.models import LOCC, ShapeEncoder

    torch.manual_seed(0)
    net = LOCC(ShapeEncoder(grid=4, hidden=32, features=16, channels=16), 32, cross_features=8,
               cross_points=64).double()
    ids_a, ids_b, pa, pb = random_pairs(world64, 30, seed=7, spread=0.8)
    # Frame 0: the net on the world's own clouds, encoded here rather than by the checker.
    emb = net.encode(*(t.double() for t in (world64.points, world64.normals, world64.aabb)))
    plain = net.predict(emb.map(lambda x: x[ids_a]), emb.map(lambda x: x[ids_b]), pa, pb)
    torch.testing.assert_close(CollisionChecker(world64, "locc", net, frames=1).pairwise(ids_a, ids_b, pa, pb).logit,
                               plain)
    want = [plain]
    for q in frame_quaternions(3)[1:]:
        turned = [reframe_object(p, n, m.vertices.double(), q)
                  for p, n, m in zip(world64.points.double(), world64.normals.double(), world64.meshes)]
        points, normals, aabb, inverse = (torch.stack(t) for t in zip(*turned))
        emb = net.encode(points, normals, aabb)
        want.append(net.predict(emb.map(lambda x: x[ids_a]), emb.map(lambda x: x[ids_b]),
                                compose_poses(pa, inverse[ids_a]), compose_poses(pb, inverse[ids_b])))
    checker = CollisionChecker(world64, "locc", net, frames=3)
    got = checker.pairwise(ids_a, ids_b, pa, pb).logit
    torch.testing.assert_close(got, torch.stack(want).mean(0))
    assert not torch.allclose(got, plain)  # the frames do change a (random) net's answers
    tau = float(got.abs().median())
    hybrid = CollisionChecker(world64, "hybrid", net, tau=tau, frames=3).pairwise(ids_a, ids_b, pa, pb)
    apart = hulls_separated(world64.library, ids_a, ids_b, pa, pb)
    torch.testing.assert_close(hybrid.deferred, defer(got, tau, apart))
    torch.testing.assert_close(hybrid.logit[~apart], got[~apart])  # the frames' mean on the pairs it runs


def test_frames_argument_is_checked(world, trained):
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="frames"):
            CollisionChecker(world, "locc", trained, frames=bad)
    with pytest.raises(ValueError, match="frames"):
        CollisionChecker(world, "exact", frames=2)
    assert "frames=2" in repr(CollisionChecker(world, "locc", trained, frames=2))

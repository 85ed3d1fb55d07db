"""The fixed-iteration mode: one step is a uniform flow of fixed-shape ops with no host sync (so a
CUDA graph can capture it), it follows the adaptive trajectory, and it reports what it defers."""

import math

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from contactnet.ops import ipc
from contactnet.sim import CandidateOverflow, Scene, Stepper, box_mesh, contact_search
from contactnet.sim.scenes import bowl_shake, shake_trajectory
from tests.sim.penetration_oracle import PenetrationOracle

CUBE = box_mesh((0.05, 0.05, 0.05), name="cube")
aten = torch.ops.aten

# Ops that read a value on the host or whose output shape depends on the data.
_FORBIDDEN = {aten._local_scalar_dense.default, aten.nonzero.default, aten.nonzero_static.default,
              aten.masked_select.default, aten.unique_dim.default, aten._unique.default, aten._unique2.default,
              aten.unique_consecutive.default, aten.bincount.default, aten.is_nonzero.default,
              aten.equal.default, aten.repeat_interleave.Tensor,
              torch.ops.contactnet.ipc_collision_candidates.default,
              torch.ops.contactnet.ipc_swept_candidates.default, torch.ops.contactnet.ipc_body_candidates.default}


class NoHostSync(TorchDispatchMode):
    """Fails on any op that syncs with the host or has a data-dependent output shape."""

    def __init__(self):
        super().__init__()
        self.seen = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        self.seen.add(func)
        if func in _FORBIDDEN:
            raise AssertionError(f"host sync or data-dependent shape: {func}")
        if func in (aten.index.Tensor, aten.index_put.default, aten.index_put_.default, aten._index_put_impl_.default):
            indices = args[1]
            if any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in indices):
                raise AssertionError(f"boolean-mask indexing: {func}")
        return func(*args, **kwargs)


def cube_on_ground(z=0.0262, vz=-0.5):
    scene = Scene()
    scene.add_ground()
    scene.add_body(CUBE, pose=[0, 0, z, 1, 0, 0, 0], velocity=[0, 0, vz, 0, 0, 0])
    return scene


def two_cubes():
    scene = Scene()
    scene.add_ground()
    scene.add_body(CUBE, pose=[0, 0, 0.0255, 1, 0, 0, 0], velocity=[0.1, 0, 0, 0, 0, 0])
    tilt = 0.1
    scene.add_body(CUBE, pose=[0.01, 0, 0.0795, math.cos(tilt / 2), math.sin(tilt / 2), 0, 0])
    return scene


def shaken_cube():
    scene = cube_on_ground()
    scene.add_body(CUBE, kind="kinematic", trajectory=shake_trajectory(0.01, 2.0, height=0.2), name="shaker")
    return scene


@pytest.mark.parametrize("scenes", ["cube", "mixed"])
def test_fixed_step_has_no_host_sync_and_no_data_dependent_shape(scenes):
    envs = [cube_on_ground()] if scenes == "cube" else [two_cubes(), shaken_cube(), two_cubes()]
    sim = Stepper(envs, fixed_iterations=4, on_failure="ignore")
    sim.step()  # (the first step may set up lazily; every later one must be sync-free)
    with NoHostSync() as mode:
        for _ in range(2):
            info = sim.step()
    # The fixed-capacity lists come from the body-level search (on a GPU too), which also prunes.
    assert torch.ops.contactnet.ipc_body_candidates_padded.default in mode.seen
    assert torch.ops.contactnet.ipc_prune_candidates_padded.default not in mode.seen
    assert torch.ops.contactnet.ipc_collision_free_steps.default in mode.seen
    assert info.iterations == 4 and not bool(info.candidate_overflow)
    assert bool((info.contacts > 0).all()) and bool((info.min_distance > 0).all())
    sim.validate()


def test_the_checker_catches_syncs():
    sim = Stepper(cube_on_ground(), on_failure="ignore")  # adaptive: syncs by design
    with pytest.raises(AssertionError, match="host sync"), NoHostSync():
        sim.step()


def test_fixed_mode_with_enough_iterations_follows_the_adaptive_trajectory():
    envs = [two_cubes(), cube_on_ground()]
    adaptive = Stepper(envs)
    fixed = Stepper(envs, fixed_iterations=16, kappa=adaptive.kappa, line_search_steps=12)
    oracle = PenetrationOracle(fixed)
    worst = 0
    for _ in range(12):
        a, f = adaptive.step(), oracle.step()
        worst = max(worst, a.iterations)
        torch.testing.assert_close(fixed.q, adaptive.q, atol=1e-10, rtol=0)
        assert torch.equal(f.contacts, a.contacts) and bool(f.converged.all())
    assert 1 < worst < 16  # the comparison exercised several Newton iterations
    fixed.validate()
    oracle.check()


def test_a_few_fixed_iterations_never_penetrate_and_report_non_convergence():
    sim = Stepper([cube_on_ground(vz=-2.0), two_cubes()], fixed_iterations=1)
    oracle = PenetrationOracle(sim)
    converged = torch.ones(2, dtype=torch.bool)
    for _ in range(10):
        info = oracle.step()
        converged &= info.converged
    oracle.check()  # every step: no colliding pair, no impact on the step's motion
    assert not bool(converged.all())
    with pytest.warns(RuntimeWarning, match="did not converge within 1 iterations"):
        sim.validate()
    sim.validate()  # the record was cleared


@pytest.mark.parametrize("search", ["body-level", "all-primitive"])
def test_pruned_swept_lists_change_nothing_but_their_length(search, monkeypatch):
    """Around a shaken bowl the swept boxes keep many times more pairs than can come within d̂
    (the objects share the bowl's motion): the fixed step's searches prune them (the body-level
    search as it finds them, the all-primitive sweep after it; the sweep serves callers without
    the bodies' states), and the step follows the unpruned step's trajectory exactly."""
    if search == "all-primitive":
        monkeypatch.setattr(contact_search, "_body_level", lambda *args: False)
    search_padded = contact_search.search_padded
    rows = {"broad": 0, "kept": 0}

    def real_rows(c: ipc.Candidates) -> int:
        return sum(int((k[:, 0] >= 0).sum()) for k in c)

    def counted(scene, x0, x1, reach, capacity, q0=None, q1=None, prune=False):
        found = search_padded(scene, x0, x1, reach, capacity, q0, q1, prune=prune)
        if x1 is not None:
            rows["broad"] += real_rows(search_padded(scene, x0, x1, reach, capacity, q0, q1).candidates)
            rows["kept"] += real_rows(found.candidates)
        return found

    def unpruned(scene, x0, x1, reach, capacity, q0=None, q1=None, prune=False):
        return search_padded(scene, x0, x1, reach, capacity, q0, q1)

    trajectories = []
    for fn in (counted, unpruned):
        monkeypatch.setattr(contact_search, "search_padded", fn)
        sim = Stepper(bowl_shake(seed=0), fixed_iterations=3, on_failure="ignore")
        for _ in range(30):  # the objects land (steps 7-20), then ride the bowl
            sim.step()
        sim.validate()
        trajectories.append(sim.q)
    torch.testing.assert_close(trajectories[0], trajectories[1], atol=1e-12, rtol=0)
    assert rows["broad"] > 10 * rows["kept"] > 0


def test_candidate_overflow_is_reported_not_silent():
    for kwargs in ({"max_candidates": 2}, {"max_contacts": 2}):
        sim = Stepper(two_cubes(), fixed_iterations=3, on_failure="ignore", **kwargs)
        info = sim.step()
        assert bool(info.candidate_overflow)
        name, value = next(iter(kwargs.items()))
        with pytest.raises(CandidateOverflow, match=f"{name}={value}"):
            sim.validate()
        sim.validate()
        with pytest.raises(ValueError, match=name):
            Stepper(two_cubes(), fixed_iterations=3, **{name: 0})
    with pytest.raises(ValueError, match="line_search_steps"):
        Stepper(two_cubes(), fixed_iterations=3, line_search_steps=0)


def test_non_finite_state_is_reported_by_validate_and_not_committed():
    sim = Stepper([cube_on_ground(), cube_on_ground()], fixed_iterations=2)
    sim.qdot[1, 1, 0] = float("nan")
    q_before = sim.q.clone()
    sim.step()
    assert bool(torch.isfinite(sim.q).all()) and torch.equal(sim.q[1], q_before[1])
    with pytest.raises(FloatingPointError, match=r"environments \[1\]"):
        sim.validate()


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("pairs", [1, 32])  # 64 environments: batched solves take other library paths
def test_a_fixed_step_captured_in_a_cuda_graph_replays_like_eager_steps(pairs):
    # device="cuda" as users write it (the state check once compared it with cuda:0 and refused).
    eager = Stepper([two_cubes(), cube_on_ground()] * pairs, fixed_iterations=4, device="cuda")
    graphed = Stepper([two_cubes(), cube_on_ground()] * pairs, fixed_iterations=4, device="cuda", kappa=eager.kappa)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm-up (library handles) outside the capture
        graphed.step()
        eager.step()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        graphed.step()
    for _ in range(5):
        graph.replay()
        eager.step()
    torch.cuda.synchronize()
    torch.testing.assert_close(graphed.q, eager.q, atol=1e-9, rtol=0)
    graphed.validate()
    eager.validate()

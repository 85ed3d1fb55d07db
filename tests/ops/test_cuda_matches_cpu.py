"""Every op with a CUDA kernel gives on CUDA what it gives on the CPU: values, indices (as sets where
the order is the kernel's own) and gradients from the same upstream gradient, on random and
adversarial inputs built by the CPU tests' own builders. `make gpu-check` runs these (`pytest -m
cuda`); without a GPU they skip.

Tolerances: float64 values to ~1e-12 relative (the CUDA build does not contract a*b+c into FMAs,
as g++ does not, but library functions and summation orders may differ in the last bits); every
index, count and boolean exactly."""

import pytest
import torch

from contactnet import ops
from contactnet.geometry import Mesh, MeshLibrary
from contactnet.ops import (blem_contacts, cluster_contacts, ipc, mesh_collide, mesh_distance, point_mesh_distance,
                            point_mesh_signed_distance)
from contactnet.ops.grid_sample_rows import grid_sample_rows
from contactnet.ops.dipole_winding import dipoles_enclose
from contactnet.ops.locc_cooccupancy import locc_point_cooccupancy
from contactnet.ops.locc_crop import locc_crop, locc_crop_pool
from contactnet.ops.mesh_query import hulls_separated
from tests.ops import ipc_cases
from tests.ops.mesh_cases import box_mesh, bumpy_sphere, random_poses, random_soup
from tests.ops.primitive_cases import adversarial_batch, random_triangle_pairs

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")]

DEVICE = "cuda"


def to_dev(*tensors):
    return tuple(t.to(DEVICE) for t in tensors)


def close(cpu, dev, rtol=1e-12, atol=1e-12, name=""):
    """dev (any device) equals cpu: exactly for integer and bool tensors, to tolerance for floats."""
    dev = dev.cpu()
    assert cpu.shape == dev.shape and cpu.dtype == dev.dtype, name
    if cpu.dtype.is_floating_point:
        torch.testing.assert_close(dev, cpu, rtol=rtol, atol=atol, equal_nan=True, msg=name or None)
    else:
        assert torch.equal(dev, cpu), name


def rows(t: torch.Tensor) -> list:
    """Rows of an index tensor as a sorted list (order-free comparison)."""
    return sorted(map(tuple, t.cpu().tolist()))


# ---- primitive distances -------------------------------------------------------------------------


def _triangle_inputs(dtype):
    """Random pairs, plus the named adversarial ones in float64 (touching cases sit exactly on the
    boundary: float32 rounding, FMA or not, may legitimately decide them either way)."""
    a, b = random_triangle_pairs(300, 1.0, dtype)
    if dtype != torch.float64:
        return a, b
    _, a2, b2, _ = adversarial_batch(dtype)
    return torch.cat([a, a2]), torch.cat([b, b2])


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_triangle_intersect(dtype):
    a, b = _triangle_inputs(dtype)
    hit = ops.triangle_intersect(a, b)
    assert bool(hit.any()) and not bool(hit.all())
    close(hit, ops.triangle_intersect(*to_dev(a, b)))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_point_triangle_and_segment_distances_with_gradients(dtype):
    tol = dict(rtol=1e-10, atol=1e-12) if dtype == torch.float64 else dict(rtol=1e-4, atol=1e-6)
    a, b = _triangle_inputs(dtype)
    g = torch.Generator().manual_seed(3)
    for fn, x, y in ((ops.point_triangle_distance, a[:, 0].contiguous(), b),
                     (ops.segment_segment_distance, a[:, :2].contiguous(), b[:, :2].contiguous())):
        upstream = torch.rand(x.shape[0], generator=g, dtype=dtype)
        outs, grads = [], []
        for dev in ("cpu", DEVICE):
            xd, yd = x.to(dev).requires_grad_(), y.to(dev).requires_grad_()
            out = fn(xd, yd)
            gx, gy = torch.autograd.grad((out.distance * upstream.to(dev)).sum(), (xd, yd))
            outs.append(out)
            grads.append((gx, gy))
        for name, c, d in zip(outs[0]._fields, outs[0], outs[1]):
            close(c.detach(), d.detach(), name=f"{fn.__name__}.{name}", **tol)
        for c, d in zip(*grads):
            close(c, d, **tol)


# ---- IPC distances and barrier -------------------------------------------------------------------


def _stencils(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 4, 3, generator=g, dtype=torch.float64)
    x[: n // 4, 3] = x[: n // 4, 2] + 1e-12  # nearly coincident points
    x[n // 4 : n // 2, 3] = x[n // 4 : n // 2, 2] + (x[n // 4 : n // 2, 1] - x[n // 4 : n // 2, 0])  # parallel edges
    return [x[:, i].contiguous() for i in range(4)]


@pytest.mark.parametrize("name, nv", [("point_point", 2), ("point_edge", 3), ("point_triangle", 4), ("edge_edge", 4)])
def test_ipc_distance_values_gradients_hessians(name, nv):
    args = _stencils(400, nv)[:nv]
    for suffix in ("", "_gradient", "_hessian"):
        fn = getattr(ipc, f"{name}_distance_squared{suffix}")
        close(fn(*args), fn(*to_dev(*args)), rtol=1e-9, atol=1e-12, name=f"{name}{suffix}")
    # autograd of the value from the same upstream gradient
    upstream = torch.rand(400, dtype=torch.float64, generator=torch.Generator().manual_seed(9))
    grads = []
    for dev in ("cpu", DEVICE):
        xs = [a.to(dev).requires_grad_() for a in args]
        value = getattr(ipc, f"{name}_distance_squared")(*xs)
        grads.append(torch.autograd.grad((value * upstream.to(dev)).sum(), xs))
    for c, d in zip(*grads):
        close(c, d, rtol=1e-9, atol=1e-12)


def test_edge_edge_mollifier_and_barrier():
    args = _stencils(400, 5)
    eps_x = 1e-3 * torch.rand(400, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    for fn in (ipc.edge_edge_mollifier, ipc.edge_edge_mollifier_gradient, ipc.edge_edge_mollifier_hessian):
        close(fn(*args, eps_x), fn(*to_dev(*args), eps_x.to(DEVICE)), rtol=1e-9, atol=1e-15)
    d2 = torch.cat([torch.linspace(0, 1.2, 300, dtype=torch.float64), torch.tensor([1e-30, 1.0, 1.0 - 1e-16])])
    for c, d in zip(ipc.barrier(d2, 1.0), ipc.barrier(d2.to(DEVICE), 1.0)):
        close(c, d, rtol=1e-12, atol=0)


# ---- IPC candidates, potentials, friction, CCD --------------------------------------------------------


def _sheets(seed=0):
    V, F, E, body, dhat = ipc_cases.stacked_sheets(8, seed=seed)
    return V, F, E, body, dhat


def _candidates_on(dev, fn, *args, **kwargs):
    c = fn(*(a.to(dev) if isinstance(a, torch.Tensor) else a for a in args), **kwargs)
    return rows(c.face_vertex), rows(c.edge_edge)


@pytest.mark.parametrize("seed", [0, 1])
def test_collision_and_swept_candidates(seed):
    V, F, E = ipc_cases.random_triangle_soup(60, seed=seed)
    body = torch.arange(V.shape[0]) // 3
    V1 = V + 0.05 * torch.randn(V.shape, generator=torch.Generator().manual_seed(seed), dtype=V.dtype)
    for fn, args in ((ipc.collision_candidates, (V, F, E, 0.05)), (ipc.collision_candidates, (V, F, E, 0.05, body)),
                     (ipc.swept_candidates, (V, V1, F, E, 0.0)), (ipc.swept_candidates, (V, V1, F, E, 0.01, body))):
        want = _candidates_on("cpu", fn, *args)
        assert want[0] or want[1]
        assert _candidates_on(DEVICE, fn, *args) == want, fn.__name__


def test_padded_candidates_with_masks_and_overflow():
    V, F, E = ipc_cases.random_triangle_soup(60, seed=2)
    V1 = V + 0.05 * torch.randn(V.shape, generator=torch.Generator().manual_seed(2), dtype=V.dtype)
    g = torch.Generator().manual_seed(4)
    masks = {f"{kind}_active": torch.rand(n, generator=g) < 0.8
             for kind, n in (("vertex", V.shape[0]), ("face", F.shape[0]), ("edge", E.shape[0]))}
    for capacity in (4, 4096):  # overflowing and not
        for fn, args in ((ipc.collision_candidates_padded, (V, F, E, 0.05, capacity)),
                         (ipc.swept_candidates_padded, (V, V1, F, E, capacity, 0.01))):
            out = []
            for dev in ("cpu", DEVICE):
                p = fn(*(a.to(dev) if isinstance(a, torch.Tensor) else a for a in args),
                       **{k: m.to(dev) for k, m in masks.items()})
                fv, ee = p.candidates
                out.append((p.counts.cpu(), fv.shape, ee.shape))
                if capacity == 4096:  # every pair fits: the same set (order is the sweep's own)
                    out[-1] += (rows(fv), rows(ee))
            assert torch.equal(out[0][0], out[1][0]) and out[0][1:] == out[1][1:], fn.__name__


def test_barrier_potential_gradient_hessian_with_autograd():
    V, F, E, body, dhat = _sheets(0)
    rest = V.clone()
    cand = ipc.collision_candidates(V, F, E, dhat, body)
    assert cand.count > 100
    dc = ipc.Candidates(*to_dev(*cand))
    kappa = 7.0
    close(ipc.barrier_potential(V, F, E, cand, dhat, kappa, rest, per_candidate=True),
          ipc.barrier_potential(*to_dev(V, F, E), dc, dhat, kappa, rest.to(DEVICE), per_candidate=True), rtol=1e-10)
    close(ipc.barrier_potential_gradient(V, F, E, cand, dhat, kappa, rest),
          ipc.barrier_potential_gradient(*to_dev(V, F, E), dc, dhat, kappa, rest.to(DEVICE)), rtol=1e-10, atol=1e-12)
    for psd in (False, True):
        h = ipc.barrier_potential_hessian(V, F, E, cand, dhat, kappa, rest, project_to_psd=psd)
        hd = ipc.barrier_potential_hessian(*to_dev(V, F, E), dc, dhat, kappa, rest.to(DEVICE), project_to_psd=psd)
        close(h.local, hd.local, rtol=1e-9, atol=1e-9 * float(h.local.abs().max()))
        close(h.stencils, hd.stencils)
        close(h.matrix.to_dense(), hd.matrix.to_dense(), rtol=1e-9, atol=1e-9 * float(h.local.abs().max()))
    # autograd through the potential, same upstream gradient
    grads = []
    for dev in ("cpu", DEVICE):
        x = V.to(dev).requires_grad_()
        c = ipc.Candidates(*(t.to(dev) for t in cand))
        grads.append(torch.autograd.grad(3.0 * ipc.barrier_potential(x, F.to(dev), E.to(dev), c, dhat, kappa,
                                                                     rest.to(dev)), x)[0])
    close(grads[0], grads[1], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("scale", [1e-4, 1e-2])  # mostly static / mostly sliding against eps_v
def test_friction_potential_gradient_hessian(scale):
    V, F, E, body, dhat = _sheets(1)
    cand = ipc.collision_candidates(V, F, E, dhat)
    vel = scale * torch.randn(V.shape, generator=torch.Generator().manual_seed(5), dtype=V.dtype)
    args = (vel, V, F, E)
    rest = dict(dhat=dhat, kappa=20.0, mu=0.4, eps_v=1e-3)
    dc = ipc.Candidates(*to_dev(*cand))
    close(ipc.friction_potential(*args, cand, per_candidate=True, **rest),
          ipc.friction_potential(*to_dev(*args), dc, per_candidate=True, **rest), rtol=1e-10, atol=1e-18)
    close(ipc.friction_potential_gradient(*args, cand, **rest),
          ipc.friction_potential_gradient(*to_dev(*args), dc, **rest), rtol=1e-10, atol=1e-15)
    h = ipc.friction_potential_hessian(*args, cand, **rest)
    hd = ipc.friction_potential_hessian(*to_dev(*args), dc, **rest)
    close(h.local, hd.local, rtol=1e-9, atol=1e-9 * float(h.local.abs().max()))
    close(h.matrix.to_dense(), hd.matrix.to_dense(), rtol=1e-9, atol=1e-9 * float(h.local.abs().max()))
    grads = []
    for dev in ("cpu", DEVICE):
        u = vel.to(dev).requires_grad_()
        c = ipc.Candidates(*(t.to(dev) for t in cand))
        e = ipc.friction_potential(u, V.to(dev), F.to(dev), E.to(dev), c, **rest)
        grads.append(torch.autograd.grad(2.0 * e, u)[0])
    close(grads[0], grads[1], rtol=1e-10, atol=1e-15)


@pytest.mark.parametrize("min_distance", [0.0, 1e-3])
def test_ccd_time_of_impact(min_distance):
    V, F, E = ipc_cases.random_triangle_soup(80, seed=6)
    body = torch.arange(V.shape[0]) // 3
    V1 = V + 0.1 * torch.randn(V.shape, generator=torch.Generator().manual_seed(6), dtype=V.dtype)
    V1[:9] = V[:9]  # some primitives do not move
    cand = ipc.swept_candidates(V, V1, F, E, min_distance, body)
    assert cand.count > 50
    for rescaling in (0.9, 0.99):
        toi = ipc.ccd_time_of_impact(V, V1, F, E, cand, min_distance, 1.0, rescaling)
        assert bool((toi < 1).any()) and bool((toi == 1).any())  # impacts and free motions both
        toi_dev = ipc.ccd_time_of_impact(*to_dev(V, V1, F, E), ipc.Candidates(*to_dev(*cand)), min_distance, 1.0,
                                         rescaling)
        close(toi, toi_dev, rtol=1e-9, atol=1e-12)
    close(ipc.collision_free_step(V, V1, F, E, min_distance, body),
          ipc.collision_free_step(*to_dev(V, V1, F, E), min_distance, body.to(DEVICE)), rtol=1e-9, atol=1e-12)
    # Per environment (5 of them, the last without candidates), on a list mostly of padding.
    env = torch.clamp(torch.arange(V.shape[0]) * 5 // V.shape[0], max=3)
    pad = torch.full((20_000, 2), -1, dtype=torch.int64)
    padded = ipc.Candidates(torch.cat([cand.face_vertex, pad]), torch.cat([cand.edge_edge, pad]))
    steps = ipc.collision_free_steps(V, V1, F, E, padded, env, 5, min_distance)
    assert float(steps[:4].max()) < 1 and steps[4] == 1
    close(steps, ipc.collision_free_steps(*to_dev(V, V1, F, E), ipc.Candidates(*to_dev(*padded)), env.to(DEVICE), 5,
                                          min_distance), rtol=1e-9, atol=1e-12, name="steps")
    bounded = ipc.BoundedCandidates(*to_dev(*padded), torch.tensor([cand.face_vertex.shape[0], 0], device=DEVICE))
    fv_only = ipc.collision_free_steps(V, V1, F, E, ipc.Candidates(cand.face_vertex, pad[:0]), env, 5, min_distance)
    close(fv_only, ipc.collision_free_steps(*to_dev(V, V1, F, E), bounded, env.to(DEVICE), 5, min_distance),
          rtol=1e-9, atol=1e-12, name="bounded steps")


def test_prune_candidates():
    V, F, E = ipc_cases.random_triangle_soup(80, seed=7)
    body = torch.arange(V.shape[0]) // 3
    V1 = V + 0.02 * torch.randn(V.shape, generator=torch.Generator().manual_seed(7), dtype=V.dtype)
    for v1 in (V1, None):
        cand = ipc.swept_candidates(V, V if v1 is None else v1, F, E, 0.05, body)
        want = ipc.prune_candidates(V, F, E, cand, 0.02, vertices_t1=v1)
        assert 0 < want.count < cand.count
        got = ipc.prune_candidates(*to_dev(V, F, E), ipc.Candidates(*to_dev(*cand)), 0.02,
                                   vertices_t1=None if v1 is None else v1.to(DEVICE))
        close(want.face_vertex, got.face_vertex, name="fv")  # in order on both devices
        close(want.edge_edge, got.edge_edge, name="ee")


@pytest.mark.parametrize("swept", [False, True])
def test_body_candidates_padded(swept):
    """The body-level search, fixed-capacity (the fixed step's) and compact (the adaptive step's),
    lists the CPU's pairs in its order: a shaken bowl's bodies after a few steps, static and along
    a move."""
    from contactnet.sim import Stepper, contact_search, scenes

    sim = Stepper([scenes.bowl_shake(seed=s) for s in range(3)], on_failure="ignore")
    for _ in range(25):
        sim.step()
    packed, q0 = sim.packed, sim.q
    q1 = q0 + sim.qdot * sim.dt if swept else None
    x0, x1 = packed.positions(q0), None if q1 is None else packed.positions(q1)
    xs0, qs0, xs1, qs1 = contact_search._shifted(packed, x0, x1, q0, q1)
    args = (xs0, packed.faces, packed.edges, packed.trees, qs0, packed.body_pairs, 2e-3)
    kwargs = dict(vertices_t1=xs1, q_t1=qs1, vertex_body=packed.vertex_group)
    want = ipc.body_candidates_padded(*args, 20000, **kwargs)
    assert int(want.counts.min()) > 20
    dev = lambda t: None if t is None else t.to(DEVICE)  # noqa: E731
    trees = ipc.BodyTrees(*to_dev(*packed.trees))
    got = ipc.body_candidates_padded(dev(xs0), dev(packed.faces), dev(packed.edges), trees, dev(qs0),
                                     dev(packed.body_pairs), 2e-3, 20000, vertices_t1=dev(xs1), q_t1=dev(qs1),
                                     vertex_body=dev(packed.vertex_group))
    close(want.counts, got.counts, name="counts")
    close(want.candidates.face_vertex, got.candidates.face_vertex, name="fv")
    close(want.candidates.edge_edge, got.candidates.edge_edge, name="ee")
    want = ipc.body_candidates(*args, **kwargs)
    got = ipc.body_candidates(dev(xs0), dev(packed.faces), dev(packed.edges), trees, dev(qs0), dev(packed.body_pairs),
                              2e-3, vertices_t1=dev(xs1), q_t1=dev(qs1), vertex_body=dev(packed.vertex_group))
    close(want.candidates.face_vertex, got.candidates.face_vertex, name="compact fv")
    close(want.candidates.edge_edge, got.candidates.edge_edge, name="compact ee")
    close(want.stats, got.stats, name="stats")


def test_affine_potential_and_derivatives():
    """The stepper's fused potential (CPU inputs from a CPU stepper, moved): energy, gradient and the
    dense PSD-projected Hessian, with friction and lists mostly of padding (the GPU sums one
    candidate per thread, candidate_sums.h)."""
    from contactnet.sim import Stepper, scenes
    from tests.sim.test_affine_potential import potential_inputs, tilted_stack

    for built in ([tilted_stack(0.02), tilted_stack(0.05)], [scenes.bowl_shake(seed=3)]):
        sim = Stepper(built, mu=0.4)
        for _ in range(200):
            if sim.step().contacts.min() > 0:
                break
        packed, c, q, q_hat, w, x_t, lag, x, cand = potential_inputs(sim, 0, pad=20_000)
        args = [q, q_hat, w, packed.M, packed.ortho_weight, x, packed.rest, packed.faces, packed.edges,
                packed.vertex_body, cand, x_t, lag.candidates, lag.mu]
        tail = (c.dt, c.dhat, c.kappa, c.eps_v)
        dev = [ipc.Candidates(*to_dev(*a)) if isinstance(a, ipc.Candidates) else a.to(DEVICE) for a in args]
        close(ipc.affine_potential(*args, *tail), ipc.affine_potential(*dev, *tail), name="energy")
        for want, got, name in zip(ipc.affine_potential_derivatives(*args, *tail),
                                   ipc.affine_potential_derivatives(*dev, *tail), ("gradient", "hessian")):
            close(want, got, rtol=1e-10, atol=1e-10 * float(want.abs().max()), name=name)
        # The kept Hessian of all terms but friction, and a call that reuses it (the device's own).
        _, _, kept = ipc.affine_potential_derivatives(*args, *tail, keep_frictionless=True)
        _, H_dev, kept_dev = ipc.affine_potential_derivatives(*dev, *tail, keep_frictionless=True)
        close(kept, kept_dev, rtol=1e-10, atol=1e-10 * float(kept.abs().max()), name="frictionless")
        _, H_reused = ipc.affine_potential_derivatives(*dev, *tail, frictionless_hessian=kept_dev)
        close(H_dev.cpu(), H_reused, rtol=1e-12, atol=1e-12 * float(H_dev.abs().max()), name="reused")
        # The same lists bounded by their extents (the rows in use; a grid-stride launch on the GPU).
        real = [torch.tensor([int((k[:, 0] >= 0).sum()) for k in cands]) for cands in (cand, lag.candidates)]
        bounded = [ipc.BoundedCandidates(*to_dev(*a), e.to(DEVICE)) for a, e in zip((cand, lag.candidates), real)]
        dev[10], dev[12] = bounded
        close(ipc.affine_potential(*args, *tail), ipc.affine_potential(*dev, *tail), name="bounded energy")
        for want, got, name in zip(ipc.affine_potential_derivatives(*args, *tail),
                                   ipc.affine_potential_derivatives(*dev, *tail), ("gradient", "hessian")):
            close(want, got, rtol=1e-10, atol=1e-10 * float(want.abs().max()), name="bounded " + name)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_newton_check_and_line_search_accept(dtype):
    """The Newton loop's bookkeeping ops: flags, counts and copies exactly; the bound's comparison
    away from the limit; the neighbour lists' relative bound (the same sums on both devices)."""
    g = torch.Generator().manual_seed(4)
    E, B, V = 9, 3, 40
    dq = (torch.randn(E, B, 12, generator=g, dtype=torch.float64) * 1e-6).to(dtype)
    dq[2] = 0.0
    radius = torch.rand(E, B, generator=g, dtype=torch.float64).to(dtype)
    done = torch.rand(E, generator=g) < 0.3
    flags = (dq, radius, 2e-6, done, done & (torch.rand(E, generator=g) < 0.5), torch.randint(0, 4, (E,), generator=g))
    dev = tuple(a.to(DEVICE) if isinstance(a, torch.Tensor) else a for a in flags)
    for want, got in zip(ipc.newton_check(*flags), ipc.newton_check(*dev)):
        close(want, got, rtol=0, atol=0)
    q, trial = (torch.randn(E, B, 12, generator=g, dtype=torch.float64).to(dtype) for _ in range(2))
    x, x_trial = (torch.randn(V, 3, generator=g, dtype=torch.float64).to(dtype) for _ in range(2))
    energy = torch.randn(E, generator=g, dtype=torch.float64).to(dtype)
    trial_energy = energy + torch.randn(E, generator=g, dtype=torch.float64).to(dtype)
    trial_energy[0] = float("nan")
    args = (q, trial, x, x_trial, torch.randint(0, E, (V,), generator=g), energy, trial_energy,
            torch.rand(E, generator=g) < 0.3, torch.rand(E, generator=g, dtype=torch.float64).to(dtype))
    for want, got in zip(ipc.line_search_accept(*args), ipc.line_search_accept(*to_dev(*args))):
        close(want, got, rtol=0, atol=0)
    present = torch.rand(E, B, generator=g) < 0.7
    present[0] = False
    segment = torch.stack([dq, dq + 1e-3])
    close(ipc.relative_displacement_bound(segment, radius, present),
          ipc.relative_displacement_bound(*to_dev(segment, radius, present)), rtol=0, atol=0)


def test_affine_contact_forces():
    """The stepper's end-of-step forces and statistics, on lists mostly of padding; the forces sum
    atomically on the GPU, in order on the CPU."""
    from contactnet.sim import Stepper, scenes
    from tests.sim.test_affine_potential import potential_inputs, tilted_stack

    for built in ([tilted_stack(0.02), tilted_stack(gap=0.05)], [scenes.bowl_shake(seed=3)]):
        sim = Stepper(built, mu=0.4)
        for _ in range(200):
            if sim.step().contacts.max() > 0:
                break
        packed, c, q, q_hat, w, x_t, lag, x, cand = potential_inputs(sim, 0, pad=20_000)
        args = [x, x_t, packed.rest, packed.faces, packed.edges, packed.vertex_body, cand, lag.candidates, lag.mu]
        tail = (sim.num_envs, sim.max_bodies, c.dt, c.dhat, c.kappa, c.eps_v)
        dev = [ipc.Candidates(*to_dev(*a)) if isinstance(a, ipc.Candidates) else a.to(DEVICE) for a in args]
        want, got = ipc.affine_contact_forces(*args, *tail), ipc.affine_contact_forces(*dev, *tail)
        close(want[0], got[0], rtol=1e-10, atol=1e-10 * float(want[0].abs().max()), name="forces")
        close(want[1], got[1], name="contacts")
        close(want[2], got[2], name="min_distance")


def test_cholesky_solve():
    """The Newton solve: torch's batched Cholesky on the GPU, the CPU op here; failures are NaN and
    False on both."""
    from tests.ops.test_cholesky_solve import spd

    H, g = spd(5, 40, seed=2), torch.randn(5, 40, dtype=torch.float64)
    H[3] -= 2e3 * torch.eye(40, dtype=torch.float64)
    shift = torch.tensor([0.0, 0.5, 0.0, 0.0, 1.0], dtype=torch.float64)
    want, got = ipc.cholesky_solve(H, g, shift), ipc.cholesky_solve(*to_dev(H, g, shift))
    close(want[1], got[1], name="factorised")
    close(want[0], got[0], rtol=1e-10, atol=1e-10, name="solution")


# ---- mesh queries ---------------------------------------------------------------------------------------


def _library(dtype):
    meshes = [Mesh(*bumpy_sphere(2, 0.05, seed=1), name="bumpy0"), Mesh(*bumpy_sphere(1, 0.04, seed=2), name="bumpy1"),
              Mesh(*random_soup(60, seed=3), name="soup"), Mesh(*box_mesh((0.1, 0.1, 0.1)), name="box"),
              Mesh(*bumpy_sphere(1, 0.015, seed=4), name="small")]
    return MeshLibrary(meshes, dtype=dtype), MeshLibrary(meshes, dtype=dtype, device=DEVICE)


def _queries(dtype, q=300):
    """Random pairs from far to nested (positions within 0.06 m of each other), as the CPU tests."""
    g = torch.Generator().manual_seed(8)
    ia, ib = torch.randint(5, (q,), generator=g), torch.randint(5, (q,), generator=g)
    pa, pb = random_poses(q, 0.04, seed=8), random_poses(q, 0.04, seed=9)
    pb[:20, :3] = pa[:20, :3]  # coincident centres: nested and deep cases
    return ia, ib, pa.to(dtype), pb.to(dtype)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_grid_sample_rows_and_its_coordinate_gradient(dtype):
    g = torch.Generator().manual_seed(0)
    m, d = 6, 16
    rows = torch.randn(9 * m**3, d, generator=g).to(dtype)
    ids = torch.randint(9, (40,), generator=g)
    coords = ((torch.rand(40, 50, 3, generator=g) * 2 - 1) * 1.3).to(dtype)
    grad_out = torch.randn(40, 50, d, generator=g).to(dtype)
    tol = dict(rtol=1e-12, atol=1e-12) if dtype == torch.float64 else dict(rtol=1e-5, atol=1e-5)
    outs = {}
    for device in ("cpu", DEVICE):
        c = coords.to(device).requires_grad_(True)
        out = grid_sample_rows(rows.to(device), m, ids.to(device), c)
        (grad,) = torch.autograd.grad(out, c, grad_out.to(device))
        outs[device] = (out.detach(), grad)
    close(outs["cpu"][0], outs[DEVICE][0], name="values", **tol)
    close(outs["cpu"][1], outs[DEVICE][1], name="coordinate gradient", **tol)


def test_hulls_separated():
    """GJK with hill-climbed supports: the same certificates on both devices (float64 hulls)."""
    cpu, dev = _library(torch.float64)
    ia, ib, pa, pb = _queries(torch.float64)
    want = hulls_separated(cpu, ia, ib, pa, pb)
    assert bool(want.any()) and not bool(want.all())
    close(want, hulls_separated(dev, *to_dev(ia, ib, pa, pb)))
    close(want, hulls_separated(cpu.hulls.to(DEVICE), *to_dev(ia, ib, pa, pb)))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_mesh_distance_and_collide(dtype):
    cpu, dev = _library(dtype)
    ia, ib, pa, pb = _queries(dtype)
    hit = mesh_collide(cpu, ia, ib, pa, pb)
    assert bool(hit.any()) and not bool(hit.all())
    close(hit, mesh_collide(dev, *to_dev(ia, ib, pa, pb)))
    tol = dict(rtol=1e-10, atol=1e-12) if dtype == torch.float64 else dict(rtol=1e-4, atol=1e-6)
    for ub in (None, 0.01):
        want = mesh_distance(cpu, ia, ib, pa, pb, ub)
        got = mesh_distance(dev, *to_dev(ia, ib, pa, pb), ub)
        close(want.distance, got.distance, name="distance", **tol)
        # witnesses: ties between triangle pairs may resolve differently; the points must still be
        # at the same distance apart wherever something was found
        found = want.tri_a >= 0
        close(found, got.tri_a.cpu() >= 0, name="found")
        sep = (got.point_a.cpu() - got.point_b.cpu()).norm(dim=1)
        close(want.distance[found], sep[found], name="witness distance", **tol)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_point_mesh_distance_and_gradient(dtype):
    """Values exactly where the search is discrete (inside flags, cut-offs, padding), distances and
    winding numbers to rounding; faces may differ only between ties, so the distance to the
    reported face is compared; gradients of the signed distance from the same upstream gradient."""
    cpu, dev = _library(dtype)
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(-1, 5, (2000,), generator=g)
    points = ((torch.rand(2000, 3, generator=g, dtype=torch.float64) - 0.5) * 0.2).to(dtype)
    points[:20] *= 1e4  # far
    tol = dict(rtol=1e-10, atol=1e-12) if dtype == torch.float64 else dict(rtol=1e-4, atol=1e-6)
    for bound in (None, 0.01):
        want = point_mesh_distance(cpu, ids, points, bound)
        got = point_mesh_distance(dev, ids.to(DEVICE), points.to(DEVICE), bound)
        close(want.distance, got.distance, name="distance", **tol)
        close(want.winding, got.winding, name="winding", **tol)
        close(want.inside, got.inside, name="inside")
        close(want.tri >= 0, got.tri.cpu() >= 0, name="found")
    x = points.clone().requires_grad_(True)
    xd = points.to(DEVICE).requires_grad_(True)
    upstream = torch.randn(2000, generator=g, dtype=torch.float64).to(dtype)
    real = ids >= 0  # padding queries are +inf, without gradient
    (point_mesh_signed_distance(cpu, ids, x)[real] * upstream[real]).sum().backward()
    (point_mesh_signed_distance(dev, ids.to(DEVICE), xd)[real.to(DEVICE)] * upstream[real].to(DEVICE)).sum().backward()
    close(x.grad, xd.grad, name="gradient", **tol)


def _contact_order(c: ops.Contacts, faces: int):
    """Row order by (query, tri_a, tri_b); faces bounds every triangle id."""
    query = c.query_index().cpu()
    return torch.argsort((query * faces + c.tri_a.cpu()) * faces + c.tri_b.cpu())


def _contacts_close(want: ops.Contacts, got: ops.Contacts, faces: int, ordered: bool):
    close(want.counts, got.counts, name="counts")
    close(want.offsets, got.offsets, name="offsets")
    kw, kg = (slice(None), slice(None)) if ordered else (_contact_order(want, faces), _contact_order(got, faces))
    for name, a, b in zip(want._fields, want, got):
        if name in ("counts", "offsets"):
            continue
        close(a[kw], b.cpu()[kg], rtol=1e-9, atol=1e-12, name=name)


def test_blem_contacts_raw_clustered_and_rows():
    cpu, dev = _library(torch.float64)
    ia, ib, pa, pb = _queries(torch.float64, 60)
    ra = 0.004 * torch.rand(60, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    raw = blem_contacts(cpu, ia, ib, pa, pb, ra, 0.002)
    assert raw.intersecting.any() and int(raw.counts.max()) > 64  # both clustering regimes below
    raw_dev = blem_contacts(dev, *to_dev(ia, ib, pa, pb), ra.to(DEVICE), 0.002)
    faces = int(cpu.faces.shape[0])
    _contacts_close(raw, raw_dev, faces, ordered=False)  # the traversal order is each device's own
    for k in (1, 4, 16):
        # the clustering op itself, on the same (CPU-ordered) input
        _contacts_close(cluster_contacts(raw, k), cluster_contacts(ops.Contacts(*to_dev(*raw)), k), faces,
                        ordered=True)
        # the fused path (traversal, clustering, blem_contact_rows for the kept rows) clusters the
        # device's own traversal order, so it equals the clustering op on that device's raw contacts
        got = blem_contacts(dev, *to_dev(ia, ib, pa, pb), ra.to(DEVICE), 0.002, max_contacts=k)
        _contacts_close(cluster_contacts(ops.Contacts(*(t.cpu() for t in raw_dev)), k), got, faces, ordered=True)


# ---- LOCC crop ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("grid", [2, 6, 16])
def test_locc_crop(dtype, grid):
    from tests.ops.test_locc_crop import _inputs

    aabb, rotation, offset, reach = _inputs(500, grid, dtype)
    # adversarial rows (as test_adversarial_cases): a flat box, centres exactly on the reach,
    # everything kept, nothing kept
    rotation[:4] = torch.eye(3, dtype=dtype)
    aabb[0] = torch.tensor([[-0.1, -0.1, 0.0], [0.1, 0.1, 0.0]], dtype=dtype)
    offset[1], reach[1] = 0.0, 0.05
    aabb[1] = torch.tensor([[-0.06, -0.06, -0.06], [0.06, 0.06, 0.06]], dtype=dtype)
    reach[2] = 1e9
    offset[3] = 1e9
    want = locc_crop(aabb, rotation, offset, reach, grid)
    got = locc_crop(*to_dev(aabb, rotation, offset, reach), grid)
    close(want.weights, got.weights, rtol=0, atol=0, name="weights")
    close(want.count, got.count, rtol=0, atol=0, name="count")
    tol = 1e-12 if dtype == torch.float64 else 1e-6
    close(want.mean_own, got.mean_own, rtol=tol, atol=tol, name="mean_own")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("grid", [2, 16])
def test_locc_crop_pool(dtype, grid):
    from tests.ops.test_locc_crop import _pool_inputs

    args, table, ids = _pool_inputs(300, grid, dtype, grid)
    args[2][:3] = 1e9  # nothing kept
    want = locc_crop_pool(*args, grid, table, ids)
    got = locc_crop_pool(*to_dev(*args), grid, *to_dev(table, ids))
    tol = 1e-12 if dtype == torch.float64 else 1e-6
    close(want.pooled, got.pooled, rtol=tol, atol=tol, name="pooled")
    close(want.count, got.count, rtol=0, atol=0, name="count")
    close(want.mean_own, got.mean_own, rtol=tol, atol=tol, name="mean_own")


# ---- LOCC's surface-point co-occupancy and containment tests ----------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_locc_point_cooccupancy(dtype):
    from tests.ops.test_locc_cooccupancy import _inputs

    args = _inputs(400, 1, dtype)
    dev = tuple(a.to(DEVICE) if isinstance(a, torch.Tensor) else a for a in args)
    tol = 1e-12 if dtype == torch.float64 else 1e-6
    upstream = torch.randn(400, args[1].shape[2], dtype=dtype)
    for count in (1, 7, 1000):  # the rank cut at every query, at some, at none
        grads = []
        for inputs, up in ((args, upstream), (dev, upstream.to(DEVICE))):
            pq, keys, r, t = (inputs[i].clone().requires_grad_(True) for i in (1, 2, 7, 8))
            values = locc_point_cooccupancy(inputs[0], pq, keys, *inputs[3:7], r, t, inputs[9], count)
            grads.append((values.detach(), *torch.autograd.grad((values * up).sum(), (r, t, pq, keys))))
        names = ("values", "d rotation", "d translation", "d point_queries", "d keys")
        for name, want, got in zip(names, *grads):
            close(want, got, rtol=tol, atol=tol, name=f"{name}, count {count}")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_dipoles_enclose(dtype):
    from tests.ops.test_dipole_winding import _table

    dipoles = _table(dtype)
    g = torch.Generator().manual_seed(2)
    ids = torch.randint(3, (500,), generator=g)
    probes = (1.5 * (torch.rand(500, 16, 3, generator=g, dtype=torch.float64) - 0.5)).to(dtype)
    probes[:100] *= 0.2  # deep inside the large sphere: all probes inside there
    want = dipoles_enclose(dipoles, ids, probes)
    assert want.any() and not want.all()
    close(want, dipoles_enclose(*to_dev(dipoles, ids, probes)), name="enclosed")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cloud_depth(dtype):
    from contactnet.models.geometry import frame_into
    from contactnet.ops.cloud_depth import cloud_depth
    from tests.ops.test_cloud_depth import blobs, queries, sorted_clouds

    g = torch.Generator().manual_seed(4)
    points, normals = blobs(6, 400, g, dtype)
    p, nrm, aabb, starts = sorted_clouds(points, normals, 16)
    ids_a, ids_b, pose_a, pose_b = queries(6, 500, g, dtype)
    rotation, translation = (x.contiguous() for x in frame_into(pose_a, pose_b))
    radius = torch.full((500,), 0.012, dtype=dtype)
    args = (p, nrm, starts, ids_a, ids_b, radius, rotation, translation, aabb[ids_b].contiguous())
    want = torch.ops.contactnet.cloud_depth(*args, 4)
    got = torch.ops.contactnet.cloud_depth(*to_dev(*args), 4)
    tol = 1e-12 if dtype == torch.float64 else 1e-6
    close(want[0], got[0], rtol=tol, atol=tol, name="depth")
    if dtype == torch.float64:  # float32 rounding may swap near-equal neighbours
        close(want[1], got[1], name="own point")
        close(want[2], got[2], name="neighbours")
    assert (want[0] < 0.012).any()
    # The pose gradient (torch at the chosen point) on the device as on the CPU.
    grads = []
    for inputs in (args, to_dev(*args)):
        t = inputs[7].clone().requires_grad_(True)
        depth = cloud_depth(*inputs[:7], t, inputs[8])
        grads.append(torch.autograd.grad(depth.sum(), t)[0])
    close(grads[0], grads[1], rtol=tol * 100, atol=tol * 100, name="d translation")

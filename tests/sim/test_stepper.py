"""The stepper's mechanics: input checks, derivatives, free flight, padding, reset, failure reports."""

import math
import warnings

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies

from contactnet.ops import ipc
from contactnet.sim import Scene, StepNotConverged, Stepper, box_mesh
from contactnet.sim.reference import affine_jacobian, body_gradient_hessian
from tests.sim.penetration_oracle import PenetrationOracle, run_checked

CUBE = box_mesh((0.05, 0.05, 0.05), name="cube")


def resting_cubes(gap=5e-4, tilt=0.0):
    scene = Scene()
    scene.add_ground()
    scene.add_body(CUBE, pose=[0, 0, 0.025 + gap, 1, 0, 0, 0])
    scene.add_body(CUBE, pose=[0.01, 0, 0.075 + 2 * gap + 0.002 * (tilt > 0),
                               math.cos(tilt / 2), math.sin(tilt / 2), 0, 0])
    return scene


def test_bad_arguments_raise_clear_errors():
    scene = resting_cubes()
    for kwargs, match in [({"dt": 0.0}, "dt"), ({"dt": -1.0}, "dt"), ({"dhat": 0.0}, "dhat"),
                          ({"kappa": -1.0}, "kappa"), ({"mu": -0.1}, "mu"), ({"on_failure": "x"}, "on_failure"),
                          ({"fixed_iterations": 0}, "fixed_iterations"), ({"num_envs": 3, "scenes": [scene]}, "num_envs")]:
        args = {"scenes": scene, **kwargs}
        with pytest.raises(ValueError, match=match):
            Stepper(**args)
    with pytest.raises(TypeError, match="scenes"):
        Stepper([object()])
    with pytest.raises(ValueError, match="at least one body"):
        Stepper(Scene())


def test_a_replaced_state_of_the_wrong_kind_is_refused_before_the_step():
    """A step checks its state once, then hands the ops unchecked tensors (`ipc.trusted_inputs`)."""
    sim = Stepper(resting_cubes())
    good = sim.q
    for name, value, error in [("q", good.float(), TypeError), ("q", good[:, :1], ValueError),
                               ("qdot", sim.qdot.transpose(1, 2).contiguous().transpose(1, 2), ValueError),
                               ("time", sim.time.float(), TypeError)]:
        before = getattr(sim, name)
        setattr(sim, name, value)
        with pytest.raises(error, match=name):
            sim.step()
        setattr(sim, name, before)
    sim.step()


def test_bad_bodies_raise_clear_errors():
    scene = Scene()
    with pytest.raises(ValueError, match="kind"):
        scene.add_body(CUBE, kind="floating")
    with pytest.raises(ValueError, match="trajectory"):
        scene.add_body(CUBE, kind="kinematic")
    with pytest.raises(ValueError, match="pose"):
        scene.add_body(CUBE, pose=[0, 0, float("nan"), 1, 0, 0, 0])
    with pytest.raises(ValueError, match="pose"):
        scene.add_body(CUBE, pose=[0, 0, 0])
    with pytest.raises(ValueError, match="velocity"):
        scene.add_body(CUBE, velocity=[0, 0, 1])
    with pytest.raises(ValueError, match="density"):
        scene.add_body(CUBE, density=-1.0)
    with pytest.raises(ValueError, match="velocity"):
        scene.add_body(CUBE, kind="static", velocity=[1, 0, 0, 0, 0, 0])


def test_overlapping_or_touching_initial_bodies_are_rejected():
    scene = Scene()
    scene.add_ground()
    scene.add_body(CUBE, pose=[0, 0, 0.02, 1, 0, 0, 0], name="sunk")
    with pytest.raises(ValueError, match="overlap"):
        Stepper(scene)
    inside = Scene()
    inside.add_body(box_mesh((0.2, 0.2, 0.2)), name="big")
    inside.add_body(CUBE, name="small")  # contained: no surface intersection
    with pytest.raises(ValueError, match="overlap"):
        Stepper(inside)
    touching = Scene()
    touching.add_ground()
    touching.add_body(CUBE, pose=[0, 0, 0.025, 1, 0, 0, 0])
    with pytest.raises(ValueError, match="overlap|touch"):
        Stepper(touching)


def test_free_fall_follows_implicit_euler_exactly():
    scene = Scene()
    scene.add_body(CUBE, pose=[0, 0, 1.0, 1, 0, 0, 0], velocity=[0.5, 0, 0, 0, 0, 0.3])
    h = 0.01
    sim = Stepper(scene, dt=h)
    for n in range(1, 21):
        sim.step()
    # v_n = v_0 + n h g, x_n = x_0 + h Σ v_k
    z = 1.0 - 9.81 * h * h * n * (n + 1) / 2
    torch.testing.assert_close(sim.poses[0, 0, 2], torch.tensor(z, dtype=torch.float64), atol=1e-9, rtol=0)
    torch.testing.assert_close(sim.poses[0, 0, 0], torch.tensor(0.5 * n * h, dtype=torch.float64), atol=1e-9, rtol=0)
    v = sim.velocities[0, 0]
    assert v[2].item() == pytest.approx(-9.81 * h * n, abs=1e-8)
    assert v[5].item() == pytest.approx(0.3, abs=1e-3)  # spin kept (implicit Euler damps it slowly)


def test_contact_gradient_and_hessian_chain_rule_match_the_ops():
    sim = Stepper(resting_cubes(tilt=0.02), num_envs=2)
    x = sim.positions(sim.q)
    c = sim._candidates(x)
    assert c.count > 0
    st = ipc.candidate_stencils(sim.faces, sim.edges, c)
    torch.manual_seed(0)
    lg = torch.randn(st.shape[0], 12, dtype=torch.float64)
    lh = torch.randn(st.shape[0], 12, 12, dtype=torch.float64)
    is_fv = torch.arange(st.shape[0]) < c.face_vertex.shape[0]
    gy, hy, body = sim._chain_rule(st, lg, lh, is_fv)
    E, B = sim.num_envs, sim.max_bodies
    ref = body_gradient_hessian(lg, lh, st, sim.vertex_body, affine_jacobian(sim.rest), E * B)
    g = torch.zeros(E * B, 12, dtype=torch.float64).index_add(0, body.reshape(-1), gy.reshape(-1, 12))
    torch.testing.assert_close(sim._to_q_order(g, 1), ref.gradient)
    # body-pair blocks of this environment's rows and columns, as _gradient_hessian accumulates them
    dense = ref.matrix.to_dense().reshape(E, B, 12, E, B, 12)
    dense = torch.stack([dense[e, :, :, e] for e in range(E)])
    key = body[:, :, None] * B + body[:, None, :] % B
    blocks = torch.zeros(E * B * B, 4, 3, 3, 4, dtype=torch.float64)
    blocks.index_add_(0, key.reshape(-1), hy.permute(0, 1, 5, 2, 3, 4, 6).reshape(-1, 4, 3, 3, 4))
    ours = blocks.reshape(E, B, B, 4, 3, 3, 4).permute(0, 1, 4, 3, 2, 5, 6).reshape(E, B, 12, B, 12)
    ours = sim._to_q_order(sim._to_q_order(ours, 2), 4)
    torch.testing.assert_close(ours, dense)


def test_fused_body_pair_derivatives_equal_the_torch_chain_rule():
    """The op the potential uses (ipc_body_pair_derivatives) against potential.chain_rule, float64 to
    1e-12 relative, on two environments' stencils with random local derivatives."""
    from contactnet.ops.ipc import body_pair_derivatives
    sim = Stepper(resting_cubes(tilt=0.02), num_envs=2)
    c = sim._candidates(sim.positions(sim.q))
    st = ipc.candidate_stencils(sim.faces, sim.edges, c)
    assert c.face_vertex.shape[0] > 0 and c.edge_edge.shape[0] > 0
    torch.manual_seed(1)
    lg = torch.randn(st.shape[0], 12, dtype=torch.float64)
    lh = torch.randn(st.shape[0], 12, 12, dtype=torch.float64)
    is_fv = torch.arange(st.shape[0]) < c.face_vertex.shape[0]
    gy, hy, _ = sim._chain_rule(st, lg, lh, is_fv)
    g_ref = sim._to_q_order(gy.reshape(-1, 2, 12), 2)
    h_ref = hy.permute(0, 1, 5, 3, 2, 4, 6).reshape(-1, 2, 2, 12, 12)  # [s, t, (i, α), (j, β)]
    h_ref = sim._to_q_order(sim._to_q_order(h_ref, 3), 4)
    out = body_pair_derivatives(lg, lh, st, is_fv, sim.rest)
    torch.testing.assert_close(out.gradient, g_ref, rtol=1e-12, atol=1e-12 * float(g_ref.abs().max()))
    torch.testing.assert_close(out.hessian, h_ref, rtol=1e-12, atol=1e-12 * float(h_ref.abs().max()))


@settings(max_examples=300, deadline=None)
@given(mu=strategies.one_of(strategies.just(0.0), strategies.floats(1e-150, 1e150)))
def test_the_shared_friction_of_a_pair_rounds_to_itself(mu):
    """`PackedScene.candidate_friction` skips √(μ_a μ_b) where every body has one μ: √(μ·μ) rounds
    to μ in binary floating point (no underflow)."""
    t = torch.tensor([mu], dtype=torch.float64)
    assert torch.sqrt(t * t).item() == mu


def test_candidate_friction_is_the_pairs_friction():
    """Shared or mixed μ, each candidate's friction is √(μ_a μ_b) of its two bodies, bit for bit."""
    mixed = Scene()
    mixed.add_ground(friction=0.9)
    mixed.add_body(CUBE, pose=[0, 0, 0.0253, 1, 0, 0, 0], friction=0.3)
    mixed.add_body(CUBE, pose=[0.01, 0, 0.0757, 1, 0, 0, 0])
    for scene, mu, shared in ((resting_cubes(), 0.37, 0.37), (mixed, 0.5, None)):
        sim = Stepper(scene, mu=mu, dhat=1e-3)
        x = sim.positions(sim.q)
        cand = sim._candidates(x, sim.q)
        assert cand.count > 0 and sim.packed.uniform_friction == shared
        want = sim._pair_friction(ipc.candidate_stencils(sim.faces, sim.edges, cand))
        assert torch.equal(sim.packed.candidate_friction(cand), want)
    assert want.unique().numel() == 2  # the mixed scene's pairs: √(0.9·0.3) and √(0.3·0.5)
    # A μ changed in place after packing (one body's, mid-run) is read, not the shared one.
    sim = Stepper(resting_cubes(), mu=0.37, dhat=1e-3)
    cand = sim._candidates(sim.positions(sim.q), sim.q)
    sim.friction[0, 2] = 0.1  # the top cube: its pairs with the lower one change, the ground's do not
    want = sim._pair_friction(ipc.candidate_stencils(sim.faces, sim.edges, cand))
    assert torch.equal(sim.packed.candidate_friction(cand), want) and want.unique().numel() == 2


def test_gradient_is_the_derivative_of_the_energy():
    sim = Stepper(resting_cubes(tilt=0.02), mu=0.4)
    for _ in range(3):
        sim.step()
    q_hat, w = sim._targets(sim.time + sim.dt)
    x_t = sim.positions(sim.q)
    fc = sim._candidates(x_t)
    lag = (fc, sim._pair_friction(ipc.candidate_stencils(sim.faces, sim.edges, fc)))
    torch.manual_seed(2)
    q = sim.q + 1e-6 * torch.randn_like(sim.q) * sim.free_dof[..., None]
    grad, H = sim._gradient_hessian(q, q_hat, w, x_t, lag)
    d = torch.randn_like(q) * sim.free_dof[..., None] * 1e-7
    eps = 1e-3
    fd = (sim._energy(q + eps * d, q_hat, w, x_t, lag) - sim._energy(q - eps * d, q_hat, w, x_t, lag)) / (2 * eps)
    assert fd.item() == pytest.approx((grad.reshape(-1) @ d.reshape(-1)).item(), rel=1e-5)
    assert torch.linalg.eigvalsh(H[0]).min() > -1e-8 * torch.linalg.eigvalsh(H[0]).max()


def test_padded_environments_match_their_own_runs():
    one = Scene()
    one.add_ground()
    one.add_body(CUBE, pose=[0, 0, 0.04, 1, 0, 0, 0])
    two = resting_cubes()
    together = Stepper([one, two], dt=0.01)
    apart = [Stepper(s, dt=0.01, kappa=together.kappa) for s in (one, two)]
    assert together.max_bodies == 3 and together.body_mask.tolist() == [[True, True, False], [True, True, True]]
    for _ in range(15):
        together.step()
        for sim in apart:
            sim.step()
    torch.testing.assert_close(together.poses[0, :2], apart[0].poses[0], atol=1e-9, rtol=0)
    torch.testing.assert_close(together.poses[1], apart[1].poses[0], atol=1e-9, rtol=0)


def test_reset_restores_chosen_environments():
    sim = Stepper(resting_cubes(), num_envs=3)
    start = sim.poses.clone()
    for _ in range(5):
        sim.step()
    moved = sim.poses.clone()
    sim.reset([1])
    torch.testing.assert_close(sim.poses[1], start[1])
    torch.testing.assert_close(sim.poses[0], moved[0])
    assert sim.time.tolist() == pytest.approx([0.05, 0.0, 0.05])
    with pytest.raises(ValueError, match="env_ids"):
        sim.reset([3])


def test_resting_contact_force_carries_the_weight():
    sim = Stepper(resting_cubes(), dt=0.01)
    run_checked(sim, 60)
    weight = 1000 * 0.05**3 * 9.81
    f = sim.contact_forces[0]
    # at rest every cube's net contact force balances its weight; the ground carries both
    assert f[2, 2].item() == pytest.approx(weight, rel=1e-3)
    assert f[1, 2].item() == pytest.approx(weight, rel=1e-3)
    assert f[0, 2].item() == pytest.approx(-2 * weight, rel=1e-3)
    assert f[:, :2].abs().max() < 1e-3 * weight
    assert sim.velocities[0, 1:].abs().max() < 1e-4


def test_fixed_iterations_and_failure_reports():
    scene = Scene()
    scene.add_ground()
    scene.add_body(CUBE, pose=[0, 0, 0.0262, 1, 0, 0, 0], velocity=[0, 0, -1.0, 0, 0, 0])
    fixed = Stepper(scene, fixed_iterations=3)
    info = fixed.step()
    assert info.iterations == 3 and info.converged.shape == (1,)  # converged: met the tolerance or not
    with pytest.warns(RuntimeWarning, match="did not converge"):
        Stepper(scene, max_iterations=1).step()
    with pytest.raises(StepNotConverged):
        Stepper(scene, max_iterations=1, on_failure="raise").step()
    quiet = Stepper(scene, max_iterations=1, on_failure="ignore")
    oracle = PenetrationOracle(quiet)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        info = oracle.step()
    assert not bool(info.converged.all())
    oracle.check()  # an unconverged step is still intersection-free


def test_kinematic_body_follows_its_script_and_pushes():
    def script(t):
        pose = torch.zeros(*t.shape, 7, dtype=torch.float64)
        pose[..., 0] = -0.1 + 0.2 * t  # 0.2 m/s along x
        pose[..., 2] = 0.026
        pose[..., 3] = 1
        return pose

    scene = Scene()
    scene.add_ground(friction=0.0)
    scene.add_body(CUBE, kind="kinematic", trajectory=script, name="pusher")
    scene.add_body(CUBE, pose=[0.0, 0, 0.0255, 1, 0, 0, 0], friction=0.0, name="pushed")
    sim = Stepper(scene, dt=0.01)
    run_checked(sim, 60)
    assert sim.poses[0, 1, 0].item() == pytest.approx(-0.1 + 0.2 * 0.6, abs=1e-6)
    assert sim.poses[0, 2, 0].item() > 0.05 - 0.1 + 0.12 - 1e-3  # pushed ahead of the pusher

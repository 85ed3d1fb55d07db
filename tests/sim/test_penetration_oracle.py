"""The penetration oracle the scene tests rely on fails on what it must catch: a body that tunnels
through another within one step (both end states apart), and one that ends inside another (no
surface intersection); and it passes a genuine simulation."""

import pytest
import torch

from contactnet.sim import Scene, Stepper, box_mesh
from contactnet.sim.affine import pose_to_q
from tests.sim.penetration_oracle import PenetrationOracle

CUBE = box_mesh((0.05, 0.05, 0.05), name="cube")


def falling_cube() -> Stepper:
    scene = Scene()
    scene.add_ground(thickness=0.1)
    scene.add_body(CUBE, pose=[0, 0, 0.03, 1, 0, 0, 0], name="cube")
    return Stepper(scene, dt=0.01)


def teleport(sim: Stepper, z: float) -> None:
    """Put the cube (body 1) at height z: a state the stepper would never produce."""
    sim.q[0, 1] = pose_to_q(torch.tensor([0, 0, z, 1, 0, 0, 0], dtype=torch.float64))


def test_passes_a_real_step():
    sim = falling_cube()
    oracle = PenetrationOracle(sim)
    for _ in range(5):
        oracle.step()
    oracle.check()
    assert oracle.steps_checked == 5


def test_catches_a_body_that_tunnels_through_another_in_one_step():
    sim = falling_cube()
    oracle = PenetrationOracle(sim)
    oracle.step()
    teleport(sim, -0.2)  # through the 0.1 m thick ground: both end states are apart
    oracle.record()
    with pytest.raises(AssertionError, match="step 1: the motion of the step has an impact"):
        oracle.check()


def test_catches_a_body_inside_another():
    sim = falling_cube()
    oracle = PenetrationOracle(sim)
    teleport(sim, -0.05)  # wholly inside the ground box (z in [-0.1, 0]): no surface intersection
    oracle.record()
    # the end state is checked first: containment is reported, not (only) the crossing motion
    with pytest.raises(AssertionError, match=r"step 0: bodies 0 \('ground'\) and 1 \('cube'\) .* collide"):
        oracle.check()

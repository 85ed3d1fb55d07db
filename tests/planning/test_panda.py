"""The Panda from robosuite's wheel (read from the zip, robosuite not installed): URDF + STL collision
meshes extracted, forward kinematics against the numpy composition, bodies, self pairs, free at the
ready pose. Skipped without a local wheel (no network in the tests)."""

import os
from pathlib import Path

import pytest
import torch

from contactnet.data.robosuite_meshes import WHEEL_ENV
from contactnet.planning import CollisionChecker, CollisionWorld, Robot, RobotChecker
from contactnet.planning.panda import PANDA_IGNORE, PANDA_READY, extract_panda
from tests.planning.robots import random_q
from tests.planning.urdf_reference import link_transforms

CACHE = Path(__file__).resolve().parents[2] / "data" / "meshes" / "robosuite"


def _wheel():
    if os.environ.get(WHEEL_ENV) and Path(os.environ[WHEEL_ENV]).is_file():
        return Path(os.environ[WHEEL_ENV])
    found = sorted((CACHE / ".cache").glob("robosuite-*.whl"))
    return found[-1] if found else None


@pytest.fixture(scope="module")
def panda(tmp_path_factory):
    wheel = _wheel()
    if wheel is None:
        pytest.skip(f"no robosuite wheel here (set {WHEEL_ENV} or run python -m contactnet.data.robosuite_meshes "
                    f"once to cache one under data/meshes/robosuite/.cache); the tests do not download")
    urdf = extract_panda(tmp_path_factory.mktemp("robots"), wheel=wheel, download=False)
    world = CollisionWorld(dtype=torch.float64, num_points=64)
    return world, Robot(urdf, world, ignore=PANDA_IGNORE)


def test_panda_loads_with_stl_collision_meshes(panda):
    world, robot = panda
    # panda_finger_joint2 mimics panda_finger_joint1: q is the 7 arm joints and one finger.
    assert robot.joint_names == [f"panda_joint{i}" for i in range(1, 8)] + ["panda_finger_joint1"]
    assert robot.dof == 8 and robot.full_joint_names[-1] == "panda_finger_joint2"
    assert robot.body_names == [f"panda_link{i}" for i in range(8)] + ["panda_hand", "panda_leftfinger",
                                                                      "panda_rightfinger"]
    # link8 has no geometry: the hand is adjacent to link7 through it; the fingers to the hand.
    assert robot.adjacent("panda_link7", "panda_hand") and robot.adjacent("panda_hand", "panda_leftfinger")
    assert ("panda_leftfinger", "panda_rightfinger") not in robot.self_pairs
    assert len(robot.self_pairs) == 11 * 10 // 2 - 10 - 1  # 10 adjacent pairs, 1 ignored
    # The collision meshes are the STL files (metres: the arm's links span tens of centimetres).
    extent = torch.stack([world.library[int(i)].bounds() for i in robot.body_mesh])
    size = (extent[:, 1] - extent[:, 0]).max(1).values
    assert bool((size > 0.02).all() and (size < 0.4).all())


def test_panda_fk_matches_numpy_composition(panda):
    world, robot = panda
    q = random_q(robot, 8, seed=0)
    t = robot.link_transforms(q)
    for k in range(len(q)):
        ref = link_transforms(robot.model.text, dict(zip(robot.joint_names, q[k].tolist())))
        for link, frame in robot.chain.frame_to_idx.items():
            torch.testing.assert_close(t[k, frame], torch.as_tensor(ref[link]), atol=1e-6, rtol=0)
    # The hand at the ready pose: 0.107 m past link7's flange (panda_joint8), pointing down.
    ready = robot.link_transforms(torch.tensor([PANDA_READY], dtype=torch.float64))[0]
    hand = ready[robot.chain.frame_to_idx["panda_hand"]]
    assert float(hand[2, 2]) < -0.999  # the hand's z axis points down


def test_panda_ready_pose_is_free(panda):
    world, robot = panda
    rc = RobotChecker(robot, CollisionChecker(world, "exact"), world_collision=False)
    res = rc.query(torch.tensor([[PANDA_READY]], dtype=torch.float64))
    assert not res.colliding.any()


def test_panda_second_finger_follows_the_first(panda):
    world, robot = panda
    q = random_q(robot, 6, seed=1)
    full = robot.full_q(q)
    torch.testing.assert_close(full[:, -1], q[:, -1])  # <mimic joint="panda_finger_joint1"/>: 1 x + 0
    t = robot.link_transforms(q)
    left, right = (t[:, robot.chain.frame_to_idx[f"panda_{s}finger"]] for s in ("left", "right"))
    hand = t[:, robot.chain.frame_to_idx["panda_hand"]]
    # In the hand's frame the fingers sit symmetric about its z axis, each q[-1] from it along +-y.
    rel_left, rel_right = torch.linalg.solve(hand, left), torch.linalg.solve(hand, right)
    torch.testing.assert_close(rel_left[:, 1, 3], q[:, -1], atol=1e-9, rtol=0)
    torch.testing.assert_close(rel_right[:, 1, 3], -q[:, -1], atol=1e-9, rtol=0)

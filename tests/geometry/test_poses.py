"""Pose helpers: conversions round-trip, composition and inversion agree with 4x4 matrices."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from contactnet.geometry import (
    compose_poses,
    identity_poses,
    invert_poses,
    matrix_to_pose,
    matrix_to_quaternion,
    normalize_poses,
    pose_to_matrix,
    quaternion_to_matrix,
    transform_points,
    unit_quaternion_poses,
    unit_quaternions,
)
from tests.ops.mesh_cases import random_poses


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000))
def test_roundtrip_and_orthonormal(seed):
    p = random_poses(5, 1.0, seed=seed)
    r = quaternion_to_matrix(p[:, 3:])
    torch.testing.assert_close(r @ r.transpose(1, 2), torch.eye(3, dtype=torch.float64).expand(5, 3, 3))
    torch.testing.assert_close(torch.det(r), torch.ones(5, dtype=torch.float64))
    back = matrix_to_pose(pose_to_matrix(p))
    # q and -q are the same rotation
    same = torch.where((back[:, 3:] * p[:, 3:]).sum(1, keepdim=True) < 0, -back[:, 3:], back[:, 3:])
    torch.testing.assert_close(same, p[:, 3:])
    torch.testing.assert_close(back[:, :3], p[:, :3])


def test_compose_and_invert_match_matrices():
    a, b = random_poses(8, 1.0, seed=1), random_poses(8, 1.0, seed=2)
    torch.testing.assert_close(pose_to_matrix(compose_poses(a, b)), pose_to_matrix(a) @ pose_to_matrix(b))
    torch.testing.assert_close(pose_to_matrix(invert_poses(a)), torch.linalg.inv(pose_to_matrix(a)))
    x = torch.randn(8, 3, dtype=torch.float64)
    h = torch.cat([x, torch.ones(8, 1, dtype=torch.float64)], 1)
    torch.testing.assert_close(transform_points(a, x), (pose_to_matrix(a) @ h[..., None])[:, :3, 0])
    torch.testing.assert_close(compose_poses(invert_poses(a), a)[:, :3], torch.zeros(8, 3, dtype=torch.float64))


def test_matrix_to_quaternion_near_180_degrees():
    q = torch.tensor([[1e-9, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]], dtype=torch.float64)
    q = q / q.norm(dim=1, keepdim=True)
    torch.testing.assert_close(quaternion_to_matrix(matrix_to_quaternion(quaternion_to_matrix(q))),
                               quaternion_to_matrix(q))  # fmt: skip


def test_identity_and_normalise():
    p = identity_poses(2, 3, dtype=torch.float64)
    assert p.shape == (2, 3, 7)
    torch.testing.assert_close(pose_to_matrix(p), torch.eye(4, dtype=torch.float64).expand(2, 3, 4, 4))
    raw = torch.tensor([[1.0, 2, 3, 2, 0, 0, 0]])
    torch.testing.assert_close(normalize_poses(raw)[0, 3:], torch.tensor([1.0, 0, 0, 0]))
    with pytest.raises(ValueError, match="NaN"):
        normalize_poses(torch.tensor([[float("nan"), 0, 0, 1, 0, 0, 0]]))
    with pytest.raises(ValueError, match="zero quaternion"):
        normalize_poses(torch.zeros(1, 7))
    with pytest.raises(ValueError, match="shape"):
        normalize_poses(torch.zeros(1, 6))
    with pytest.raises(TypeError):
        normalize_poses(torch.zeros(1, 7, dtype=torch.int64))


def test_unchecked_unit_quaternions_keep_sign_position_and_gradient():
    raw = torch.tensor([[1.0, 2, 3, -2, 0, 0, 0], [0, 0, 0, 1, 1, 1, 1]], dtype=torch.float64, requires_grad=True)
    unit = unit_quaternion_poses(raw)
    torch.testing.assert_close(unit[:, :3], raw[:, :3])
    torch.testing.assert_close(unit[:, 3:], torch.tensor([[-1.0, 0, 0, 0], [0.5, 0.5, 0.5, 0.5]], dtype=torch.float64))
    assert torch.equal(unit_quaternions(raw[:, 3:]), unit[:, 3:])
    assert torch.equal(normalize_poses(raw), unit)  # the checked version adds only the checks
    # differentiable: scaling a quaternion does not change its unit quaternion
    (grad,) = torch.autograd.grad((unit[:, 3:] * torch.randn(2, 4, dtype=torch.float64)).sum(), raw)
    torch.testing.assert_close((grad[:, 3:] * raw[:, 3:]).sum(1), torch.zeros(2, dtype=torch.float64))
    assert bool(torch.isnan(unit_quaternions(torch.zeros(1, 4))).all())  # unchecked: zero gives NaN


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_quaternion_to_matrix_is_the_textbook_formula_bit_for_bit(dtype):
    """The vectorised form rounds as the entry-by-entry formula does, also for non-unit, zero,
    tiny and huge quaternions, and keeps batch shapes and gradients."""
    g = torch.Generator().manual_seed(0)
    q = torch.cat([torch.randn(500, 4, generator=g, dtype=dtype) * s for s in (1.0, 1e-20, 1e15, 3.0)])
    q[:5] = 0
    q[5:10, 1:] = 0
    w, x, y, z = q.unbind(-1)
    textbook = torch.stack([
        1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
        2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
        2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y),
    ], -1).reshape(-1, 3, 3)  # fmt: skip
    assert torch.equal(quaternion_to_matrix(q), textbook)
    assert quaternion_to_matrix(q[0]).shape == (3, 3)
    assert quaternion_to_matrix(q.reshape(4, 500, 4)).shape == (4, 500, 3, 3)
    if dtype == torch.float64:
        unit = torch.randn(3, 4, generator=g, dtype=dtype).requires_grad_()
        assert torch.autograd.gradcheck(quaternion_to_matrix, [unit])

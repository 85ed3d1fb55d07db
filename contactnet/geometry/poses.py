"""Rigid poses as `(..., 7)` tensors `[x, y, z, qw, qx, qy, qz]` (unit quaternion, metres), and
their conversions. Pure torch: any device, float32 or float64, any leading batch shape."""

import torch

__all__ = [
    "check_poses",
    "compose_poses",
    "identity_poses",
    "invert_poses",
    "matrix_to_pose",
    "normalize_poses",
    "pose_to_matrix",
    "quaternion_to_matrix",
    "matrix_to_quaternion",
    "transform_points",
    "unit_quaternion_poses",
    "unit_quaternions",
]


def check_poses(poses, name: str = "poses") -> None:
    """Raise TypeError/ValueError unless `poses` is a finite float tensor of shape (..., 7)."""
    if not isinstance(poses, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(poses).__name__}")
    if poses.dtype not in (torch.float32, torch.float64):
        raise TypeError(f"{name}: expected dtype float32 or float64, got {poses.dtype}")
    if poses.dim() < 1 or poses.shape[-1] != 7:
        raise ValueError(
            f"{name}: expected shape (..., 7) [x, y, z, qw, qx, qy, qz], got {tuple(poses.shape)}"
        )
    if not bool(torch.isfinite(poses).all()):
        raise ValueError(f"{name}: contains NaN or Inf")
    if bool((poses[..., 3:].norm(dim=-1) == 0).any()):
        raise ValueError(f"{name}: contains a zero quaternion")


def normalize_poses(poses: torch.Tensor, name: str = "poses") -> torch.Tensor:
    """Checked copy of `poses` with unit quaternions (the sign of q is kept)."""
    check_poses(poses, name)
    return unit_quaternion_poses(poses)


def unit_quaternions(q: torch.Tensor) -> torch.Tensor:
    """(..., 4) quaternions divided by their norm, unchecked and differentiable (a zero quaternion
    gives NaN): for inputs already checked, drawn here, or on a path that must not synchronise."""
    return q / q.norm(dim=-1, keepdim=True)


def unit_quaternion_poses(poses: torch.Tensor) -> torch.Tensor:
    """(..., 7) poses with unit quaternions (sign kept), unchecked: see `unit_quaternions`;
    `normalize_poses` is the checked version for user input."""
    return torch.cat([poses[..., :3], unit_quaternions(poses[..., 3:])], dim=-1)


def identity_poses(*shape: int, dtype=torch.float32, device=None) -> torch.Tensor:
    """Identity poses of shape (*shape, 7)."""
    p = torch.zeros(*shape, 7, dtype=dtype, device=device)
    p[..., 3] = 1
    return p


# R's nine entries, row by row, each base + coef · (a b + sign · c d) over [w, x, y, z]: the textbook
# forms 1 − 2 (y² + z²), 2 (x y − w z), … with the same roundings (the sign and coefficient
# products are exact), in a few tensor ops instead of about thirty (this runs every step of a
# scripted body).
_ROTATION_TERMS = (  # (a, b, c, d, sign, base, coef)
    (2, 2, 3, 3, 1, 1, -2), (1, 2, 0, 3, -1, 0, 2), (1, 3, 0, 2, 1, 0, 2),
    (1, 2, 0, 3, 1, 0, 2), (1, 1, 3, 3, 1, 1, -2), (2, 3, 0, 1, -1, 0, 2),
    (1, 3, 0, 2, -1, 0, 2), (2, 3, 0, 1, 1, 0, 2), (1, 1, 2, 2, 1, 1, -2),
)  # fmt: skip
_rotation_constants: dict = {}


def quaternion_to_matrix(q: torch.Tensor) -> torch.Tensor:
    """(..., 4) [qw, qx, qy, qz] unit quaternions -> (..., 3, 3) rotation matrices."""
    key = (q.dtype, q.device)
    if key not in _rotation_constants:
        columns = torch.tensor(_ROTATION_TERMS, dtype=torch.float64).T
        _rotation_constants[key] = (columns[:4].to(torch.int64).reshape(-1).to(q.device),
                                    *(c.to(q.dtype).to(q.device) for c in columns[4:]))
    index, sign, base, coef = _rotation_constants[key]
    f = q.index_select(-1, index).unflatten(-1, (4, 9))
    a, b, c, d = f.unbind(-2)
    return (base + coef * (a * b + sign * (c * d))).reshape(*q.shape[:-1], 3, 3)


def matrix_to_quaternion(r: torch.Tensor) -> torch.Tensor:
    """(..., 3, 3) rotation matrices -> (..., 4) unit quaternions [qw, qx, qy, qz] with qw >= 0.

    Uses the numerically best of the four closed forms per matrix (largest diagonal term).
    """
    m = r
    t = m[..., 0, 0] + m[..., 1, 1] + m[..., 2, 2]
    cands = torch.stack(
        [
            torch.stack([1 + t, m[..., 2, 1] - m[..., 1, 2], m[..., 0, 2] - m[..., 2, 0],
                         m[..., 1, 0] - m[..., 0, 1]], -1),
            torch.stack([m[..., 2, 1] - m[..., 1, 2], 1 + 2 * m[..., 0, 0] - t,
                         m[..., 0, 1] + m[..., 1, 0], m[..., 0, 2] + m[..., 2, 0]], -1),
            torch.stack([m[..., 0, 2] - m[..., 2, 0], m[..., 0, 1] + m[..., 1, 0],
                         1 + 2 * m[..., 1, 1] - t, m[..., 1, 2] + m[..., 2, 1]], -1),
            torch.stack([m[..., 1, 0] - m[..., 0, 1], m[..., 0, 2] + m[..., 2, 0],
                         m[..., 1, 2] + m[..., 2, 1], 1 + 2 * m[..., 2, 2] - t], -1),
        ],
        dim=-2,
    )  # fmt: skip
    diag = torch.stack([t, m[..., 0, 0], m[..., 1, 1], m[..., 2, 2]], -1)
    best = diag.argmax(-1)
    q = torch.gather(cands, -2, best[..., None, None].expand(*best.shape, 1, 4)).squeeze(-2)
    q = unit_quaternions(q)
    return torch.where(q[..., :1] < 0, -q, q)


def pose_to_matrix(poses: torch.Tensor) -> torch.Tensor:
    """(..., 7) poses -> (..., 4, 4) homogeneous matrices."""
    out = torch.zeros(*poses.shape[:-1], 4, 4, dtype=poses.dtype, device=poses.device)
    out[..., :3, :3] = quaternion_to_matrix(poses[..., 3:])
    out[..., :3, 3] = poses[..., :3]
    out[..., 3, 3] = 1
    return out


def matrix_to_pose(matrices: torch.Tensor) -> torch.Tensor:
    """(..., 4, 4) homogeneous rigid matrices -> (..., 7) poses."""
    return torch.cat([matrices[..., :3, 3], matrix_to_quaternion(matrices[..., :3, :3])], dim=-1)


def _quat_mul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    aw, ax, ay, az = a.unbind(-1)
    bw, bx, by, bz = b.unbind(-1)
    return torch.stack(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ],
        dim=-1,
    )


def transform_points(poses: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
    """Apply poses (..., 7) to points (..., 3) (broadcasting): R p + t."""
    r = quaternion_to_matrix(poses[..., 3:])
    return (r @ points[..., None]).squeeze(-1) + poses[..., :3]


def compose_poses(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a ∘ b: the pose that applies b first, then a (T_a T_b as matrices)."""
    return torch.cat([transform_points(a, b[..., :3]), _quat_mul(a[..., 3:], b[..., 3:])], dim=-1)


def invert_poses(poses: torch.Tensor) -> torch.Tensor:
    """Inverse rigid transforms: T^-1 with R^T and -R^T t."""
    # The conjugate without a constant tensor: a host-to-device copy would break CUDA graph capture.
    qi = torch.cat([poses[..., 3:4], -poses[..., 4:]], dim=-1)
    t = -(quaternion_to_matrix(qi) @ poses[..., :3, None]).squeeze(-1)
    return torch.cat([t, qi], dim=-1)

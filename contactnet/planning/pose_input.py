"""The one check of the constant poses a user hands the planning package (obstacle poses, a robot's
base pose, an attached object's pose, a camera pose): shape, finite values and a unit quaternion.

A quaternion whose norm is off 1 by more than `UNIT_QUATERNION_TOL` (1e-3) is refused: that is a
wrong order ([x, y, z, qx, qy, qz, qw] given for cuRobo's [x, y, z, qw, qx, qy, qz]), a typo or a
zero, not rounding. Within the tolerance the quaternion is normalised (float32 round trips, poses
written with 6 digits). Every message states the order.

Query poses (`CollisionChecker` inputs, an optimiser's iterates) are a different contract: they are
normalised differentiably inside the queries, so an optimiser may leave the unit sphere.
"""

from __future__ import annotations

import torch

__all__ = ["POSE_ORDER", "UNIT_QUATERNION_TOL", "checked_poses"]

POSE_ORDER = "[x, y, z, qw, qx, qy, qz] (quaternion scalar first, w x y z)"
UNIT_QUATERNION_TOL = 1e-3


def checked_poses(poses, arg: str, dtype: torch.dtype, device, shape: tuple = (7,)) -> torch.Tensor:
    """`poses` (a list, numpy array or tensor of any float dtype) of `shape` (..., 7), checked in
    float64 (module docstring), quaternions normalised, then cast once to dtype / device. None is
    the identity pose (for shape (7,))."""
    if poses is None and shape == (7,):
        poses = [0, 0, 0, 1, 0, 0, 0]
    if isinstance(poses, torch.Tensor):
        raw = poses.detach().to(device="cpu", dtype=torch.float64)
    else:
        try:
            raw = torch.as_tensor(poses, dtype=torch.float64)
        except (TypeError, ValueError, RuntimeError):
            raise ValueError(f"{arg}: expected numbers of shape {shape} {POSE_ORDER}, got "
                             f"{type(poses).__name__}") from None
    if tuple(raw.shape) != tuple(shape):
        raise ValueError(f"{arg}: expected shape {tuple(shape)} {POSE_ORDER}, got {tuple(raw.shape)}")
    if not bool(torch.isfinite(raw).all()):
        raise ValueError(f"{arg}: contains NaN or Inf; poses are {POSE_ORDER}")
    norm = raw[..., 3:].norm(dim=-1, keepdim=True)
    off = (norm - 1).abs() > UNIT_QUATERNION_TOL
    if bool(off.any()):
        bad = raw.reshape(-1, 7)[off.reshape(-1)][0]
        raise ValueError(f"{arg}: expected a unit quaternion, got norm {float(bad[3:].norm()):.6g} in "
                         f"{bad.tolist()} (a norm within {UNIT_QUATERNION_TOL} of 1 is normalised); poses are "
                         f"{POSE_ORDER}")
    raw = torch.cat([raw[..., :3], raw[..., 3:] / norm], -1)
    return raw.to(dtype=dtype, device=device)

"""An object given in another frame: its cloud turned by a rotation and re-centred, and the pose
correction that keeps it where it was in the world.

Training's rotation augmentation uses it with random rotations; test-time frame averaging (a
collision net's logit averaged over several frames of each object: `CollisionChecker(frames=F)`,
`python eval.py frames=F`) uses the fixed set `frame_quaternions(F)`, so evaluation and the
checker average over the same frames.
"""

import numpy as np
import torch

from contactnet.geometry.poses import quaternion_to_matrix

__all__ = ["frame_quaternions", "reframe_object"]

# The frames are a fixed draw: a net scored with F frames is scored the same way everywhere.
FRAME_SEED = 7


def frame_quaternions(frames: int) -> torch.Tensor:
    """(frames, 4) float64 unit quaternions [qw, qx, qy, qz]: the identity (the object's own frame)
    first, then rotations drawn uniformly over SO(3) from a fixed seed (frames F and F + 1 share
    their first F)."""
    if isinstance(frames, bool) or not isinstance(frames, int) or frames < 1:
        raise ValueError(f"frames: expected an int >= 1 (1: the object's own frame only), got {frames!r}")
    draws = np.random.default_rng(FRAME_SEED).standard_normal((frames - 1, 4))
    q = torch.cat([torch.tensor([[1.0, 0.0, 0.0, 0.0]], dtype=torch.float64), torch.from_numpy(draws)])
    q = q / q.norm(dim=-1, keepdim=True)
    return q * torch.where(q[:, :1] < 0, -1.0, 1.0)  # qw >= 0: one sign per rotation


def reframe_object(points: torch.Tensor, normals: torch.Tensor, vertices: torch.Tensor, q: torch.Tensor,
                   box_from_points: bool = False):
    """Object turned by the rotation q and re-centred on its turned mesh's AABB centre c:
    x_new = R x_old - c.

    points, normals (..., K, 3) and vertices (V, 3) (its mesh, object frame, metres), q (4,) unit
    quaternion, all one dtype. Returns (points, normals, aabb (..., 2, 3), inverse (7,)): the new
    cloud, its box (the turned mesh's, or with box_from_points the new points' bounds: a partial
    cloud's box is what its points show) and the pose (R, -c)⁻¹, so that a pose P of the old frame
    becomes `compose_poses(P, inverse)` in the new one and the object stays where it was.
    """
    R = quaternion_to_matrix(q)
    turned = vertices @ R.T
    centre = (turned.amin(0) + turned.amax(0)) / 2
    points = points @ R.T - centre
    normals = normals @ R.T
    source = points if box_from_points else turned - centre
    aabb = torch.stack([source.amin(-2), source.amax(-2)], -2)
    q_inv = q * q.new_tensor([1.0, -1.0, -1.0, -1.0])
    return points, normals, aabb, torch.cat([R.T @ centre, q_inv])

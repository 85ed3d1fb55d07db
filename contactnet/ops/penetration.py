"""Penetration estimate of colliding posed meshes: the translation that separates them.

One definition shared by the stored labels (`contactnet.data.pairs.label_pairs`) and the
planner's signed distance (`contactnet.planning.exact.exact_signed_distance`), so the two cannot
drift apart. Both report −t for a colliding pair, with t from `separating_translation`; each
caller picks its own direction and bracket (the sample's direction and bounding spheres for the
labels, the centre line and oriented-box supports for the planner).
"""

import math

import torch

from contactnet.geometry.mesh import MeshLibrary
from contactnet.ops.mesh_query import mesh_collide

__all__ = ["separating_translation"]


def separating_translation(lib: MeshLibrary, ids_a: torch.Tensor, ids_b: torch.Tensor, poses_a: torch.Tensor,
                           poses_b: torch.Tensor, direction: torch.Tensor, reach: torch.Tensor,
                           tol: float) -> torch.Tensor:
    """Smallest t (Q,), to `tol`, such that B translated by −t·direction no longer collides with A.

    ids_a, ids_b (Q,) int and poses_a, poses_b (Q, 7) [x, y, z, qw, qx, qy, qz] in metres: the
    queries, as for `mesh_collide`; direction (Q, 3): unit vectors, B moves along −direction;
    reach (Q,): a translation known to separate each pair (the bisection's upper end, metres);
    tol: bisection tolerance in metres, > 0. The true penetration depth is at most t, so −t is a
    lower bound of the signed distance (exact for a pair that only touches). Bisection halves
    [0, reach] with one batched `mesh_collide` per round until every bracket is below `tol`, and
    returns each bracket's upper (separated) end.
    """
    q = ids_a.shape[0]
    if not isinstance(direction, torch.Tensor) or direction.shape != (q, 3):
        shape = tuple(direction.shape) if isinstance(direction, torch.Tensor) else type(direction).__name__
        raise ValueError(f"direction: expected a tensor of shape ({q}, 3) (one unit vector per query), got {shape}")
    if not isinstance(reach, torch.Tensor) or reach.shape != (q,):
        shape = tuple(reach.shape) if isinstance(reach, torch.Tensor) else type(reach).__name__
        raise ValueError(f"reach: expected a tensor of shape ({q},) (a separating translation per query), got {shape}")
    if not (isinstance(tol, (int, float)) and math.isfinite(tol) and tol > 0):
        raise ValueError(f"tol: expected a finite bisection tolerance > 0 in metres, got {tol!r}")
    if not bool(torch.isfinite(reach).all()):  # an infinite bracket would never narrow
        raise ValueError("reach: expected finite separating translations, got NaN or Inf")
    lo, hi = torch.zeros_like(reach), reach.clone()
    moved = poses_b.clone()  # rotations never change: only the positions are rewritten per round
    while bool(((hi - lo) > tol).any()):
        mid = (lo + hi) / 2
        moved[:, :3] = poses_b[:, :3] - mid[:, None] * direction
        hit = mesh_collide(lib, ids_a, ids_b, poses_a, moved)
        lo = torch.where(hit, mid, lo)
        hi = torch.where(hit, hi, mid)
    return hi

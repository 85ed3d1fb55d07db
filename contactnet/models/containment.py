"""Containment read from the encoded clouds: one object wholly inside the other collides, whatever
the network says.

A collision net reads surface near the other object's box. A small object deep inside a large
one (a gripper tooth inside a robot's torso link) sits where the large one has no surface within
the net's reach, and the quickstart net called 67% of such real pairs free. The test here needs
no learning: the winding number of A's cloud (`surface_dipoles`, kept in A's embedding) at
PROBES of B's points, moved into A's frame; all of them inside A (winding >= 1/2) means B is
inside A. Near A's surface the winding number is smoothed to about 1/2, so a B that crosses or
touches A's surface is left to the net; a free pair is flagged only where the cloud misstates
its inside far from its surface. Both ways round (A in B too).
"""

import torch

from contactnet.geometry.poses import compose_poses, invert_poses, transform_points
from contactnet.geometry.winding import dipole_winding
from contactnet.ops._checks import trusted_indices
from contactnet.ops.dipole_winding import dipoles_enclose

PROBES = 16  # of the other object's dipole points (a random spread over its surface)
INSIDE = 0.5  # a probe is inside from this winding number on (DESIGN: inside when >= 0.5)
CONTAINED_LOGIT = 8.0  # the least logit of a contained pair (probability 0.9997)


def inside(dipoles_own: torch.Tensor, dipoles_other: torch.Tensor, pose_own: torch.Tensor,
           pose_other: torch.Tensor) -> torch.Tensor:
    """(...,) bool: the other object lies inside the own one. dipoles (..., S, 7) of each object,
    poses (..., 7); leading dimensions broadcast."""
    return dipole_winding(dipoles_own, probes(dipoles_other, pose_own, pose_other)).amin(-1) >= INSIDE


def probes(dipoles_other: torch.Tensor, pose_own: torch.Tensor, pose_other: torch.Tensor) -> torch.Tensor:
    """(..., P, 3) the other object's probes (its first PROBES dipole points) in the own frame."""
    rel = compose_poses(invert_poses(pose_own), pose_other)  # the other's pose in the own frame
    return transform_points(rel[..., None, :], dipoles_other[..., :PROBES, :3])


@torch.no_grad()
def contained(dipoles_a: torch.Tensor, dipoles_b: torch.Tensor, pose_a: torch.Tensor,
              pose_b: torch.Tensor) -> torch.Tensor:
    """(...,) bool: one object of each pair lies inside the other."""
    return inside(dipoles_a, dipoles_b, pose_a, pose_b) | inside(dipoles_b, dipoles_a, pose_b, pose_a)


@torch.no_grad()
def contained_indexed(dipoles: torch.Tensor, ids_a: torch.Tensor, ids_b: torch.Tensor, pose_a: torch.Tensor,
                      pose_b: torch.Tensor) -> torch.Tensor:
    """(Q,) bool: `contained` for queries against a table's (N, S, 7) dipoles, by the fused test
    (`dipoles_enclose`: a query stops at its first probe outside). Poses of another float dtype
    are cast to the table's (the answer is a boolean)."""
    pose_a, pose_b = pose_a.to(dipoles.dtype), pose_b.to(dipoles.dtype)
    heads = dipoles[:, :PROBES]  # only the probes are gathered per query
    with trusted_indices():  # the ids have already indexed the table
        return (dipoles_enclose(dipoles, ids_a, probes(heads[ids_b], pose_a, pose_b).contiguous(), INSIDE)
                | dipoles_enclose(dipoles, ids_b, probes(heads[ids_a], pose_b, pose_a).contiguous(), INSIDE))


def lift(logits: torch.Tensor, contained: torch.Tensor | None) -> torch.Tensor:
    """Logits raised to at least CONTAINED_LOGIT where contained (None: nowhere), the rest
    unchanged. The raise is a constant: gradients are the head's everywhere, so a planner
    descending the cost from a contained pose is not left on a flat plateau."""
    if contained is None:
        return logits
    head = logits.detach()
    return torch.where(contained, head.clamp_min(CONTAINED_LOGIT) + (logits - head), logits)  # + 0, with its gradient

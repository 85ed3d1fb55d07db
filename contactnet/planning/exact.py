"""Exact signed distance between posed meshes, differentiable with respect to the poses.

Value:
- separated pairs: the exact minimum surface distance (`mesh_distance`), > 0;
- colliding pairs (`mesh_collide`: surfaces intersect or one contains the other): -t, where t is
  the translation of B along the centre line (from A's frame origin to B's, i.e. B moved away from
  A) that separates the pair, found by bisection to `tol` (`contactnet.ops.penetration`, the
  estimate the stored labels of `contactnet.data.pairs` use too) bracketed by the oriented bounding
  boxes' supports along that line. The true penetration depth is at most t, so the value is a
  lower bound of the true signed distance (exact for touching pairs), continuous at the contact
  boundary.

Gradient with respect to both poses, through the closest points (the envelope theorem: the
minimum distance moves with its witness points held fixed on the bodies). With witness points
x_A, x_B in the bodies' frames and n the unit vector between them, the value is given the
derivative of n · (T_A x_A − T_B x_B): for separated pairs that is the exact derivative of the
distance away from feature changes (d/dt_A = n, d/dt_B = −n, rotations through the lever arms).
For colliding pairs the witnesses are taken where bisection separated the pair, and the gradient is
the derivative of the penetration estimate -t by implicit differentiation of the touching condition
along the separating plane there (it pushes A out of B; away from feature changes and to the
bisection's `tol`, it is the exact derivative of the value, including the turn of the centre
line). Pairs beyond `upper_bound` get value `upper_bound` and zero gradient.
"""

from __future__ import annotations

import torch

from contactnet.geometry.mesh import MeshLibrary
from contactnet.geometry.poses import quaternion_to_matrix, transform_points, unit_quaternion_poses
from contactnet.ops import mesh_collide, mesh_distance
from contactnet.ops.penetration import separating_translation

__all__ = ["exact_signed_distance"]


def _to_body(poses: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
    """World points (Q, 3) into the frames of poses (Q, 7): R^T (p - t)."""
    r = quaternion_to_matrix(poses[:, 3:])
    return torch.einsum("qji,qj->qi", r, points - poses[:, :3])


def _support(aabb: torch.Tensor, poses: torch.Tensor, direction: torch.Tensor) -> torch.Tensor:
    """max over the posed boxes (Q, 2, 3) of x · direction (Q, 3): the oriented box's support."""
    r = quaternion_to_matrix(poses[:, 3:])
    local = torch.einsum("qji,qj->qi", r, direction)  # direction in the box's frame
    centre, half = aabb.mean(1), (aabb[:, 1] - aabb[:, 0]) / 2
    return (poses[:, :3] * direction).sum(1) + (centre * local).sum(1) + (half * local.abs()).sum(1)


def exact_signed_distance(lib: MeshLibrary, aabb: torch.Tensor, ids_a: torch.Tensor, ids_b: torch.Tensor,
                          poses_a: torch.Tensor, poses_b: torch.Tensor, tol: float = 1e-3,
                          upper_bound: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(signed distance (Q,), colliding (Q,) bool) of mesh ids_a at poses_a vs ids_b at poses_b.

    lib: the meshes; aabb (M, 2, 3): each mesh's object-frame bounding box; poses (Q, 7)
    in lib's dtype (quaternions normalised here, differentiably); tol: bisection tolerance of the
    penetration estimate (metres); upper_bound: distances are only resolved below it.
    """
    pa, pb = unit_quaternion_poses(poses_a), unit_quaternion_poses(poses_b)
    pa_d, pb_d = pa.detach().contiguous(), pb.detach().contiguous()
    colliding = mesh_collide(lib, ids_a, ids_b, pa_d, pb_d)
    signed = torch.zeros(ids_a.shape[0], dtype=pa.dtype, device=pa.device)
    witness_b = pb_d.clone()
    hit = torch.nonzero(colliding).squeeze(1)
    if hit.numel():
        u = pa_d[hit, :3] - pb_d[hit, :3]
        norm = u.norm(dim=1, keepdim=True)
        # Coincident origins: any direction separates; take +z.
        u = torch.where(norm > 1e-12, u / norm.clamp_min(1e-12), u.new_tensor([0.0, 0.0, 1.0]))
        # B moved by -t u is apart once its box's support along u drops below A's along -u:
        # t = h_B(u) + h_A(-u) separates (a far tighter bracket than bounding spheres).
        box = aabb.to(pa_d.dtype)
        reach = _support(box[ids_b[hit]], pb_d[hit], u) + _support(box[ids_a[hit]], pa_d[hit], -u) + tol
        t = separating_translation(lib, ids_a[hit], ids_b[hit], pa_d[hit], pb_d[hit], u, reach, tol)
        signed[hit] = -t
        witness_b[hit, :3] -= t[:, None] * u
    if not (torch.is_grad_enabled() and (poses_a.requires_grad or poses_b.requires_grad)):
        # Values only: colliding pairs need no witness points.
        free = torch.nonzero(~colliding).squeeze(1)
        if free.numel():
            signed[free] = mesh_distance(lib, ids_a[free], ids_b[free], pa_d[free], pb_d[free], upper_bound).distance
        return signed, colliding
    near = mesh_distance(lib, ids_a, ids_b, pa_d, witness_b.contiguous(), upper_bound)
    signed = torch.where(colliding, signed, near.distance)
    found = (near.tri_a >= 0)[:, None]
    point_a = torch.where(found, near.point_a, pa_d[:, :3])
    point_b = torch.where(found, near.point_b, witness_b[:, :3])
    n = point_a - point_b
    n = n / n.norm(dim=1, keepdim=True).clamp_min(1e-12) * found  # nothing below upper_bound: no gradient
    x_a, x_b = _to_body(pa_d, point_a), _to_body(witness_b, point_b)
    # d(signed) = n · (d(T_A x_A) - d(T_B x_B)), x fixed on the bodies.
    plane = (n * (transform_points(pa, x_a) - transform_points(pb, x_b))).sum(-1)
    if hit.numel():
        # Colliding: signed = -t with B moved by -t u just touching A, i.e. (to first order)
        # n · (T_A x_A - T_B x_B + t u) = 0, u the unit centre line B -> A. Implicit
        # differentiation: d(signed) = -dt = [n · (d(T_A x_A) - d(T_B x_B)) + t n · du] / (n · u).
        line = pa[:, :3] - pb[:, :3]
        length = line.norm(dim=1, keepdim=True)
        u = torch.where(length > 1e-12, line / length.clamp_min(1e-12), line.new_tensor([0.0, 0.0, 1.0]))
        n_u = (n * u.detach()).sum(-1)
        moving_line = (n * u).sum(-1) - n_u  # t n · du, with t applied below (value 0)
        ok = colliding & (n_u > 0)
        pen = (plane + (-signed.detach()) * moving_line) / torch.where(ok, n_u, 1.0)
        plane = torch.where(ok, pen, plane)
    return signed + (plane - plane.detach()), colliding

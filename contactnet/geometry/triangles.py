"""Closest points on triangles and generalised winding numbers in plain torch: differentiable,
broadcasting, any device (the planners' sphere queries, the IS-CD baseline and the references
that check the C++ kernels use them)."""

import math

import torch

__all__ = ["closest_points_on_triangles", "winding_numbers"]


def winding_numbers(p: torch.Tensor, tris: torch.Tensor, valid: torch.Tensor | None = None) -> torch.Tensor:
    """Generalised winding number (...) of points p (..., 3) w.r.t. the triangles tris (..., F, 3, 3),
    broadcasting p[..., None, :] against each corner (Van Oosterom–Strackee solid angles summed over
    the F faces; valid (..., F) bool leaves out padding faces)."""
    a, b, c = (tris[..., k, :] - p[..., None, :] for k in range(3))
    la, lb, lc = a.norm(dim=-1), b.norm(dim=-1), c.norm(dim=-1)
    num = (a * torch.linalg.cross(b, c)).sum(-1)
    den = la * lb * lc + (a * b).sum(-1) * lc + (b * c).sum(-1) * la + (c * a).sum(-1) * lb
    angle = 2 * torch.atan2(num, den)
    if valid is not None:
        angle = torch.where(valid, angle, 0)
    return angle.sum(-1) / (4 * math.pi)


def closest_points_on_triangles(p: torch.Tensor, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor):
    """Closest point (..., 3) on triangles (a, b, c) (..., 3) to points p (..., 3), broadcasting
    (Ericson, Real-Time Collision Detection 5.1.5: Voronoi regions of vertices, edges, face)."""
    ab, ac, ap = b - a, c - a, p - a
    d1, d2 = (ab * ap).sum(-1), (ac * ap).sum(-1)
    bp = p - b
    d3, d4 = (ab * bp).sum(-1), (ac * bp).sum(-1)
    cp = p - c
    d5, d6 = (ab * cp).sum(-1), (ac * cp).sum(-1)
    va, vb, vc = d3 * d6 - d5 * d4, d5 * d2 - d1 * d6, d1 * d4 - d3 * d2

    def ratio(num, den):
        return num / torch.where(den == 0, torch.ones_like(den), den)

    denom = va + vb + vc
    v_face, w_face = ratio(vb, denom), ratio(vc, denom)
    out = a + v_face[..., None] * ab + w_face[..., None] * ac
    # Regions in reverse priority: later assignments win, matching Ericson's early returns.
    w_bc = ratio(d4 - d3, (d4 - d3) + (d5 - d6))
    out = torch.where(((va <= 0) & (d4 - d3 >= 0) & (d5 - d6 >= 0))[..., None], b + w_bc[..., None] * (c - b), out)
    w_ac = ratio(d2, d2 - d6)
    out = torch.where(((vb <= 0) & (d2 >= 0) & (d6 <= 0))[..., None], a + w_ac[..., None] * ac, out)
    v_ab = ratio(d1, d1 - d3)
    out = torch.where(((vc <= 0) & (d1 >= 0) & (d3 <= 0))[..., None], a + v_ab[..., None] * ab, out)
    out = torch.where(((d6 >= 0) & (d5 <= d6))[..., None], c, out)
    out = torch.where(((d3 >= 0) & (d4 <= d3))[..., None], b, out)
    return torch.where(((d1 <= 0) & (d2 <= 0))[..., None], a, out)

"""Brute-force, pure-torch references for the mesh queries (tests and benchmarks only).

Every triangle pair is evaluated in float64 with an independent, vectorised triangle–triangle
closest-point routine (minimum over the 6 vertex–face and 9 edge–edge features, plus an
edge-crosses-face intersection test), then the BLEM formulas are applied. No BVH, no pruning.
"""

from __future__ import annotations

import math

import torch

from contactnet.geometry.poses import transform_points
from contactnet.geometry.triangles import closest_points_on_triangles, winding_numbers

__all__ = [
    "blem_contacts_reference",
    "mesh_distance_reference",
    "triangle_pairs_closest",
    "triangle_retraction_reference",
    "winding_number_reference",
    "world_triangles",
]


def world_triangles(mesh_vertices: torch.Tensor, faces: torch.Tensor, pose: torch.Tensor):
    """(F, 3, 3) float64 triangles of a mesh placed at pose (7,)."""
    v = transform_points(pose.double()[None], mesh_vertices.double())
    return v[faces]


def _segment_segment(p1, q1, p2, q2):
    """Closest points between segments p1q1 and p2q2 (Ericson §5.1.9), (..., 3) each."""
    d1, d2, r = q1 - p1, q2 - p2, p1 - p2
    a, e, f = (d1 * d1).sum(-1), (d2 * d2).sum(-1), (d2 * r).sum(-1)
    c, b = (d1 * r).sum(-1), (d1 * d2).sum(-1)
    denom = a * e - b * b
    one = torch.ones_like(a)
    s = torch.where(denom > 1e-24 * a * e, ((b * f - c * e) / torch.where(denom > 0, denom, one)),
                    torch.zeros_like(a)).clamp(0, 1)  # fmt: skip
    t = (b * s + f) / e
    s = torch.where(t < 0, (-c / a).clamp(0, 1), torch.where(t > 1, ((b - c) / a).clamp(0, 1), s))
    t = t.clamp(0, 1)
    return p1 + d1 * s[..., None], p2 + d2 * t[..., None]


def _edge_crossing(A, B):
    """For each pair, whether an edge of A crosses triangle B, and the crossing point."""
    n = torch.linalg.cross(B[..., 1, :] - B[..., 0, :], B[..., 2, :] - B[..., 0, :])
    hit = torch.zeros(A.shape[:-2], dtype=torch.bool, device=A.device)
    point = torch.zeros(A.shape[:-2] + (3,), dtype=A.dtype, device=A.device)
    for i in range(3):
        p0, p1 = A[..., i, :], A[..., (i + 1) % 3, :]
        s0 = (n * (p0 - B[..., 0, :])).sum(-1)
        s1 = (n * (p1 - B[..., 0, :])).sum(-1)
        ok = (s0 * s1 <= 0) & (s0 != s1)
        u = s0 / torch.where(s0 != s1, s0 - s1, torch.ones_like(s0))
        x = p0 + (p1 - p0) * u[..., None]
        inside = torch.ones_like(ok)
        for k in range(3):
            e0, e1 = B[..., k, :], B[..., (k + 1) % 3, :]
            inside &= (torch.linalg.cross(e1 - e0, x - e0) * n).sum(-1) >= 0
        new = ok & inside & ~hit
        point = torch.where(new[..., None], x, point)
        hit |= new
    return hit, point


def triangle_pairs_closest(A: torch.Tensor, B: torch.Tensor):
    """Closest points of triangle pairs A, B (P, 3, 3) float64.

    Returns (distance (P,), xa (P, 3), xb (P, 3), intersecting (P,) bool).
    """
    cands_a, cands_b = [], []
    for i in range(3):
        cands_a.append(A[:, i])
        cands_b.append(closest_points_on_triangles(A[:, i], B[:, 0], B[:, 1], B[:, 2]))
    for j in range(3):
        cands_b.append(B[:, j])
        cands_a.append(closest_points_on_triangles(B[:, j], A[:, 0], A[:, 1], A[:, 2]))
    for i in range(3):
        for j in range(3):
            xa, xb = _segment_segment(A[:, i], A[:, (i + 1) % 3], B[:, j], B[:, (j + 1) % 3])
            cands_a.append(xa)
            cands_b.append(xb)
    ca, cb = torch.stack(cands_a, 1), torch.stack(cands_b, 1)  # (P, 15, 3)
    d = (ca - cb).norm(dim=-1)
    best = d.argmin(1)
    idx = best[:, None, None].expand(-1, 1, 3)
    xa, xb = ca.gather(1, idx)[:, 0], cb.gather(1, idx)[:, 0]
    dist = d.gather(1, best[:, None])[:, 0]
    hit_ab, pab = _edge_crossing(A, B)
    hit_ba, pba = _edge_crossing(B, A)
    inter = hit_ab | hit_ba
    x = torch.where(hit_ab[:, None], pab, pba)
    xa = torch.where(inter[:, None], x, xa)
    xb = torch.where(inter[:, None], x, xb)
    dist = torch.where(inter, torch.zeros_like(dist), dist)
    return dist, xa, xb, inter


def triangle_retraction_reference(A: torch.Tensor, B: torch.Tensor):
    """Shortest separating translation of A out of B along the 11 SAT axes: (normal, length)."""
    axes = [torch.linalg.cross(A[:, 1] - A[:, 0], A[:, 2] - A[:, 0]),
            torch.linalg.cross(B[:, 1] - B[:, 0], B[:, 2] - B[:, 0])]  # fmt: skip
    for i in range(3):
        for j in range(3):
            axes.append(torch.linalg.cross(A[:, (i + 1) % 3] - A[:, i],
                                           B[:, (j + 1) % 3] - B[:, j]))  # fmt: skip
    ax = torch.stack(axes, 1)  # (P, 11, 3)
    edges = torch.cat([A.roll(-1, 1) - A, B.roll(-1, 1) - B], 1).square().sum(-1).amax(1)
    len2 = ax.square().sum(-1)
    valid = len2 > 1e-24 * edges[:, None] ** 2
    u = ax / len2.clamp_min(1e-300).sqrt()[..., None]
    pa = torch.einsum("pkc,pvc->pkv", u, A)
    pb = torch.einsum("pkc,pvc->pkv", u, B)
    plus = pb.amax(-1) - pa.amin(-1)
    minus = pa.amax(-1) - pb.amin(-1)
    e = torch.minimum(plus, minus)
    e = torch.where(valid, e, torch.full_like(e, math.inf))
    k = e.argmin(1)
    length = e.gather(1, k[:, None])[:, 0].clamp_min(0)
    sel = u.gather(1, k[:, None, None].expand(-1, 1, 3))[:, 0]
    sign = torch.where(plus.gather(1, k[:, None])[:, 0] <= minus.gather(1, k[:, None])[:, 0],
                       1.0, -1.0)  # fmt: skip
    return sel * sign[:, None], length


def mesh_distance_reference(tris_a: torch.Tensor, tris_b: torch.Tensor, chunk: int = 200_000):
    """Minimum distance over all triangle pairs: (distance, xa, xb, tri_a, tri_b)."""
    fa, fb = tris_a.shape[0], tris_b.shape[0]
    best = (math.inf, None, None, -1, -1)
    for start in range(0, fa * fb, chunk):
        idx = torch.arange(start, min(fa * fb, start + chunk))
        ia, ib = idx // fb, idx % fb
        d, xa, xb, _ = triangle_pairs_closest(tris_a[ia], tris_b[ib])
        k = int(d.argmin())
        if float(d[k]) < best[0]:
            best = (float(d[k]), xa[k], xb[k], int(ia[k]), int(ib[k]))
    return best


def blem_contacts_reference(tris_a: torch.Tensor, tris_b: torch.Tensor, r_a: float, r_b: float):
    """All BLEM contacts of two placed meshes ((F, 3, 3) float64 world triangles).

    Returns a dict of tensors over contacts: tri_a, tri_b, distance (signed), depth, normal,
    point, xa, xb, intersecting.
    """
    fa, fb = tris_a.shape[0], tris_b.shape[0]
    ia = torch.arange(fa).repeat_interleave(fb)
    ib = torch.arange(fb).repeat(fa)
    A, B = tris_a[ia], tris_b[ib]
    d, xa, xb, inter = triangle_pairs_closest(A, B)
    keep = d <= r_a + r_b
    ia, ib, A, B, d, xa, xb, inter = (t[keep] for t in (ia, ib, A, B, d, xa, xb, inter))
    touching = inter | (d == 0)
    n_sep = (xa - xb) / torch.where(d > 0, d, torch.ones_like(d))[:, None]
    n_ret, e = triangle_retraction_reference(A, B) if A.shape[0] else (xa, d)
    normal = torch.where(touching[:, None], n_ret, n_sep)
    signed = torch.where(touching, -e, d)
    point = 0.5 * (xa + xb) + normal * (0.5 * (r_b - r_a))
    return dict(tri_a=ia, tri_b=ib, distance=signed, depth=r_a + r_b - signed, normal=normal,
                point=point, xa=xa, xb=xb, intersecting=touching)  # fmt: skip


def winding_number_reference(points: torch.Tensor, tris: torch.Tensor) -> torch.Tensor:
    """Exact generalised winding number of points (P, 3) w.r.t. triangles (F, 3, 3), float64."""
    return winding_numbers(points, tris)

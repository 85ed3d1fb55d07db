"""Pure-torch references for the primitive distances: the oracle in tests, never the hot path.

Deliberately a different algorithm from the C++ kernels (which walk Voronoi regions):
- point–triangle: project onto the plane; inside → plane distance, else the best of the 3 edges;
- segment–segment: the unclamped line–line solution when it lies inside both segments, else the
  best of the 4 end-point-to-segment distances;
- triangle–triangle: the best of 6 point–triangle and 9 segment–segment distances, and 0 where an
  edge of one triangle crosses the other.
All functions are vectorised over the leading batch dimension and run in any float dtype.
"""

import torch


def point_segment_ref(p, a, b):
    """p, a, b: (N, 3) → (distance (N,), t (N,)) with closest point a + t (b - a)."""
    ab = b - a
    len2 = (ab * ab).sum(-1)
    t = ((p - a) * ab).sum(-1) / torch.where(len2 > 0, len2, torch.ones_like(len2))
    t = torch.where(len2 > 0, t.clamp(0, 1), torch.zeros_like(t))
    closest = a + t[:, None] * ab
    return (p - closest).norm(dim=-1), t


def _edge_type_from_param(t, edge):
    """Map a parameter on edge `edge` (0: t0t1, 1: t1t2, 2: t2t0) to a PointTriangleType."""
    start, end = edge, (edge + 1) % 3  # vertex types P_T0..P_T2 are 0..2
    return torch.where(t <= 0, start, torch.where(t >= 1, end, 3 + edge))


def point_triangle_ref(p, tri):
    """p: (N, 3), tri: (N, 3, 3) → (distance, closest (N, 3), type (N,) int64, weights (N, 3))."""
    t0, t1, t2 = tri[:, 0], tri[:, 1], tri[:, 2]
    edges = [(t0, t1), (t1, t2), (t2, t0)]
    best_d = None
    for e, (a, b) in enumerate(edges):
        d, t = point_segment_ref(p, a, b)
        w = torch.zeros_like(tri[:, :, 0])
        w[:, e] = 1 - t
        w[:, (e + 1) % 3] = t
        typ = _edge_type_from_param(t, e)
        if best_d is None:
            best_d, best_w, best_t = d, w, typ
        else:
            better = d < best_d
            best_d = torch.where(better, d, best_d)
            best_w = torch.where(better[:, None], w, best_w)
            best_t = torch.where(better, typ, best_t)

    # Interior of the face, by barycentric coordinates of the projection (Cramer's rule).
    n = torch.cross(t1 - t0, t2 - t0, dim=-1)
    nn = (n * n).sum(-1)
    scale = ((t1 - t0) ** 2).sum(-1) * ((t2 - t0) ** 2).sum(-1)
    eps = 1e-28 if tri.dtype == torch.float64 else 1e-12
    proper = nn > eps * scale
    safe_nn = torch.where(proper, nn, torch.ones_like(nn))
    w0 = (torch.cross(t2 - t1, p - t1, dim=-1) * n).sum(-1) / safe_nn
    w1 = (torch.cross(t0 - t2, p - t2, dim=-1) * n).sum(-1) / safe_nn
    w2 = 1 - w0 - w1
    inside = proper & (w0 >= 0) & (w1 >= 0) & (w2 >= 0)
    plane_d = ((p - t0) * n).sum(-1).abs() / safe_nn.sqrt()
    distance = torch.where(inside, plane_d, best_d)
    weights = torch.where(inside[:, None], torch.stack([w0, w1, w2], -1), best_w)
    typ = torch.where(inside, 6, best_t)
    closest = (weights[:, :, None] * tri).sum(1)
    return distance, closest, typ, weights


def segment_segment_ref(a0, a1, b0, b1):
    """(N, 3) end points → (distance, point_a, point_b, params (N, 2))."""
    d1, d2, r = a1 - a0, b1 - b0, a0 - b0
    a = (d1 * d1).sum(-1)
    e = (d2 * d2).sum(-1)
    b = (d1 * d2).sum(-1)
    c = (d1 * r).sum(-1)
    f = (d2 * r).sum(-1)
    det = a * e - b * b
    eps = 1e-24 if a0.dtype == torch.float64 else 1e-10
    proper = det > eps * a * e
    safe_det = torch.where(proper, det, torch.ones_like(det))
    s_line = (b * f - c * e) / safe_det
    t_line = (a * f - b * c) / safe_det
    line_ok = proper & (s_line >= 0) & (s_line <= 1) & (t_line >= 0) & (t_line <= 1)

    candidates = []  # (distance, s, t)
    s_in = s_line.clamp(0, 1)
    t_in = t_line.clamp(0, 1)
    d_line = ((a0 + s_in[:, None] * d1) - (b0 + t_in[:, None] * d2)).norm(dim=-1)
    candidates.append((torch.where(line_ok, d_line, torch.full_like(d_line, float("inf"))), s_in, t_in))
    for s_fixed, p in ((0.0, a0), (1.0, a1)):
        d, t = point_segment_ref(p, b0, b1)
        candidates.append((d, torch.full_like(d, s_fixed), t))
    for t_fixed, p in ((0.0, b0), (1.0, b1)):
        d, s = point_segment_ref(p, a0, a1)
        candidates.append((d, s, torch.full_like(d, t_fixed)))
    best_d, best_s, best_t = candidates[0]
    for d, s, t in candidates[1:]:
        better = d < best_d
        best_d = torch.where(better, d, best_d)
        best_s = torch.where(better, s, best_s)
        best_t = torch.where(better, t, best_t)
    point_a = a0 + best_s[:, None] * d1
    point_b = b0 + best_t[:, None] * d2
    return best_d, point_a, point_b, torch.stack([best_s, best_t], -1)


def _edge_crossing(p0, p1, tri):
    """Whether segment p0p1 crosses triangle `tri` (not in its plane), and the crossing point."""
    t0, t1, t2 = tri[:, 0], tri[:, 1], tri[:, 2]
    n = torch.cross(t1 - t0, t2 - t0, dim=-1)
    s0 = ((p0 - t0) * n).sum(-1)
    s1 = ((p1 - t0) * n).sum(-1)
    crosses_plane = (s0 * s1 <= 0) & (s0 != s1)
    u = s0 / torch.where(crosses_plane, s0 - s1, torch.ones_like(s0))
    x = p0 + u[:, None] * (p1 - p0)
    inside = torch.ones_like(crosses_plane)
    for a, b in ((t0, t1), (t1, t2), (t2, t0)):
        inside &= (torch.cross(b - a, x - a, dim=-1) * n).sum(-1) >= 0
    return crosses_plane & inside, x


def triangle_distance_ref(tri_a, tri_b):
    """(N, 3, 3) triangles → (distance (N,), point_a (N, 3), point_b (N, 3))."""
    best = None

    def consider(d, pa, pb):
        nonlocal best
        if best is None:
            best = [d, pa, pb]
            return
        better = d < best[0]
        best = [
            torch.where(better, d, best[0]),
            torch.where(better[:, None], pa, best[1]),
            torch.where(better[:, None], pb, best[2]),
        ]

    for i in range(3):
        d, closest, _, _ = point_triangle_ref(tri_a[:, i], tri_b)
        consider(d, tri_a[:, i], closest)
        d, closest, _, _ = point_triangle_ref(tri_b[:, i], tri_a)
        consider(d, closest, tri_b[:, i])
    for i in range(3):
        for j in range(3):
            d, pa, pb, _ = segment_segment_ref(
                tri_a[:, i], tri_a[:, (i + 1) % 3], tri_b[:, j], tri_b[:, (j + 1) % 3]
            )
            consider(d, pa, pb)
    for i in range(3):
        for first, second in ((tri_a, tri_b), (tri_b, tri_a)):
            hit, x = _edge_crossing(first[:, i], first[:, (i + 1) % 3], second)
            consider(torch.where(hit, torch.zeros_like(best[0]), torch.full_like(best[0], float("inf"))), x, x)
    return tuple(best)

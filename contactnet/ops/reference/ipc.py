"""Pure-torch references for the IPC kernels (float64, loops allowed): the oracles of the tests and
benchmarks, never a hot path. Derivatives come from torch.autograd on these closed forms, so they
check the hand-written chain rules of csrc/common/ipc_distance.h independently.

"Distance" here means SQUARED distance, as in contactnet.ops.ipc.
"""

from __future__ import annotations

import torch

# ---- closed forms (rows of (N, 3) tensors) -----------------------------------------------------


def point_point(p, q):
    return ((p - q) ** 2).sum(-1)


def point_line(p, e0, e1):
    e = e1 - e0
    return (torch.linalg.cross(p - e0, e) ** 2).sum(-1) / (e**2).sum(-1)


def point_plane(p, t0, t1, t2):
    n = torch.linalg.cross(t1 - t0, t2 - t0)
    return ((p - t0) * n).sum(-1) ** 2 / (n**2).sum(-1)


def line_line(ea0, ea1, eb0, eb1):
    n = torch.linalg.cross(ea1 - ea0, eb1 - eb0)
    return ((eb0 - ea0) * n).sum(-1) ** 2 / (n**2).sum(-1)


# ---- closest-feature types (one primitive at a time, float64 python) ----------------------------


def _pe_type(p, e0, e1) -> int:
    e = e1 - e0
    den = float(e @ e)
    t = float((p - e0) @ e) / den if den > 0 else 0.0
    return 0 if not t > 0 else (1 if t >= 1 else 2)


def point_triangle_type(p, t0, t1, t2) -> int:
    """PointTriangleType by brute force: the feature whose distance is the true minimum (ties go to
    the lower-dimensional feature), over the projection test for the face interior."""
    n = torch.linalg.cross(t1 - t0, t2 - t0)
    # Barycentric coordinates of the projection.
    m = torch.stack([t1 - t0, t2 - t0], dim=1)
    beta = torch.linalg.lstsq(m, (p - t0)[:, None]).solution[:, 0]
    if float(n @ n) > 0 and beta[0] > 0 and beta[1] > 0 and beta.sum() < 1:
        return 6
    cands = [
        (float(point_point(p, t0)), 0),
        (float(point_point(p, t1)), 1),
        (float(point_point(p, t2)), 2),
    ]
    for k, (a, b) in enumerate(((t0, t1), (t1, t2), (t2, t0))):
        if _pe_type(p, a, b) == 2:
            cands.append((float(point_line(p[None], a[None], b[None])[0]), 3 + k))
    return min(cands)[1]


def edge_edge_type(ea0, ea1, eb0, eb1) -> int:
    """EdgeEdgeType: interior–interior when the line–line closest points fall inside both segments
    (and the edges are not nearly parallel), else the closest end-point feature."""
    a, b, r = ea1 - ea0, eb1 - eb0, ea0 - eb0
    aa, bb, ab = float(a @ a), float(b @ b), float(a @ b)
    det = aa * bb - ab * ab
    if det >= 2.5e-16 * aa * bb:
        s = (ab * float(r @ b) - bb * float(r @ a)) / det
        t = (aa * float(r @ b) - ab * float(r @ a)) / det
        if 0 < s < 1 and 0 < t < 1:
            return 8
    table = [(0, 1, 6), (2, 3, 7), (0, 2, 4), (1, 3, 5)]  # PE types (E0, E1, E) -> EE types
    feats = [(ea0, eb0, eb1), (ea1, eb0, eb1), (eb0, ea0, ea1), (eb1, ea0, ea1)]
    best = None
    for k, (p, e0, e1) in enumerate(feats):
        ty = _pe_type(p, e0, e1)
        if ty == 2:
            d = float(point_line(p[None], e0[None], e1[None])[0])
        else:
            d = float(point_point(p, e0 if ty == 0 else e1))
        if best is None or d < best[0]:
            best = (d, table[k][ty])
    return best[1]


_PT_FEATURES = {0: (0, 1), 1: (0, 2), 2: (0, 3), 3: (0, 1, 2), 4: (0, 2, 3), 5: (0, 3, 1), 6: (0, 1, 2, 3)}
_EE_FEATURES = {0: (0, 2), 1: (0, 3), 2: (1, 2), 3: (1, 3), 4: (2, 0, 1), 5: (3, 0, 1), 6: (0, 2, 3),
                7: (1, 2, 3), 8: (0, 1, 2, 3)}


def typed_distance(x: torch.Tensor, type_: int, edge_edge: bool) -> torch.Tensor:
    """Squared distance of one stencil x (4, 3) with a fixed feature type (differentiable)."""
    idx = (_EE_FEATURES if edge_edge else _PT_FEATURES)[type_]
    v = [x[i][None] for i in idx]
    if len(idx) == 2:
        return point_point(*v)[0]
    if len(idx) == 3:
        return point_line(*v)[0]
    return (line_line if edge_edge else point_plane)(*v)[0]


def point_triangle_distance(x: torch.Tensor) -> torch.Tensor:
    """x: (4, 3) = p, t0, t1, t2."""
    return typed_distance(x, point_triangle_type(*x.detach()), False)


def edge_edge_distance(x: torch.Tensor) -> torch.Tensor:
    """x: (4, 3) = ea0, ea1, eb0, eb1."""
    return typed_distance(x, edge_edge_type(*x.detach()), True)


def mollifier(x: torch.Tensor, eps_x: float) -> torch.Tensor:
    c = (torch.linalg.cross(x[1] - x[0], x[3] - x[2]) ** 2).sum()
    if float(c) >= eps_x:
        return torch.ones((), dtype=x.dtype)
    return (2 - c / eps_x) * c / eps_x


def barrier(d2: torch.Tensor, dhat: float) -> torch.Tensor:
    """b(d², d̂²) = -(d² - d̂²)² ln(d²/d̂²) on (0, d̂²), else 0."""
    xh = dhat * dhat
    inside = (d2 > 0) & (d2 < xh)
    safe = torch.where(inside, d2, torch.full_like(d2, xh))
    return torch.where(inside, -((safe - xh) ** 2) * torch.log(safe / xh), torch.zeros_like(d2))


# ---- mesh-level ---------------------------------------------------------------------------------


def brute_force_candidates(vertices, faces, edges, dhat, vertex_body=None):
    """Sets of (vertex, face) and (edge_a, edge_b) pairs with squared distance < dhat², from the
    reference closed forms over all pairs."""
    V = vertices.double()
    fv, ee = set(), set()
    faces_l, edges_l = faces.tolist(), edges.tolist()
    body = None if vertex_body is None else vertex_body.tolist()
    for f, (a, b, c) in enumerate(faces_l):
        for p in range(V.shape[0]):
            if p in (a, b, c) or (body is not None and body[p] == body[a]):
                continue
            x = torch.stack([V[p], V[a], V[b], V[c]])
            if float(point_triangle_distance(x)) < dhat * dhat:
                fv.add((p, f))
    for i, (a0, a1) in enumerate(edges_l):
        for j in range(i + 1, len(edges_l)):
            b0, b1 = edges_l[j]
            if len({a0, a1, b0, b1}) < 4 or (body is not None and body[a0] == body[b0]):
                continue
            x = torch.stack([V[a0], V[a1], V[b0], V[b1]])
            if float(edge_edge_distance(x)) < dhat * dhat:
                ee.add((i, j))
    return fv, ee


def barrier_potential(vertices, faces, edges, face_vertex, edge_edge, dhat, kappa, rest_vertices=None):
    """κ Σ m b(d², d̂²) over the given candidates, differentiable in vertices."""
    rest = vertices.detach() if rest_vertices is None else rest_vertices
    total = vertices.new_zeros(())
    for p, f in face_vertex.tolist():
        ids = [p, *faces[f].tolist()]
        total = total + barrier(point_triangle_distance(vertices[ids])[None], dhat)[0]
    for a, b in edge_edge.tolist():
        ids = [*edges[a].tolist(), *edges[b].tolist()]
        r = rest[ids]
        eps_x = 1e-3 * float(((r[1] - r[0]) ** 2).sum() * ((r[3] - r[2]) ** 2).sum())
        x = vertices[ids]
        total = total + mollifier(x, eps_x) * barrier(edge_edge_distance(x)[None], dhat)[0]
    return kappa * total

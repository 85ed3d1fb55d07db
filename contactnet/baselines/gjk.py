"""Boolean GJK with a uniform computational flow (LOCC §IV's UCF-GJK): a fixed number of
iterations, the same tensor operations for every pair, no data-dependent branching.

Two convex sets A, B (each the hull of a padded vertex set) intersect iff the origin lies in their
Minkowski difference D = A - B. Each iteration keeps a tetrahedron (4 points of D, repeats allowed),
takes its point v closest to the origin, asks D for its support point w in direction -v and
  - certifies separation when v·w > 0 (the plane through the origin normal to v has all of D
    strictly on one side), a flag that never clears;
  - replaces the tetrahedron by the face holding v plus w, so |v| never grows.
With the origin in D no direction separates, so containment needs no test of its own.
After `iterations` rounds, a pair is colliding unless separation was certified: too few
iterations err towards collision (the conservative side). Touching sets (distance 0) collide, as
in `mesh_collide`. Padding repeats a real vertex, so it never changes a support point.
"""

import torch

# The kept face's corner pairs that form a new face with the support point, and the edges of one
# triangle (as corner indices).
_NEW_FACES = ((0, 1), (0, 2), (1, 2))
_EDGES = ((0, 1), (1, 2), (0, 2))


def _closest_on_segment(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """(..., 3) point of segment ab closest to the origin; a degenerate segment gives a."""
    ab = b - a
    denom = (ab * ab).sum(-1, keepdim=True)
    t = (-(a * ab).sum(-1, keepdim=True) / denom.clamp_min(torch.finfo(a.dtype).tiny)).clamp(0, 1)
    return a + t * ab


def _closest_on_triangle(tri: torch.Tensor) -> torch.Tensor:
    """tri (..., 3, 3) -> (..., 3) the triangle's point closest to the origin, branch-free: the
    nearest of its corners, edge projections and (where it lies inside) the plane projection.
    Degenerate triangles reduce to their edges."""
    a, b, c = tri.unbind(-2)
    n = torch.linalg.cross(b - a, c - a)
    nn = (n * n).sum(-1, keepdim=True)
    # Projection of the origin onto the plane and its barycentric signs.
    p = n * ((a * n).sum(-1, keepdim=True) / nn.clamp_min(torch.finfo(tri.dtype).tiny))
    inside = ((torch.linalg.cross(b - a, p - a) * n).sum(-1) >= 0) & \
             ((torch.linalg.cross(c - b, p - b) * n).sum(-1) >= 0) & \
             ((torch.linalg.cross(a - c, p - c) * n).sum(-1) >= 0) & (nn[..., 0] > 0)
    edges = torch.stack([_closest_on_segment(tri[..., i, :], tri[..., j, :]) for i, j in _EDGES], -2)
    best = edges.gather(-2, (edges * edges).sum(-1).argmin(-1)[..., None, None].expand(*edges.shape[:-2], 1, 3))[..., 0, :]
    return torch.where(inside[..., None], p, best)


def _support(vertices: torch.Tensor, direction: torch.Tensor) -> torch.Tensor:
    """vertices (..., V, 3), direction (..., 3) -> (..., 3): a vertex maximising direction · x."""
    index = (vertices * direction[..., None, :]).sum(-1).argmax(-1)
    return vertices.gather(-2, index[..., None, None].expand(*index.shape, 1, 3))[..., 0, :]


def _pieces_support(pieces: torch.Tensor, direction: torch.Tensor) -> torch.Tensor:
    """pieces (Q, P, V, 3), direction (Q, P, R, 3): for every piece p, R directions -> (Q, P, R, 3)
    support points. One batched matmul per (query, piece): the (Q, P, R, V, 3) products that
    broadcasting would build are never formed."""
    index = (pieces @ direction.transpose(-1, -2)).argmax(-2)  # (Q, P, V, R) -> (Q, P, R)
    return pieces.gather(-2, index[..., None].expand(*index.shape, 3))


def _gjk(support, start: torch.Tensor, iterations: int) -> torch.Tensor:
    """The fixed-flow loop: `support(d)` (..., 3) -> (..., 3) support points of the Minkowski
    difference, `start` (..., 3) a first one. Returns (...,) bool, True unless separated.

    The tetrahedron is the kept face plus the newest support point w; the kept face's closest
    point is the last v, so only the three faces through w are searched each round."""
    if int(iterations) < 1:
        raise ValueError(f"iterations: expected >= 1, got {iterations}")
    batch = start.shape[:-1]
    kept, v = start[..., None, :].expand(*batch, 3, 3), start
    separated = torch.zeros(batch, dtype=torch.bool, device=start.device)
    for step in range(int(iterations)):
        w = support(-v)
        separated = separated | ((v * w).sum(-1) > 0)
        if step == int(iterations) - 1:  # static: the last round only tests
            break
        w3 = w[..., None, :]
        faces = torch.stack([kept, torch.cat([kept[..., _NEW_FACES[0], :], w3], -2),
                             torch.cat([kept[..., _NEW_FACES[1], :], w3], -2),
                             torch.cat([kept[..., _NEW_FACES[2], :], w3], -2)], -3)  # (..., 4, 3, 3)
        closest = torch.cat([v[..., None, :], _closest_on_triangle(faces[..., 1:, :, :])], -2)  # (..., 4, 3)
        face = (closest * closest).sum(-1).argmin(-1)  # ties keep the kept face
        v = closest.gather(-2, face[..., None, None].expand(*batch, 1, 3))[..., 0, :]
        kept = faces.gather(-3, face[..., None, None, None].expand(*batch, 1, 3, 3))[..., 0, :, :]
    return ~separated


def gjk_intersect(verts_a: torch.Tensor, verts_b: torch.Tensor, iterations: int = 16) -> torch.Tensor:
    """Whether the convex hulls of two vertex sets intersect (touching counts), in a fixed flow.

    verts_a (..., Va, 3), verts_b (..., Vb, 3): the same frame, leading dims broadcast; pad a set
    by repeating one of its vertices. iterations: the fixed number of GJK rounds (>= 1). Returns
    (...,) bool; after too few rounds an undecided pair reads as colliding.
    """
    if verts_a.shape[-1] != 3 or verts_b.shape[-1] != 3 or verts_a.dim() < 2 or verts_b.dim() < 2:
        raise ValueError(f"verts_a, verts_b: expected (..., V, 3), got {tuple(verts_a.shape)}, {tuple(verts_b.shape)}")
    batch = torch.broadcast_shapes(verts_a.shape[:-2], verts_b.shape[:-2])
    # Views (no copies): gather does not broadcast.
    verts_a, verts_b = verts_a.expand(*batch, *verts_a.shape[-2:]), verts_b.expand(*batch, *verts_b.shape[-2:])
    # First direction: between the vertex means, so the first support is already informative.
    centre = verts_b.mean(-2) - verts_a.mean(-2)
    return _gjk(lambda d: _support(verts_a, d) - _support(verts_b, -d),
                _support(verts_a, centre) - _support(verts_b, -centre), iterations)


def gjk_piece_pairs(pieces_a: torch.Tensor, pieces_b: torch.Tensor, iterations: int = 16) -> torch.Tensor:
    """`gjk_intersect` on every pair of pieces: pieces_a (Q, Pa, V, 3), pieces_b (Q, Pb, V', 3),
    one frame -> (Q, Pa, Pb) bool. The same answers as gjk_intersect(pieces_a[:, :, None],
    pieces_b[:, None]), with support points from per-piece matmuls."""
    if pieces_a.dim() != 4 or pieces_b.dim() != 4 or pieces_a.shape[-1] != 3 or pieces_b.shape[-1] != 3 \
            or pieces_a.shape[0] != pieces_b.shape[0]:
        raise ValueError(f"pieces_a, pieces_b: expected (Q, Pa, V, 3) and (Q, Pb, V', 3), got "
                         f"{tuple(pieces_a.shape)}, {tuple(pieces_b.shape)}")

    def support(d):  # d (Q, Pa, Pb, 3) -> sA(d) - sB(-d)
        return _pieces_support(pieces_a, d) - _pieces_support(pieces_b, -d.transpose(1, 2)).transpose(1, 2)

    centre = pieces_b.mean(-2)[:, None] - pieces_a.mean(-2)[:, :, None]  # (Q, Pa, Pb, 3)
    return _gjk(support, support(centre), iterations)

"""Brute-force, pure-torch reference for `contactnet.ops.point_mesh_distance` (tests only): every
point against every triangle (closest points by Ericson's Voronoi regions, in the input's dtype,
float64 for an oracle) and the exact generalised winding number summed over all triangles. No BVH,
no pruning, no far-field approximation."""

from __future__ import annotations

import torch

from contactnet.geometry.triangles import closest_points_on_triangles, winding_numbers

__all__ = ["point_mesh_reference"]


def point_mesh_reference(points: torch.Tensor, tris: torch.Tensor, chunk: int = 1 << 22):
    """(distance (P,), tri (P,) int64 first face at the minimum, winding (P,)) of points (P, 3)
    against one mesh's triangles (F, 3, 3), in the points' frame; at most `chunk` point–triangle
    pairs at a time."""
    out_d, out_t, out_w = [], [], []
    step = max(1, chunk // max(1, tris.shape[0]))
    for s in range(0, points.shape[0], step):
        p = points[s:s + step, None, :]
        c = closest_points_on_triangles(p, tris[None, :, 0], tris[None, :, 1], tris[None, :, 2])
        sq = ((p - c) ** 2).sum(-1)
        best = sq.min(1)
        out_d.append(best.values.sqrt())
        out_t.append(best.indices)
        out_w.append(winding_numbers(points[s:s + step], tris[None]))
    return torch.cat(out_d), torch.cat(out_t), torch.cat(out_w)

"""Convex hulls of many meshes, packed for the certified separation test
(`contactnet.ops.mesh_query.hulls_separated`, GJK in C++ on both devices).

A hull is its vertices (a subset of the mesh's, float64, object frame) and its vertex graph (the
edges of qhull's triangulated facets), which the GJK's support search climbs. Points that span no
volume (a flat plate, a sheet, a line) are hulled from qhull's joggled input (option QJ, a tiny
random perturbation; the hull keeps the original points, and `hulls_separated`'s min_gap of 1 µm
absorbs what the perturbed graph can miss), so a table top modelled as one quad is still
certified apart from what is clearly above it. Fewer than four
points get an empty hull: nothing is ever certified apart from it, which is safe, since
"separated" is the only answer the test certifies.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import torch

__all__ = ["ConvexHulls", "build_convex_hulls"]


class ConvexHulls(NamedTuple):
    """M hulls packed: hull m owns vertex rows vertex_offsets[m] .. vertex_offsets[m + 1);
    vertex row i's neighbours (hull-local indices) are neighbours[neighbour_offsets[i] ..
    neighbour_offsets[i + 1])."""

    vertices: torch.Tensor  # (V, 3) float64
    vertex_offsets: torch.Tensor  # (M + 1,) int64
    neighbours: torch.Tensor  # (E,) int64
    neighbour_offsets: torch.Tensor  # (V + 1,) int64

    def __len__(self) -> int:
        return self.vertex_offsets.shape[0] - 1

    def to(self, device) -> ConvexHulls:
        return ConvexHulls(*(t.to(device) for t in self))

    def hull_vertices(self, i: int) -> torch.Tensor:
        """(n, 3) float64 vertices of hull i (n = 0 for a mesh of fewer than four vertices)."""
        return self.vertices[int(self.vertex_offsets[i]) : int(self.vertex_offsets[i + 1])]


def _hull_graph(points: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
    """The hull's vertices (n, 3) and each one's neighbours (hull-local); empty for fewer than four
    points."""
    from scipy.spatial import ConvexHull, QhullError  # imported on first use: it is slow to import

    hull = None
    for options in (None, "QJ"):  # QJ: points in a plane or on a line span no volume unjoggled
        try:
            hull = ConvexHull(points, qhull_options=options)
            break
        except (QhullError, ValueError):
            continue
    if hull is None:  # fewer than 4 points
        return np.zeros((0, 3)), []
    keep = np.unique(hull.simplices)
    local = np.full(len(points), -1, dtype=np.int64)
    local[keep] = np.arange(len(keep))
    tri = local[hull.simplices]
    edges = np.unique(np.sort(np.concatenate([tri[:, [0, 1]], tri[:, [1, 2]], tri[:, [0, 2]]]), axis=1), axis=0)
    both = np.concatenate([edges, edges[:, ::-1]])
    both = both[np.lexsort((both[:, 1], both[:, 0]))]
    splits = np.searchsorted(both[:, 0], np.arange(1, len(keep)))
    return points[keep], np.split(both[:, 1], splits)


def build_convex_hulls(vertex_sets: Sequence) -> ConvexHulls:
    """Packed hulls of meshes given by their vertices: a sequence of (n, 3) arrays or tensors in
    each mesh's own frame (converted to float64 once)."""
    vertices, counts, neighbours, degrees = [], [0], [], []
    for i, v in enumerate(vertex_sets):
        points = np.asarray(v.detach().cpu() if isinstance(v, torch.Tensor) else v, dtype=np.float64)
        if points.ndim != 2 or points.shape[1] != 3:
            raise ValueError(f"vertex_sets: item {i} has shape {points.shape}, expected (n, 3)")
        if not np.isfinite(points).all():
            raise ValueError(f"vertex_sets: item {i} has NaN or Inf vertices")
        hull_points, graph = _hull_graph(points)
        vertices.append(hull_points)
        counts.append(len(hull_points))
        neighbours += graph
        degrees += [len(n) for n in graph]
    if len(counts) == 1:
        raise ValueError("vertex_sets: expected at least one mesh")

    def int64(values) -> torch.Tensor:
        return torch.as_tensor(np.asarray(values, dtype=np.int64))

    return ConvexHulls(torch.as_tensor(np.concatenate(vertices)), int64(np.cumsum(counts)),
                       int64(np.concatenate(neighbours) if neighbours else []), int64(np.cumsum([0] + degrees)))

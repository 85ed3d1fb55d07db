"""Exact distances between primitives (triangle–triangle, point–triangle, segment–segment), and
the boolean triangle–triangle intersection test that mesh collision uses.

All functions take N independent pairs (float32 or float64, one device, contiguous) and return
Euclidean distances with closest points. A pair with a NaN or Inf coordinate gets NaN outputs
(and feature type -1); it never raises or crashes, so one bad row does not poison a batch.

Distances are differentiable with respect to every input vertex. The gradient is the one of the
closest-point pair (Danskin): no gradient flows through the choice of feature, and a distance of
exactly 0 (touching or intersecting) has zero gradient. Closest points, weights and types are
not differentiable.
"""

from enum import IntEnum
from typing import NamedTuple

import numpy as np
import torch

from contactnet._extension import load_extension
from contactnet.ops._checks import check_float_tensor, check_same_batch

load_extension()

_ops = torch.ops.contactnet


class PointTriangleType(IntEnum):
    """Closest feature of a triangle (t0, t1, t2) to a point; edges E0 = t0t1, E1 = t1t2, E2 = t2t0.
    Same numbering as IPC Toolkit's PointTriangleDistanceType."""

    P_T0 = 0
    P_T1 = 1
    P_T2 = 2
    P_E0 = 3
    P_E1 = 4
    P_E2 = 5
    P_T = 6


class EdgeEdgeType(IntEnum):
    """Closest features of segments A = (a0, a1), B = (b0, b1); EA is A's interior, EA0 its first
    end point. Same numbering as IPC Toolkit's EdgeEdgeDistanceType."""

    EA0_EB0 = 0
    EA0_EB1 = 1
    EA1_EB0 = 2
    EA1_EB1 = 3
    EA_EB0 = 4
    EA_EB1 = 5
    EA0_EB = 6
    EA1_EB = 7
    EA_EB = 8


class TriangleDistance(NamedTuple):
    distance: torch.Tensor  # (N,) 0 when the triangles intersect
    point_a: torch.Tensor  # (N, 3) on tri_a; on the intersection when intersecting
    point_b: torch.Tensor  # (N, 3) on tri_b
    weights_a: torch.Tensor  # (N, 3) barycentric weights of point_a on tri_a's vertices
    weights_b: torch.Tensor  # (N, 3)


class PointTriangleDistance(NamedTuple):
    distance: torch.Tensor  # (N,)
    closest: torch.Tensor  # (N, 3) closest point on the triangle
    type: torch.Tensor  # (N,) int8, PointTriangleType
    weights: torch.Tensor  # (N, 3) barycentric weights of `closest`


class SegmentSegmentDistance(NamedTuple):
    distance: torch.Tensor  # (N,)
    point_a: torch.Tensor  # (N, 3) = a0 + s (a1 - a0)
    point_b: torch.Tensor  # (N, 3) = b0 + t (b1 - b0)
    type: torch.Tensor  # (N,) int8, EdgeEdgeType
    params: torch.Tensor  # (N, 2) s, t


def _from_numpy(x):
    """A numpy array as a CPU tensor sharing its memory (copied only if strided); anything else as
    given, for the checks to judge."""
    return torch.from_numpy(np.ascontiguousarray(x)) if isinstance(x, np.ndarray) else x


def triangle_distance(tri_a: torch.Tensor, tri_b: torch.Tensor) -> TriangleDistance:
    """Distance and closest points between triangles.

    tri_a, tri_b: (N, 3, 3) float tensors or numpy arrays, row k = vertex k, metres. Degenerate (zero-area) triangles
    behave as their edges; intersecting pairs return 0 and a point on the intersection.
    """
    tri_a, tri_b = _from_numpy(tri_a), _from_numpy(tri_b)
    check_float_tensor(tri_a, "tri_a", (None, 3, 3))
    check_float_tensor(tri_b, "tri_b", (None, 3, 3))
    check_same_batch({"tri_a": tri_a, "tri_b": tri_b})
    return TriangleDistance(*_ops.triangle_distance(tri_a, tri_b))


def triangle_intersect(tri_a: torch.Tensor, tri_b: torch.Tensor) -> torch.Tensor:
    """(N,) bool: the triangles intersect or touch, i.e. `triangle_distance(...).distance == 0`,
    decided by orientation predicates (Guigue–Devillers) with the exact distance as the fallback
    where a predicate is within rounding of zero. Not differentiable.

    tri_a, tri_b: (N, 3, 3) float, row k = vertex k. A pair with a NaN/Inf coordinate is False.
    """
    tri_a, tri_b = _from_numpy(tri_a), _from_numpy(tri_b)
    check_float_tensor(tri_a, "tri_a", (None, 3, 3))
    check_float_tensor(tri_b, "tri_b", (None, 3, 3))
    check_same_batch({"tri_a": tri_a, "tri_b": tri_b})
    return _ops.triangle_intersect(tri_a, tri_b)


def point_triangle_distance(points: torch.Tensor, triangles: torch.Tensor) -> PointTriangleDistance:
    """Distance from points to triangles, with the closest point and the closest-feature type.

    points: (N, 3) float; triangles: (N, 3, 3) float, metres (tensors or numpy arrays).
    """
    points, triangles = _from_numpy(points), _from_numpy(triangles)
    check_float_tensor(points, "points", (None, 3))
    check_float_tensor(triangles, "triangles", (None, 3, 3))
    check_same_batch({"points": points, "triangles": triangles})
    return PointTriangleDistance(*_ops.point_triangle_distance(points, triangles))


def segment_segment_distance(seg_a: torch.Tensor, seg_b: torch.Tensor) -> SegmentSegmentDistance:
    """Distance and closest points between segments, with the closest-feature type.

    seg_a, seg_b: (N, 2, 3) float end points, metres (tensors or numpy arrays). Zero-length segments act as points;
    for parallel segments one of the (equally close) closest pairs is returned.
    """
    seg_a, seg_b = _from_numpy(seg_a), _from_numpy(seg_b)
    check_float_tensor(seg_a, "seg_a", (None, 2, 3))
    check_float_tensor(seg_b, "seg_b", (None, 2, 3))
    check_same_batch({"seg_a": seg_a, "seg_b": seg_b})
    return SegmentSegmentDistance(*_ops.segment_segment_distance(seg_a, seg_b))


# ---- fake (meta) implementations, so torch.compile can trace the ops -------------------------


@torch.library.register_fake("contactnet::triangle_distance")
def _(tri_a, tri_b):
    n = tri_a.shape[0]
    return (
        tri_a.new_empty((n,)),
        tri_a.new_empty((n, 3)),
        tri_a.new_empty((n, 3)),
        tri_a.new_empty((n, 3)),
        tri_a.new_empty((n, 3)),
    )


@torch.library.register_fake("contactnet::triangle_intersect")
def _(tri_a, tri_b):
    return tri_a.new_empty((tri_a.shape[0],), dtype=torch.bool)


@torch.library.register_fake("contactnet::point_triangle_distance")
def _(points, triangles):
    n = points.shape[0]
    return (
        points.new_empty((n,)),
        points.new_empty((n, 3)),
        points.new_empty((n,), dtype=torch.int8),
        points.new_empty((n, 3)),
    )


@torch.library.register_fake("contactnet::segment_segment_distance")
def _(seg_a, seg_b):
    n = seg_a.shape[0]
    return (
        seg_a.new_empty((n,)),
        seg_a.new_empty((n, 3)),
        seg_a.new_empty((n, 3)),
        seg_a.new_empty((n,), dtype=torch.int8),
        seg_a.new_empty((n, 2)),
    )


# ---- autograd: d distance / d vertex = weight_of_vertex * unit(point_a - point_b) -------------


def _unit_direction(point_a, point_b, distance):
    """(point_a - point_b) / distance, and 0 where the distance is 0 (no defined direction)."""
    positive = distance > 0
    safe = torch.where(positive, distance, torch.ones_like(distance))
    return torch.where(positive[:, None], (point_a - point_b) / safe[:, None], 0.0)



def _triangle_setup(ctx, inputs, output):
    distance, point_a, point_b, weights_a, weights_b = output
    ctx.mark_non_differentiable(point_a, point_b, weights_a, weights_b)
    ctx.save_for_backward(_unit_direction(point_a, point_b, distance), weights_a, weights_b)


def _triangle_backward(ctx, grad_distance, *_unused):
    direction, weights_a, weights_b = ctx.saved_tensors
    g = grad_distance[:, None, None] * direction[:, None, :]  # (N, 1, 3)
    return weights_a[:, :, None] * g, -weights_b[:, :, None] * g


def _point_triangle_setup(ctx, inputs, output):
    points, _ = inputs
    distance, closest, type_, weights = output
    ctx.mark_non_differentiable(closest, type_, weights)
    ctx.save_for_backward(_unit_direction(points, closest, distance), weights)


def _point_triangle_backward(ctx, grad_distance, *_unused):
    direction, weights = ctx.saved_tensors
    g = grad_distance[:, None] * direction  # (N, 3)
    return g, -weights[:, :, None] * g[:, None, :]


def _segment_setup(ctx, inputs, output):
    distance, point_a, point_b, type_, params = output
    ctx.mark_non_differentiable(point_a, point_b, type_, params)
    ctx.save_for_backward(_unit_direction(point_a, point_b, distance), params)


def _segment_backward(ctx, grad_distance, *_unused):
    direction, params = ctx.saved_tensors
    g = grad_distance[:, None, None] * direction[:, None, :]  # (N, 1, 3)
    s, t = params[:, 0:1], params[:, 1:2]
    weights_a = torch.cat([1 - s, s], dim=1)[:, :, None]  # (N, 2, 1)
    weights_b = torch.cat([1 - t, t], dim=1)[:, :, None]
    return weights_a * g, -weights_b * g


torch.library.register_autograd(
    "contactnet::triangle_distance", _triangle_backward, setup_context=_triangle_setup
)
torch.library.register_autograd(
    "contactnet::point_triangle_distance",
    _point_triangle_backward,
    setup_context=_point_triangle_setup,
)
torch.library.register_autograd(
    "contactnet::segment_segment_distance", _segment_backward, setup_context=_segment_setup
)

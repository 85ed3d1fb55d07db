"""Exact contact kernels: Python wrappers over torch.ops.contactnet (C++ on CPU, CUDA on GPU).

Importing this package loads the compiled extension; it needs nothing but torch and numpy.
"""

from contactnet.ops.primitive_distance import (
    EdgeEdgeType,
    PointTriangleDistance,
    PointTriangleType,
    SegmentSegmentDistance,
    TriangleDistance,
    point_triangle_distance,
    segment_segment_distance,
    triangle_distance,
)

__all__ = [
    "EdgeEdgeType",
    "PointTriangleDistance",
    "PointTriangleType",
    "SegmentSegmentDistance",
    "TriangleDistance",
    "point_triangle_distance",
    "segment_segment_distance",
    "triangle_distance",
]

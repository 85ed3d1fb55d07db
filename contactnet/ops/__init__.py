"""Exact contact kernels: Python wrappers over torch.ops.contactnet (C++ on CPU, CUDA on GPU).

Importing this package loads the compiled extension; it needs nothing but torch and numpy (and
scipy's qhull, the first time a library's convex hulls are built for `hulls_separated`).
"""

from contactnet.ops.mesh_query import (
    Contacts,
    MeshDistance,
    blem_contacts,
    cluster_contacts,
    hulls_separated,
    mesh_collide,
    mesh_distance,
)
from contactnet.ops.point_mesh import PointMeshDistance, point_mesh_distance, point_mesh_signed_distance
from contactnet.ops.primitive_distance import (
    EdgeEdgeType,
    PointTriangleDistance,
    PointTriangleType,
    SegmentSegmentDistance,
    TriangleDistance,
    point_triangle_distance,
    segment_segment_distance,
    triangle_distance,
    triangle_intersect,
)
from contactnet.ops import ipc
from contactnet.ops.ipc import (
    BarrierHessian,
    Candidates,
    barrier,
    barrier_potential,
    barrier_potential_gradient,
    barrier_potential_hessian,
    ccd_time_of_impact,
    collision_candidates,
    collision_free_step,
    edge_edge_distance_squared,
    edge_edge_mollifier,
    friction_potential,
    friction_potential_gradient,
    friction_potential_hessian,
    mesh_edges,
    point_edge_distance_squared,
    point_point_distance_squared,
    point_triangle_distance_squared,
    swept_candidates,
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
    "triangle_intersect",
    "Contacts",
    "MeshDistance",
    "blem_contacts",
    "cluster_contacts",
    "hulls_separated",
    "mesh_collide",
    "mesh_distance",
    "PointMeshDistance",
    "point_mesh_distance",
    "point_mesh_signed_distance",
    # IPC barrier kernels (contactnet.ops.ipc has the gradient / Hessian siblings)
    "ipc",
    "BarrierHessian",
    "Candidates",
    "barrier",
    "barrier_potential",
    "barrier_potential_gradient",
    "barrier_potential_hessian",
    "ccd_time_of_impact",
    "collision_candidates",
    "collision_free_step",
    "edge_edge_distance_squared",
    "edge_edge_mollifier",
    "friction_potential",
    "friction_potential_gradient",
    "friction_potential_hessian",
    "mesh_edges",
    "point_edge_distance_squared",
    "point_point_distance_squared",
    "point_triangle_distance_squared",
    "swept_candidates",
]

"""Geometry: meshes, mesh libraries, their convex hulls, rigid poses, object frames and depth-camera views."""

from contactnet.geometry.convex_hulls import ConvexHulls, build_convex_hulls
from contactnet.geometry.depth_views import ViewSpec, partial_cloud, points_from_depth
from contactnet.geometry.frames import frame_quaternions, reframe_object
from contactnet.geometry.mesh import Mesh, MeshBvh, MeshLibrary
from contactnet.geometry.poses import (
    compose_poses,
    identity_poses,
    invert_poses,
    matrix_to_pose,
    matrix_to_quaternion,
    normalize_poses,
    pose_to_matrix,
    quaternion_to_matrix,
    transform_points,
    unit_quaternion_poses,
    unit_quaternions,
)

__all__ = [
    "ConvexHulls",
    "Mesh",
    "MeshBvh",
    "MeshLibrary",
    "ViewSpec",
    "build_convex_hulls",
    "compose_poses",
    "frame_quaternions",
    "identity_poses",
    "invert_poses",
    "matrix_to_pose",
    "matrix_to_quaternion",
    "normalize_poses",
    "partial_cloud",
    "points_from_depth",
    "pose_to_matrix",
    "quaternion_to_matrix",
    "reframe_object",
    "transform_points",
    "unit_quaternion_poses",
    "unit_quaternions",
]

"""Geometry: meshes, mesh libraries and rigid poses."""

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
)

__all__ = [
    "Mesh",
    "MeshBvh",
    "MeshLibrary",
    "compose_poses",
    "identity_poses",
    "invert_poses",
    "matrix_to_pose",
    "matrix_to_quaternion",
    "normalize_poses",
    "pose_to_matrix",
    "quaternion_to_matrix",
    "transform_points",
]

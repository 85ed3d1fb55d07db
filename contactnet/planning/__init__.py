"""Collision checking for planners: a `CollisionWorld` of per-environment obstacles of every cuRobo
kind (cuboids, spheres, capsules, cylinders, meshes, point clouds, voxel grids) with cuRobo-layout
sphere queries (`sphere_cost`, `sphere_signed_distance`), and
a `CollisionChecker` (learned, exact or certified hybrid backend) with batched, differentiable
queries and costs (voxel grids seen through each query mesh's probe, grid_probe.py), and `choose_tau` / `hybrid_summary` to set the hybrid's threshold; robots from
URDF (`Robot`, `RobotChecker`: link meshes, `<mimic>` joints, self-collision, attached objects,
joint-space cost and gradient) and swept checks between waypoints (`swept_check`, `swept_cost`). No Lightning import."""

from contactnet.planning.checker import BACKENDS, CollisionChecker, PairResult, WorldResult
from contactnet.planning.cost import collision_cost, learned_collision_cost
from contactnet.planning.exact import exact_signed_distance
from contactnet.planning.hybrid import choose_tau, hybrid_summary
from contactnet.planning.primitives import PrimitiveKind
from contactnet.planning.robot import Robot, RobotChecker, RobotResult
from contactnet.planning.spheres import sphere_cost, sphere_signed_distance
from contactnet.planning.swept import SweptResult, swept_check, swept_cost
from contactnet.planning.urdf import load_urdf
from contactnet.planning.voxels import VoxelGrid, voxel_grid_from_world
from contactnet.planning.world import CollisionWorld

__all__ = [
    "BACKENDS",
    "CollisionChecker",
    "CollisionWorld",
    "PairResult",
    "PrimitiveKind",
    "Robot",
    "RobotChecker",
    "RobotResult",
    "SweptResult",
    "VoxelGrid",
    "WorldResult",
    "choose_tau",
    "collision_cost",
    "exact_signed_distance",
    "hybrid_summary",
    "learned_collision_cost",
    "load_urdf",
    "sphere_cost",
    "sphere_signed_distance",
    "swept_check",
    "swept_cost",
    "voxel_grid_from_world",
]

"""Collision checking for planners: a `CollisionWorld` of meshes and per-environment obstacles, and
a `CollisionChecker` (learned or exact backend) with batched, differentiable queries and costs.
No Lightning import."""

from contactnet.planning.checker import BACKENDS, CollisionChecker, PairResult, WorldResult
from contactnet.planning.cost import collision_cost, learned_collision_cost
from contactnet.planning.exact import exact_signed_distance
from contactnet.planning.world import CollisionWorld

__all__ = [
    "BACKENDS",
    "CollisionChecker",
    "CollisionWorld",
    "PairResult",
    "WorldResult",
    "collision_cost",
    "exact_signed_distance",
    "learned_collision_cost",
]

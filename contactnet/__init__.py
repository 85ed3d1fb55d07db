"""contactnet: learned and exact contact between non-convex rigid objects.

`import contactnet` needs only torch and numpy; heavy dependencies (open3d, wandb, lightning, ...)
are imported by the modules that use them.
"""

from contactnet import geometry, models, ops, planning, sim
from contactnet.geometry import Mesh, MeshLibrary
from contactnet.models import LOCC, GlobalOCN, load_model
from contactnet.ops import (
    blem_contacts,
    mesh_collide,
    mesh_distance,
    point_triangle_distance,
    segment_segment_distance,
    triangle_distance,
)
from contactnet.planning import CollisionChecker, CollisionWorld
from contactnet.sim import Scene, Stepper

__version__ = "0.1.0"

__all__ = [
    "CollisionChecker",
    "CollisionWorld",
    "LOCC",
    "GlobalOCN",
    "Mesh",
    "MeshLibrary",
    "Scene",
    "Stepper",
    "blem_contacts",
    "geometry",
    "load_model",
    "mesh_collide",
    "mesh_distance",
    "models",
    "ops",
    "planning",
    "point_triangle_distance",
    "segment_segment_distance",
    "sim",
    "triangle_distance",
]

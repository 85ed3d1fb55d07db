"""contactnet: learned and exact contact between non-convex rigid objects.

`import contactnet` needs only torch and numpy; heavy dependencies (open3d, wandb, lightning, ...)
are imported by the modules that use them.
"""

from contactnet import geometry, ops
from contactnet.geometry import Mesh, MeshLibrary
from contactnet.ops import point_triangle_distance, segment_segment_distance, triangle_distance

__version__ = "0.1.0"

__all__ = [
    "Mesh",
    "MeshLibrary",
    "geometry",
    "ops",
    "point_triangle_distance",
    "segment_segment_distance",
    "triangle_distance",
]

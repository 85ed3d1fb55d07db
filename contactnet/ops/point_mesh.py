"""Point–mesh queries over a `MeshLibrary`: for points in a mesh's frame, the closest triangle
(exact unsigned distance and face id) and the generalised winding number (inside when >= 0.5,
the project's containment rule, so open meshes and soups work).

A batch holds Q queries; query q is point `points[q]` (metres, in the frame of mesh `ids[q]`, the
library's mesh coordinates). Ids are ints, sequences or integer tensors (any integer dtype, cast
once to int64); an id of -1 is a padding query (distance +inf, face -1, outside), so fixed-shape
callers can mask queries without a host sync. Points of the other float dtype than the library's
are cast to it once (as `mesh_distance` casts poses). A non-finite point gets a NaN distance and
winding number.

Each query runs two traversals of the mesh's BVH (C++ on the CPU, one CUDA thread per query on a
GPU): the fast winding number (Barill et al. 2018: far-field dipoles beyond `WINDING_BETA` node
radii, exact triangle terms near the point, so it is exact near the surface and off by a few
hundredths at most elsewhere, 0.03 on the test meshes: a closed mesh's 0 or 1 never flips, an open
mesh's inside flag may where its exact winding number is that close to 0.5), then a branch and bound for the closest triangle (depth first, nearer child first,
boxes pruned by a lower bound on their distance): O(log F) nodes per query for F faces, instead of
the O(F) of a scan. `max_distance` bounds the second search for points outside: a point farther
than it from the surface returns distance = max_distance and face -1 after a few box tests, which
is what makes far points cheap. Points inside are always searched in full (a penetration depth is
always wanted).

`point_mesh_distance` is not differentiable (a discrete search). `point_mesh_signed_distance`
is: it recomputes the distance in torch from the face the op found
(`contactnet.geometry.triangles.closest_points_on_triangles`, with the closest point held fixed:
the envelope theorem), so autograd gives the exact gradient with respect to the points wherever the
closest point is unique, and no backward kernel is needed.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from contactnet._extension import load_extension
from contactnet.geometry.mesh import MeshLibrary
from contactnet.geometry.triangles import closest_points_on_triangles
from contactnet.ops._checks import point_query_args
from contactnet.ops.mesh_query import WINDING_BETA

load_extension()

_ops = torch.ops.contactnet

__all__ = ["PointMeshDistance", "mesh_face_triangles", "point_mesh_distance", "point_mesh_signed_distance"]

# A point is inside a mesh when its generalised winding number reaches this (DESIGN.md).
INSIDE_WINDING = 0.5


class PointMeshDistance(NamedTuple):
    distance: torch.Tensor  # (Q,) unsigned distance to the closest triangle (max_distance: cut off)
    tri: torch.Tensor  # (Q,) int64 face id of the closest triangle (-1: padding or cut off)
    winding: torch.Tensor  # (Q,) generalised winding number
    inside: torch.Tensor  # (Q,) bool: winding >= 0.5


def point_mesh_distance(lib: MeshLibrary, ids, points: torch.Tensor, max_distance=None) -> PointMeshDistance:
    """Closest triangle and winding number of Q points, each in the frame of its mesh.

    lib: MeshLibrary; ids: (Q,) int mesh ids (-1: padding); points: (Q, 3) float, metres, mesh
    frame; max_distance: None or math.inf (no cut-off), a number > 0 or a (Q,) tensor of values > 0
    (+inf allowed), metres: a point outside whose closest triangle is not strictly closer gets
    distance = max_distance and tri = -1. Between triangles tied at the minimum (a shared vertex or
    edge) `tri` is any one of them. Returns PointMeshDistance (distance, tri, winding, inside).
    """
    ids, points, bound = point_query_args(lib, ids, points, max_distance)
    # .default: the overload itself, skipping the packet's overload resolution
    return PointMeshDistance(*_ops.point_mesh_distance.default(*lib.bvh, ids, points, bound, INSIDE_WINDING,
                                                               WINDING_BETA))


def mesh_face_triangles(lib: MeshLibrary, ids: torch.Tensor, tri: torch.Tensor) -> torch.Tensor:
    """(Q, 3, 3) vertices of face tri[q] of mesh ids[q] (mesh frame, the library's dtype); ids and
    tri (Q,) int64 on the library's device, valid (the caller masks padding)."""
    rows = lib.face_offsets[ids] + tri
    return lib.vertices[lib.faces[rows] + lib.vertex_offsets[ids][:, None]]


def point_mesh_signed_distance(lib: MeshLibrary, ids, points: torch.Tensor, max_distance=None) -> torch.Tensor:
    """(Q,) signed distance (metres, negative inside) of points (Q, 3) to meshes ids (Q,),
    differentiable with respect to the points (in the points' dtype; the search runs in the
    library's). Arguments as `point_mesh_distance`; cut-off points get +max_distance, padding +inf
    (both without gradient).

    The op's face is kept and the distance recomputed in torch from it, with the closest point held
    fixed, so the gradient is the unit vector from the surface (negated inside). It is exact away
    from the medial axis (where two faces are equally close and the gradient jumps) and 0 on the
    surface itself.
    """
    ids, local, bound = point_query_args(lib, ids, points, max_distance)
    with torch.no_grad():
        found = PointMeshDistance(*_ops.point_mesh_distance.default(*lib.bvh, ids, local.detach(), bound,
                                                                    INSIDE_WINDING, WINDING_BETA))
        hit = found.tri >= 0
        tris = mesh_face_triangles(lib, ids.clamp_min(0), found.tri.clamp_min(0))
        closest = closest_points_on_triangles(local, tris[:, 0], tris[:, 1], tris[:, 2])
    # `local` is the points (cast to the library's dtype, differentiably): it carries their graph.
    sq = ((local - closest) ** 2).sum(-1)
    dist = torch.where(sq > 0, sq.clamp_min(torch.finfo(sq.dtype).tiny).sqrt(), torch.zeros_like(sq))
    dist = torch.where(hit, dist, found.distance)
    return torch.where(found.inside, -dist, dist).to(points.dtype)


# ---- fake (meta) implementation -----------------------------------------------------------------


@torch.library.register_fake("contactnet::point_mesh_distance")
def _(tris, tri_ids, nodes, dipoles, node_offsets, face_offsets, ids, points, max_distance,
      winding_threshold, beta):  # fmt: skip
    q = ids.shape[0]
    return (
        points.new_empty((q,)),
        ids.new_empty((q,)),
        points.new_empty((q,)),
        ids.new_empty((q,), dtype=torch.bool),
    )

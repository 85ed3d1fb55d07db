"""How the mesh backends (exact, learned, hybrid; so robot links too) see a voxel grid: a probe.

A voxel grid holds sampled signed distance, no surface, so neither the exact kernels nor the
learned models can read it. Instead each query mesh carries a fixed set of probe points in its
frame, and its signed distance to a grid is estimated as

    d_hat = min over probe points p of g(T p)        (T: the query pose in the grid's frame)

with g the grid's trilinear value (voxels.py): differentiable in the pose through autograd (the
argmin point's trilinear gradient, rotated), fixed shapes, no host synchronisation, the same
number for every backend (the networks are not involved: the grid is geometry already).

The probe of a mesh (`mesh_probe`, built once per mesh, at the world's `probe_spacing` s):
- the surface cover: the mesh's triangles split by longest-edge bisection until no edge exceeds
  s, and every vertex of the pieces. Each point of a triangle lies within (its longest edge) / sqrt(3)
  of one of its vertices, so every surface point is within r = (longest piece edge) / sqrt(3)
  <= s / sqrt(3) of a probe point (`radius`);
- the interior: the centres of a lattice of pitch s inside the mesh (generalised winding number
  >= 0.5, the project's containment rule), so an obstacle wholly inside the link is seen too.
A mesh whose probe would exceed `max_points` gets a coarser s (times 1.25 until it fits; a mesh
with more vertices than that has its cover thinned to one point per cell of pitch s, its radius
growing by sqrt(3) s); its own radius and spacing are recorded (`CollisionWorld.probe_store`).
The mesh views of other obstacles (tessellated primitives, point-cloud octahedra) get no probe:
they are obstacles, not query meshes, and querying one against a grid reports +inf.

The bound. Let f be the obstacle's true signed distance field and g the grid's interpolant, with
|g - f| <= e inside the grid's box (e = sqrt(3) / 2 * voxel_size when the samples are exact signed
distances, as `voxel_grid_from_world` writes them: trilinear weights average 1-Lipschitz samples);
let d be the mesh's signed distance to the obstacle (the distance when apart; minus the deepest
point of the mesh's solid inside the obstacle otherwise), and the contact inside the grid's box.
- Apart (d > 0): d - e <= d_hat <= d + r + e. A reported contact (d_hat < 0) means d < e.
- A contact can be missed (d <= 0 but d_hat >= 0) only if the obstacle enters the mesh less deeply
  than r + e through its surface, or lies wholly inside it and is thinner than about
  sqrt(3) s / 2 + e (no lattice point inside it). So: a contact narrower than the probe spacing and
  the voxel size can be missed.
- The margin covers it: with an activation distance eta > r + e, every true contact has a positive
  cost (d_hat <= r + e < eta), so an optimiser is pushed off it; a planner wanting a certified
  "free" treats d_hat < r + e as contact (`CollisionWorld.probe_store["radius"]` gives r per mesh).
Outside the grid's box g is an upper bound (voxels.py): the grid only knows what lies inside its box.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from contactnet.geometry.poses import quaternion_to_matrix, unit_quaternions
from contactnet.geometry.triangles import winding_numbers
from contactnet.planning.voxels import trilinear

__all__ = ["grid_distances", "interior_lattice", "mesh_probe", "surface_cover", "thin"]

_GROWTH = 1.25  # spacing factor while a probe exceeds max_points


def surface_cover(vertices: np.ndarray, faces: np.ndarray, spacing: float) -> tuple[np.ndarray, float]:
    """(points (P, 3), radius): the vertices of the triangles split by longest-edge bisection until
    no edge exceeds `spacing`, and the covering radius (every surface point lies within it of a
    point), max piece edge / sqrt(3)."""
    tris = np.asarray(vertices, dtype=np.float64)[np.asarray(faces)]
    done = []
    while len(tris):
        edges = np.linalg.norm(tris[:, [1, 2, 0]] - tris, axis=-1)  # edge k: corner k -> k + 1
        longest = edges.argmax(1)
        small = edges.max(1) <= spacing
        done.append(tris[small])
        big, k = tris[~small], longest[~small]
        rows = np.arange(len(big))
        a, b, c = big[rows, k], big[rows, (k + 1) % 3], big[rows, (k + 2) % 3]
        m = (a + b) / 2
        tris = np.concatenate([np.stack([a, m, c], 1), np.stack([m, b, c], 1)])
    pieces = np.concatenate(done)
    radius = float(np.linalg.norm(pieces[:, [1, 2, 0]] - pieces, axis=-1).max()) / math.sqrt(3)
    points = np.unique(np.round(pieces.reshape(-1, 3), 12), axis=0)
    return points, radius


def interior_lattice(vertices: np.ndarray, faces: np.ndarray, spacing: float, chunk: int = 1 << 20) -> np.ndarray:
    """(P, 3) centres of the cells of a lattice of pitch `spacing` over the mesh's box that lie inside
    it (generalised winding number >= 0.5)."""
    v = np.asarray(vertices, dtype=np.float64)
    lo, hi = v.min(0), v.max(0)
    axes = [np.arange(lo[k] + spacing / 2, hi[k], spacing) for k in range(3)]
    if min(len(a) for a in axes) == 0:
        return np.zeros((0, 3))
    grid = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, 3)
    tris = torch.as_tensor(v[np.asarray(faces)])
    step = max(1, chunk // len(tris))
    inside = [winding_numbers(torch.as_tensor(grid[s:s + step]), tris) >= 0.5 for s in range(0, len(grid), step)]
    return grid[torch.cat(inside).numpy()]


def thin(points: np.ndarray, radius: float, pitch: float) -> tuple[np.ndarray, float]:
    """(kept points, radius): one point per occupied cell of a lattice of pitch `pitch`; every
    dropped point shares a cell with a kept one, so the covering radius grows by the cell's
    diagonal, sqrt(3) * pitch."""
    _, first = np.unique(np.floor(points / pitch).astype(np.int64), axis=0, return_index=True)
    return points[np.sort(first)], radius + math.sqrt(3) * pitch


def mesh_probe(vertices: np.ndarray, faces: np.ndarray, spacing: float,
               max_points: int) -> tuple[np.ndarray, float, float]:
    """(points (P, 3) float64 in the mesh's frame, surface radius r, spacing used): the probe of the
    module docstring, at `spacing` or coarser so that P <= max_points. A mesh with more vertices
    than max_points (every surface cover keeps them) has its cover thinned (`thin`), its radius
    growing accordingly. The interior lattice's winding numbers are only computed once its box
    lattice could fit (they cost lattice points x faces)."""
    many_vertices = len(np.unique(np.asarray(faces))) > max_points
    extent = np.ptp(np.asarray(vertices, dtype=np.float64), axis=0)
    while True:
        surface, radius = surface_cover(vertices, faces, spacing)
        if many_vertices:
            surface, radius = thin(surface, radius, spacing)
        cells = np.prod(np.floor(extent / spacing + 0.5))  # about the box lattice's size
        if len(surface) <= max_points and cells <= 4 * max_points:
            interior = interior_lattice(vertices, faces, spacing)
            if len(surface) + len(interior) <= max_points:
                return np.concatenate([surface, interior]), radius, spacing
        spacing *= _GROWTH


def grid_distances(probe: dict, grids: dict, ids: torch.Tensor, poses: torch.Tensor, slot_ids: torch.Tensor,
                   slot_poses: torch.Tensor, enabled: torch.Tensor, max_points: int = 1 << 22) -> torch.Tensor:
    """(Q, G) d_hat of mesh ids (Q,) at poses (Q, 7) against the grid slots of their environment:
    slot_ids (Q, G) into the grid store, slot_poses (Q, G, 7), enabled (Q, G) (+inf where not).
    probe: {"points" (M, S, 3), "valid" (M, S)}; grids: the world's sphere_store (grid_values,
    grid_dims, grid_origin, grid_voxel). Queries go in steps of at most max_points probe-point
    evaluations (a step count fixed by the shapes: no host sync). Differentiable in poses."""
    q, g = slot_ids.shape
    s = probe["points"].shape[1]
    step = max(1, max_points // max(1, g * s))
    out = []
    for k in range(0, q, step):  # a loop over shapes only
        i = slice(k, k + step)
        rot = quaternion_to_matrix(unit_quaternions(poses[i, 3:]))  # (q, 3, 3)
        world = torch.einsum("qij,qsj->qsi", rot, probe["points"][ids[i]]) + poses[i, None, :3]  # (q, S, 3)
        grid_rot = quaternion_to_matrix(slot_poses[i, :, 3:])  # (q, G, 3, 3)
        local = torch.einsum("qgji,qsgj->qsgi", grid_rot, world[:, :, None] - slot_poses[i, None, :, :3])
        gid = slot_ids[i, None].expand(local.shape[:-1])
        value = trilinear(grids["grid_values"], grids["grid_dims"], grids["grid_origin"], grids["grid_voxel"],
                          gid, local)  # (q, S, G)
        value = value.masked_fill(~probe["valid"][ids[i]][..., None], float("inf"))
        out.append(value.min(1).values)
    d = torch.cat(out) if len(out) > 1 else out[0]
    return torch.where(enabled, d, float("inf"))

"""Candidate pairs between the bodies of a packed scene: face–vertex and edge–edge pairs closer than
a reach, at one configuration or swept along a move, never joining two environments.

Two variants: `search` compacts (data-dependent shapes, host syncs) and `search_padded` returns
fixed-capacity lists padded with -1 and an overflow flag (no host sync; the fixed-shape step mode).
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from contactnet.ops import ipc
from contactnet.sim.packed import PackedScene

__all__ = ["PaddedSearch", "candidate_distances", "search", "search_padded"]


class PaddedSearch(NamedTuple):
    candidates: ipc.Candidates  # rows of -1 where unused, or where a pair joined two environments
    overflow: torch.Tensor  # () bool: more pairs of one kind than the capacity (some were dropped)


def _active(scene: PackedScene, lo: torch.Tensor, hi: torch.Tensor, reach: float):
    """(V,), (F,), (Ed,) bool: the primitive's box (lo, hi per vertex) comes within `reach` of
    another collision group's box in its environment.

    Only those primitives enter the broad phase: a bowl's far wall, or a resting body's top, never
    can touch anything this step, and left in they would only add grid entries and box tests."""
    G = scene.num_envs * scene.max_bodies
    index = scene.vertex_group[:, None].expand(-1, 3)
    glo = torch.full((G, 3), float("inf"), dtype=lo.dtype, device=lo.device).scatter_reduce(0, index, lo, "amin")
    ghi = torch.full((G, 3), -float("inf"), dtype=lo.dtype, device=lo.device).scatter_reduce(0, index, hi, "amax")
    glo, ghi = glo - reach, ghi + reach
    B = scene.max_bodies
    env_groups = torch.arange(G, device=lo.device).reshape(scene.num_envs, B)  # groups of each env

    def near_other_group(prim_lo, prim_hi, prim_group):
        others = env_groups[prim_group // B]  # (N, B)
        overlap = ((prim_lo[:, None, :] <= ghi[others]) & (prim_hi[:, None, :] >= glo[others])).all(-1)
        return (overlap & (others != prim_group[:, None])).any(1)

    faces, edges, group = scene.faces, scene.edges, scene.vertex_group
    flo, fhi = lo[faces].amin(1), hi[faces].amax(1)
    elo, ehi = lo[edges].amin(1), hi[edges].amax(1)
    return (near_other_group(lo, hi, group), near_other_group(flo, fhi, group[faces[:, 0]]),
            near_other_group(elo, ehi, group[edges[:, 0]]))


def _boxes(x0: torch.Tensor, x1: torch.Tensor | None):
    return (x0, x0) if x1 is None else (torch.minimum(x0, x1), torch.maximum(x0, x1))


def search(scene: PackedScene, x0: torch.Tensor, x1: torch.Tensor | None, reach: float) -> ipc.Candidates:
    """Pairs closer than `reach` at x0 (x1 None), or whose boxes swept along x0 → x1 come within
    `reach` (a superset of the pairs that come within `reach` on the way). x0, x1: (V, 3)."""
    keep_v, keep_f, keep_e = (torch.nonzero(m).flatten() for m in _active(scene, *_boxes(x0, x1), reach))
    used = torch.unique(torch.cat([keep_v, scene.faces[keep_f].reshape(-1), scene.edges[keep_e].reshape(-1)]))
    local = torch.full((x0.shape[0],), -1, dtype=torch.int64, device=x0.device)
    local[used] = torch.arange(used.numel(), device=x0.device)
    slot = scene.slot[scene.vertex_env[used]]
    faces, edges, group = local[scene.faces[keep_f]], local[scene.edges[keep_e]], scene.vertex_group[used]
    if x1 is None:
        c = ipc.collision_candidates(x0[used] + slot, faces, edges, reach, group)
    else:
        c = ipc.swept_candidates(x0[used] + slot, x1[used] + slot, faces, edges, reach, group)
    # Vertices that came in only as corners of kept faces / edges are points too: harmless
    # (any pair they form is a real candidate).
    fv = torch.stack([used[c.face_vertex[:, 0]], keep_f[c.face_vertex[:, 1]]], 1)
    ee = keep_e[c.edge_edge]
    ee = torch.sort(ee, dim=1).values
    fv_ok, ee_ok = scene.same_env_masks(fv, ee)
    return ipc.Candidates(fv[fv_ok].contiguous(), ee[ee_ok].contiguous())


def search_padded(scene: PackedScene, x0: torch.Tensor, x1: torch.Tensor | None, reach: float,
                  capacity: int) -> PaddedSearch:
    """`search` with fixed shapes: primitives far from other groups are masked out of the sweep
    instead of compacted away, and each list has `capacity` rows (-1 padding)."""
    keep_v, keep_f, keep_e = _active(scene, *_boxes(x0, x1), reach)
    slot = scene.slot[scene.vertex_env]
    masks = dict(vertex_body=scene.vertex_group, vertex_active=keep_v, face_active=keep_f, edge_active=keep_e)
    if x1 is None:
        found = ipc.collision_candidates_padded(x0 + slot, scene.faces, scene.edges, reach, capacity, **masks)
    else:
        found = ipc.swept_candidates_padded(x0 + slot, x1 + slot, scene.faces, scene.edges, capacity, reach, **masks)
    fv, ee = found.candidates
    # Padding rows index -1 (the last element): harmless to gather, masked here.
    fv_ok, ee_ok = scene.same_env_masks(fv, ee)
    fv_ok &= fv[:, 0] >= 0
    ee_ok &= ee[:, 0] >= 0
    return PaddedSearch(ipc.Candidates(torch.where(fv_ok[:, None], fv, -1), torch.where(ee_ok[:, None], ee, -1)),
                        found.overflow)


def candidate_distances(scene: PackedScene, x: torch.Tensor, cand: ipc.Candidates) -> torch.Tensor:
    """(N,) m, distance of each candidate pair at positions x (face–vertex rows, then edge–edge)."""
    fv, ee = cand
    p, t = x[fv[:, 0]], x[scene.faces[fv[:, 1]]]
    d_fv = ipc.point_triangle_distance_squared(p, t[:, 0].contiguous(), t[:, 1].contiguous(), t[:, 2].contiguous())
    ea, eb = x[scene.edges[ee[:, 0]]], x[scene.edges[ee[:, 1]]]
    d_ee = ipc.edge_edge_distance_squared(ea[:, 0].contiguous(), ea[:, 1].contiguous(),
                                          eb[:, 0].contiguous(), eb[:, 1].contiguous())
    return torch.cat([d_fv, d_ee]).clamp_min(0).sqrt()

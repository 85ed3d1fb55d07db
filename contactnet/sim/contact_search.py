"""Candidate pairs between the bodies of a packed scene: face–vertex and edge–edge pairs closer than
a reach, at one configuration or swept along a move, never joining two environments.

Two variants: `search` compacts (data-dependent shapes, host syncs) and `search_padded` returns
fixed-capacity lists padded with -1 and an overflow flag (no host sync; the fixed-shape step mode).

Two broad phases find the same pairs (the same primitive boxes and exact filter):
- body-level (`body_search`, the default when the caller gives the bodies' states q, on either
  device): the body pairs whose moving boxes come within reach, then only those pairs' rest-frame
  trees, mapped by the affine maps; its cost follows what is near contact, not the scene's size;
- all-primitive (`search_all_primitives`, `search_padded_all_primitives`; the reference, and the
  search of callers without the states): every primitive near another group's box, on one
  uniform grid / sweep.

`NeighbourList` (the adaptive stepper's) keeps, per environment, the exact pairs within a margin of
a base state and answers later queries near it without a broad phase.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from contactnet.ops import ipc
from contactnet.sim.packed import PackedScene

__all__ = ["NeighbourList", "PaddedSearch", "body_search", "candidate_distances", "displacement_bound", "in_envs",
           "relative_displacement_bound", "search", "search_all_primitives", "search_padded",
           "search_padded_all_primitives"]


class PaddedSearch(NamedTuple):
    # Rows of -1 where unused, or where a pair joined two environments; bounded by the counts of
    # the search (every row past them is padding).
    candidates: ipc.BoundedCandidates
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


def _body_level(x1, q0, q1) -> bool:
    """Whether the body-level search serves a query: it needs the states (both, swept)."""
    return q0 is not None and (x1 is None) == (q1 is None)


def search(scene: PackedScene, x0: torch.Tensor, x1: torch.Tensor | None, reach: float,
           q0: torch.Tensor | None = None, q1: torch.Tensor | None = None,
           active: torch.Tensor | None = None) -> ipc.Candidates:
    """Pairs closer than `reach` at x0 (x1 None), or whose boxes swept along x0 → x1 come within
    `reach` (a superset of the pairs that come within `reach` on the way). x0, x1: (V, 3).

    q0, q1: (E, B, 12) the states whose positions x0, x1 are (`PackedScene.positions`); given (both,
    for a swept search), the body-level search runs, else the all-primitive one. Same
    pairs either way; their order differs. active: (E,) bool, only the pairs of these environments
    (None: all); the body-level search then skips the other environments' body pairs."""
    if _body_level(x1, q0, q1):
        return body_search(scene, x0, x1, reach, q0, q1, active).candidates
    found = search_all_primitives(scene, x0, x1, reach)
    return found if active is None else _in_envs(scene, found, active)


def in_envs(scene: PackedScene, cand: ipc.Candidates, envs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(Nfv,), (Nee,) bool: which pairs of `cand` lie in the environments where envs (E,) is true."""
    keep = envs[scene.candidate_env(cand)]
    return keep[:cand.face_vertex.shape[0]], keep[cand.face_vertex.shape[0]:]


def _in_envs(scene: PackedScene, cand: ipc.Candidates, envs: torch.Tensor) -> ipc.Candidates:
    """The pairs of `cand` in the environments where envs (E,) bool is true."""
    keep_fv, keep_ee = in_envs(scene, cand, envs)
    return ipc.Candidates(cand.face_vertex[keep_fv].contiguous(), cand.edge_edge[keep_ee].contiguous())


def body_search(scene: PackedScene, x0: torch.Tensor, x1: torch.Tensor | None, reach: float, q0: torch.Tensor,
                q1: torch.Tensor | None = None, active: torch.Tensor | None = None) -> ipc.BodySearch:
    """`search` by the body-level broad phase, with its cost counters (`ipc.BodySearch`):
    the pairs of `search_all_primitives` (same boxes, at the same shifted positions, and filter)."""
    xs0, qs0, xs1, qs1 = _shifted(scene, x0, x1, q0, q1)
    pairs = scene.body_pairs
    if active is not None:  # flat body ids are env * max_bodies + slot
        pairs = pairs[active[pairs[:, 0] // scene.max_bodies]]
    return ipc.body_candidates(xs0, scene.faces, scene.edges, scene.trees, qs0, pairs, reach,
                               vertices_t1=xs1, q_t1=qs1, vertex_body=scene.vertex_group)


def _shifted(scene: PackedScene, x0, x1, q0, q1):
    """Positions and flat (E·B, 12) states in the environments' slots: the body search then tests
    the very boxes the all-primitive search tests."""
    xs0, qs0 = scene.shifted(x0, q0)
    xs1, qs1 = scene.shifted(x1, q1) if x1 is not None else (None, None)
    return xs0, qs0.reshape(-1, 12), xs1, None if qs1 is None else qs1.reshape(-1, 12)


def search_all_primitives(scene: PackedScene, x0: torch.Tensor, x1: torch.Tensor | None,
                          reach: float) -> ipc.Candidates:
    """`search` by the all-primitive broad phase: the primitives whose boxes come near another
    group's box, on one uniform grid (the reference of `body_search`)."""
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


def search_padded(scene: PackedScene, x0: torch.Tensor, x1: torch.Tensor | None, reach: float, capacity: int,
                  q0: torch.Tensor | None = None, q1: torch.Tensor | None = None, prune: bool = False) -> PaddedSearch:
    """`search` with fixed shapes: each list has `capacity` rows (-1 padding) and the overflow flag
    says whether pairs were dropped. No host read: a CUDA graph can capture it. Given the states
    q0, q1 (as in `search`) the body-level search runs; else the sweep of
    `search_padded_all_primitives`, which sorts every primitive of the scene. prune (swept): only
    the pairs that may come within reach on the motion (`ipc.prune_candidates_padded`'s), tested as
    the body-level search finds them or after the sweep."""
    if _body_level(x1, q0, q1):
        xs0, qs0, xs1, qs1 = _shifted(scene, x0, x1, q0, q1)
        found = ipc.body_candidates_padded(xs0, scene.faces, scene.edges, scene.trees, qs0, scene.body_pairs, reach,
                                           capacity, vertices_t1=xs1, q_t1=qs1, vertex_body=scene.vertex_group,
                                           prune=prune)
        return PaddedSearch(found.bounded, found.overflow)
    found = search_padded_all_primitives(scene, x0, x1, reach, capacity)
    if not prune or x1 is None:
        return found
    # Same capacity: the pruned list cannot overflow.
    kept = ipc.prune_candidates_padded(x0, scene.faces, scene.edges, found.candidates, reach, capacity,
                                       vertices_t1=x1)
    return PaddedSearch(kept.bounded, found.overflow)


def search_padded_all_primitives(scene: PackedScene, x0: torch.Tensor, x1: torch.Tensor | None, reach: float,
                                 capacity: int) -> PaddedSearch:
    """`search_padded` by the all-primitive sort-and-sweep: primitives far from other groups are
    masked out of the sweep instead of compacted away."""
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
    return PaddedSearch(ipc.BoundedCandidates(torch.where(fv_ok[:, None], fv, -1), torch.where(ee_ok[:, None], ee, -1),
                                              found.counts), found.overflow)


def displacement_bound(scene: PackedScene, dq: torch.Tensor) -> torch.Tensor:
    """(E,) bound on how far any point of an environment's bodies moves under the state change dq
    (E, B, 12): |Δp| + ‖ΔA‖_F · radius per body (x = A x0 + p, |x0| ≤ radius)."""
    norm = torch.linalg.vector_norm  # not Tensor.norm: its Python dispatch costs more than the math here
    return (norm(dq[..., :3], dim=-1) + norm(dq[..., 3:], dim=-1) * scene.radius).amax(-1)


def relative_displacement_bound(scene: PackedScene, dq: torch.Tensor) -> torch.Tensor:
    """(..., E) bound on how far any point of an environment's bodies moves under dq (..., E, B, 12)
    relative to one translation shared by the environment's bodies, static ones included (the
    middle of their translations' box): distances within an environment change by at most twice
    this. Objects carried along by a shaken bowl barely move relative to it, though all move far."""
    return ipc.relative_displacement_bound(dq, scene.radius, scene.present)


class NeighbourList:
    """Verlet lists for the adaptive stepper: per environment, the pairs closer than reach + 2m at
    a base state (a broad-phase search, then the exact distances), reused by every query, static
    or swept, whose states all stay within m of that base. A point moves by at most m from its
    base position relative to a translation shared by its environment's bodies
    (`relative_displacement_bound`; on a segment by at most the larger of its endpoints'), and a
    shared translation changes no distance, so a pair at least reach + 2m apart at the base stays
    at least reach apart: the pairs the query needs are all in the list, and pruning it to the
    query (`ipc.prune_candidates`) costs in proportion to the contacts. The environments a query
    takes out of their margins are searched again at its start, alone (the others keep their
    lists: with many environments one of them always moves), with m the larger of reach and twice
    their move; those whose move is longer than max_margin · reach / 2 (a fast body, a step's
    first move) are searched swept on their own, so the lists stay short.

    Same pairs within reach as `search`; a superset only of the pairs that never come within reach,
    which CCD and the potential ignore (CCD's conservative stop may differ for those, safely)."""

    def __init__(self, max_margin: float = 1.0):
        # In units of reach. Short lists pay: every query prunes its whole list, and with moves up
        # to reach / 2 kept (margins up to reach) the shaken bowls step 1.1-1.4x faster than with
        # 4 (lists with margins up to 4 reach), though more moves are searched alone.
        self.max_margin = max_margin
        self.reach: float | None = None
        self.q: torch.Tensor | None = None  # (E, B, 12) each environment's base state
        self.margin: torch.Tensor | None = None  # (E,) its m (less 1e-9 relative, for rounding); -1: no list
        # Each environment's pairs closer than reach + 2m at its base, face–vertex and edge–edge,
        # one tensor each: the iterating environments' lists are then one cat.
        self.fv: list[torch.Tensor] = []
        self.ee: list[torch.Tensor] = []
        self._all: ipc.Candidates | None = None  # every environment's, concatenated

    def query(self, scene: PackedScene, x0, x1, reach: float, q0, q1=None, active=None) -> ipc.Candidates:
        """`search(...)` pruned to the pairs that may come within reach on x0 → x1 (or at x0)."""
        env = torch.ones(scene.num_envs, dtype=torch.bool, device=x0.device) if active is None else active
        if self.reach != reach:
            self._reset(scene, q0, reach)
        dq = (q0 if q1 is None else torch.stack([q0, q1])) - self.q  # both ends in one bound
        bound = relative_displacement_bound(scene, dq)
        stale = env & ~((bound if q1 is None else bound.amax(0)) <= self.margin)
        alone = None
        if bool(stale.any()):
            move = relative_displacement_bound(scene, q1 - q0) if q1 is not None else torch.zeros_like(self.margin)
            alone = stale & (move > self.max_margin * reach / 2)
            rebuild = stale & ~alone
            if bool(rebuild.any()):
                margin = max(reach, 2 * float(move[rebuild].max()))
                # A search at one configuration keeps exactly the pairs closer than its reach (the
                # broad phase's exact filter, on positions shifted into the environments' slots:
                # a rounding difference, which the margin's 1e-9 covers): no pruning to do.
                found = search(scene, x0, None, reach + 2 * margin, q0, None, rebuild)
                self._replace(scene, rebuild, q0, margin * (1 - 1e-9), found)
            if not bool(alone.any()):
                alone = None
        pairs = self._pairs_in(env if alone is None else env & ~alone)
        if alone is not None:
            fv, ee = search(scene, x0, x1, reach, q0, q1, alone)
            pairs = ipc.Candidates(torch.cat([pairs.face_vertex, fv]), torch.cat([pairs.edge_edge, ee]))
        return ipc.prune_candidates(x0, scene.faces, scene.edges, pairs, reach, vertices_t1=x1)

    def _reset(self, scene: PackedScene, q0, reach: float) -> None:
        self.reach, self.q = reach, q0.clone()
        self.margin = torch.full((scene.num_envs,), -1.0, dtype=q0.dtype, device=q0.device)
        none = torch.zeros(0, 2, dtype=torch.int64, device=q0.device)
        self.fv, self.ee = [none] * scene.num_envs, [none] * scene.num_envs
        self._all = None

    def _replace(self, scene: PackedScene, envs, q0, margin: float, found: ipc.Candidates) -> None:
        """The lists of environments `envs` (E,) bool: `found`, at base q0 with margin m."""
        fv, ee = found
        rebuilt = envs.nonzero().flatten().tolist()
        for rows, env_of, lists in ((fv, scene.vertex_env[fv[:, 0]], self.fv),
                                    (ee, scene.vertex_env[scene.edges[ee[:, 0], 0]], self.ee)):
            counts = torch.bincount(env_of, minlength=scene.num_envs).tolist()
            per_env = torch.split(rows[torch.argsort(env_of, stable=True)], counts)  # search order kept
            for e in rebuilt:
                lists[e] = per_env[e]
        self._all = None
        self.q = torch.where(envs[:, None, None], q0, self.q)
        self.margin = torch.where(envs, margin, self.margin)

    def _pairs_in(self, envs) -> ipc.Candidates:
        """The listed pairs of environments `envs` (E,) bool."""
        if bool(envs.all()):
            if self._all is None:
                self._all = self._cat(range(len(self.fv)))
            return self._all
        return self._cat(envs.nonzero().flatten().tolist())

    def _cat(self, envs) -> ipc.Candidates:
        none = self.fv[0][:0]
        return ipc.Candidates(torch.cat([none, *(self.fv[e] for e in envs)]),
                              torch.cat([none, *(self.ee[e] for e in envs)]))


def candidate_distances(scene: PackedScene, x: torch.Tensor, cand: ipc.Candidates) -> torch.Tensor:
    """(N,) m, distance of each candidate pair at positions x (face–vertex rows, then edge–edge)."""
    fv, ee = cand
    p, t = x[fv[:, 0]], x[scene.faces[fv[:, 1]]]
    d_fv = ipc.point_triangle_distance_squared(p, t[:, 0].contiguous(), t[:, 1].contiguous(), t[:, 2].contiguous())
    ea, eb = x[scene.edges[ee[:, 0]]], x[scene.edges[ee[:, 1]]]
    d_ee = ipc.edge_edge_distance_squared(ea[:, 0].contiguous(), ea[:, 1].contiguous(),
                                          eb[:, 0].contiguous(), eb[:, 1].contiguous())
    return torch.cat([d_fv, d_ee]).clamp_min(0).sqrt()

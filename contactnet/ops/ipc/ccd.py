"""Conservative continuous collision detection for linear trajectories x(t) = x0 + t (x1 - x0):
per-candidate times of impact (additive CCD, csrc/common/ccd.h) and the largest safe step."""

from __future__ import annotations

import torch

from contactnet._extension import load_extension
from contactnet.ops._checks import (
    as_index_tensor,
    check_float_tensor,
    check_index_values,
    check_int,
    check_positive,
    check_same_batch,
    check_same_device,
    inputs_trusted,
    ipc_candidate_args,
    ipc_mesh_args,
    values_checked_here,
)
from contactnet.ops.ipc.candidates import Candidates, candidate_extents, swept_candidates

load_extension()

_ops = torch.ops.contactnet


def ccd_time_of_impact(vertices_t0, vertices_t1, faces, edges, candidates: Candidates, min_distance: float = 0.0,
                       tmax: float = 1.0, conservative_rescaling: float = 0.9,
                       max_iterations: int = 1_000_000) -> torch.Tensor:
    """Per-candidate conservative time of impact in [0, tmax] under x(t) = x0 + t (x1 - x0)
    (tmax where there is none). Additive CCD (IPC Toolkit's AdditiveCCD): the pair stays farther
    apart than min_distance on [0, toi]. 0 when a pair starts closer than min_distance.
    max_iterations caps the ACCD loop; on hitting it the (still safe) time reached is returned.
    """
    fv, ee = candidates
    if not inputs_trusted():
        faces, edges, _ = ipc_mesh_args(vertices_t0, faces, edges, None, "vertices_t0")
        check_float_tensor(vertices_t1, "vertices_t1", (None, 3))
        check_same_batch({"vertices_t0": vertices_t0, "vertices_t1": vertices_t1})
        fv, ee = ipc_candidate_args(candidates, vertices_t0, faces, edges)
        min_distance = check_positive(min_distance, "min_distance", allow_zero=True)
        tmax = check_positive(tmax, "tmax", allow_zero=True)
        conservative_rescaling = check_positive(conservative_rescaling, "conservative_rescaling")
        if conservative_rescaling > 1:
            raise ValueError(f"conservative_rescaling: expected a value in (0, 1], got {conservative_rescaling}")
        max_iterations = check_int(max_iterations, "max_iterations", 1)
    return _ops.ipc_ccd(vertices_t0, vertices_t1, faces, edges, fv, ee, float(min_distance), float(tmax),
                        float(conservative_rescaling), int(max_iterations))


def collision_free_step(vertices_t0, vertices_t1, faces, edges, min_distance: float = 0.0, vertex_body=None,
                        conservative_rescaling: float = 0.9, max_iterations: int = 1_000_000) -> torch.Tensor:
    """Largest step fraction α in [0, 1] such that moving every vertex from x0 to x0 + α (x1 - x0)
    keeps all face–vertex and edge–edge pairs farther apart than min_distance (conservative: never
    a step that ends in penetration). A 0-dim tensor on the vertices' device."""
    candidates = swept_candidates(vertices_t0, vertices_t1, faces, edges, min_distance, vertex_body)
    toi = ccd_time_of_impact(vertices_t0, vertices_t1, faces, edges, candidates, min_distance, 1.0,
                             conservative_rescaling, max_iterations)
    if toi.numel() == 0:
        return vertices_t0.new_ones(())
    return toi.min()


def collision_free_steps(vertices_t0, vertices_t1, faces, edges, candidates: Candidates, vertex_env, num_envs: int,
                         min_distance: float = 0.0, conservative_rescaling: float = 0.9,
                         max_iterations: int = 1_000_000) -> torch.Tensor:
    """(num_envs,) per environment, the largest step fraction α in [0, 1] that keeps every listed
    pair of it farther apart than min_distance: the smallest `ccd_time_of_impact` of its candidates
    (1 without any; a NaN time counts as 0). A candidate belongs to the environment of its first
    stencil vertex, vertex_env (V,) in [0, num_envs). Rows of -1 are padding, and so are the rows
    past the extents of `BoundedCandidates` (skipped unread). On a GPU one pass over the
    candidates, with no per-candidate output."""
    fv, ee = candidates
    extents = candidate_extents(candidates)
    if not inputs_trusted():
        faces, edges, _ = ipc_mesh_args(vertices_t0, faces, edges, None, "vertices_t0")
        check_float_tensor(vertices_t1, "vertices_t1", (None, 3))
        check_same_batch({"vertices_t0": vertices_t0, "vertices_t1": vertices_t1})
        fv, ee = ipc_candidate_args(candidates, vertices_t0, faces, edges)
        extents = candidate_extents(candidates, "extents", vertices_t0)
        num_envs = check_int(num_envs, "num_envs", 1)
        vertex_env = as_index_tensor(vertex_env, "vertex_env", (vertices_t0.shape[0],))
        check_same_device(vertex_env, "vertex_env", vertices_t0, "vertices_t0")
        if values_checked_here(vertex_env):
            check_index_values(vertex_env, "vertex_env", num_envs)
        min_distance = check_positive(min_distance, "min_distance", allow_zero=True)
        conservative_rescaling = check_positive(conservative_rescaling, "conservative_rescaling")
        if conservative_rescaling > 1:
            raise ValueError(f"conservative_rescaling: expected a value in (0, 1], got {conservative_rescaling}")
        max_iterations = check_int(max_iterations, "max_iterations", 1)
    return _ops.ipc_collision_free_steps(vertices_t0, vertices_t1, faces, edges, fv, ee, vertex_env, int(num_envs),
                                         float(min_distance), float(conservative_rescaling), int(max_iterations),
                                         extents)


@torch.library.register_fake("contactnet::ipc_collision_free_steps")
def _(vertices_t0, vertices_t1, faces, edges, fv, ee, vertex_env, num_envs, *args, **kwargs):
    return vertices_t0.new_empty((num_envs,))


@torch.library.register_fake("contactnet::ipc_ccd")
def _(vertices_t0, vertices_t1, faces, edges, fv, ee, min_distance, tmax, conservative_rescaling, max_iterations):
    return vertices_t0.new_empty((fv.shape[0] + ee.shape[0],))

"""Sphere queries in cuRobo's layout: a drop-in for planners built on cuRobo's sphere robots.

spheres (batch, horizon, n, 4) [x, y, z, radius] in world metres; env_idx (batch,) int (None:
environment 0), the environment of each batch row, as cuRobo's `env_query_idx`. Against every
obstacle of that environment, every kind, exactly:
- cuboid, sphere, capsule, cylinder: analytic signed distances (primitives.py);
- meshes (added with `add_obstacle`): the exact distance to the closest triangle, signed by the
  generalised winding number (inside when >= 0.5, the project's containment rule), so open meshes
  work. Both come from the mesh's BVH (`contactnet.ops.point_mesh_distance`, C++ / one CUDA thread
  per query): O(log faces) node visits per sphere and mesh slot instead of a scan of every face;
  the distance is then recomputed in torch from the found triangle, which gives the gradient.
  `sphere_cost` stops the search for centres outside at radius + 2 eta, where the cost and its
  gradient are 0, so spheres in free space cost a few box tests;
- point clouds: distance to the union of the points' balls (point_clouds.py);
- voxel grids: trilinear signed distance (voxels.py).
A sphere's signed distance to an obstacle is the centre's minus the sphere's radius.

`sphere_cost` is cuRobo's collision cost (cost.py, activation distance eta) summed over the
obstacles of the sphere's environment, as cuRobo's kernels sum it, shape (batch, horizon, n);
`sphere_signed_distance` is the minimum over them (+inf when none is enabled). Gradients with
respect to the spheres (centres and radii) come from autograd: exact wherever the closest feature
is unique (for meshes through the closest point held fixed — the envelope theorem — so the
gradient of |x - c| is the unit vector from the surface).

Hot path: shapes depend only on the inputs' shapes and the world's capacities. Disabled and empty
slots are computed and masked, except mesh slots, which reach the BVH op as padding queries (id -1)
that it skips. Point clouds are processed in steps of at most `max_pairs` sphere-point pairs (about
100 bytes per pair in float32, so the default 2**22 bounds a step near 400 MB), meshes in steps of
at most max_pairs / 4 sphere-slot queries (about 400 bytes each, the op's outputs and the torch
recomputation); the step counts are fixed by the shapes. Spheres are cast once to the world's
dtype; results come back in the spheres' dtype.

What synchronises with the host: with `validate=False`, nothing (traceable with fullgraph, CUDA-graph
capturable): the mesh op is launched on the spheres' device and its value checks are skipped (its
mesh ids are valid by construction); its results are read on the device. `validate=True` reads the
spheres and env_idx on the host. The first query after a mesh is added builds the meshes' BVHs on
the CPU and copies them, with the library id of each mesh row, to the device (syncs): run one
query before capturing a CUDA graph, as after registering meshes.
"""

from __future__ import annotations

import torch

from contactnet.geometry.poses import quaternion_to_matrix
from contactnet.geometry.mesh import MeshLibrary
from contactnet.ops._checks import trusted_indices
from contactnet.ops.point_mesh import point_mesh_signed_distance
from contactnet.planning.cost import collision_cost
from contactnet.planning.primitives import primitive_signed_distance
from contactnet.planning.voxels import trilinear

__all__ = ["sphere_cost", "sphere_signed_distance"]

_LAYOUT = "(batch, horizon, n, 4) [x, y, z, radius]"
# Memory of one sphere-mesh-slot query on the mesh path, in units of the cloud path's sphere-point
# pairs (what `max_pairs` counts): the op's outputs plus the torch recomputation from the found face.
_QUERY_PAIRS = 4
# The sphere store's entry (added here) for the library id of each of its mesh rows.
_ROWS_KEY = "mesh_library_ids"


def _to_local(points: torch.Tensor, pose: torch.Tensor) -> torch.Tensor:
    """points (B, S, 3) into the frames of poses (B, N, 7): (B, S, N, 3) = R^T (x - t)."""
    rot = quaternion_to_matrix(pose[..., 3:])  # (B, N, 3, 3)
    return torch.einsum("bnji,bsnj->bsni", rot, points[:, :, None, :] - pose[:, None, :, :3])


def _step(batch: int, slots: int, size: int, max_pairs: int) -> int:
    """Spheres per batch row per step so that one step holds at most max_pairs pairs (>= 1)."""
    return max(1, max_pairs // (batch * slots * size))


def _mesh_rows(world) -> tuple[MeshLibrary, torch.Tensor]:
    """The world's mesh library (its BVHs built) and (R,) the library id of each mesh row of the
    sphere store (the meshes registered with add_mesh, in order). The ids are kept in the sphere
    store itself (under _ROWS_KEY), which the world rebuilds, as it does its library, whenever a mesh
    is added: one cache with one lifetime, and a plain dict that torch.compile guards cheaply."""
    store = world.sphere_store
    rows = store.get(_ROWS_KEY)
    if rows is None:
        world.library.bvh  # built on the CPU and copied to the device once, here, not on the hot path
        ids = [mid for mid, row in enumerate(world._mesh_row) if row >= 0]
        rows = store[_ROWS_KEY] = torch.tensor(ids, dtype=torch.int64, device=world.device)
    return world.library, rows


def _mesh_distances(world, centres: torch.Tensor, env: torch.Tensor, cutoff: torch.Tensor | None,
                    max_pairs: int) -> torch.Tensor:
    """(B, S, Nm) signed distance of centres (B, S, 3) to each mesh slot of their environment (+inf
    where the slot is disabled; at least cutoff (B, S), when given, where a centre outside is
    farther than that)."""
    table = world.tables["mesh"]
    batch, slots = env.shape[0], table.ids.shape[1]
    if not any(row >= 0 for row in world._mesh_row):  # no mesh to place: every slot is empty
        return centres.new_full((batch, centres.shape[1], slots), float("inf"))
    lib, rows = _mesh_rows(world)
    # Disabled and empty slots are padding queries (id -1): the op skips them, with no host sync.
    ids = torch.where(table.enabled[env], rows[table.ids[env]], -1)  # (B, Nm)
    out = []
    chunk = _step(batch, slots, _QUERY_PAIRS, max_pairs)
    for s in range(0, centres.shape[1], chunk):  # a loop over shapes only: no host sync
        local = _to_local(centres[:, s:s + chunk], table.pose[env])  # (B, s, Nm, 3)
        q_ids = ids[:, None, :].expand(local.shape[:-1])
        bound = None if cutoff is None else cutoff[:, s:s + chunk, None].expand(local.shape[:-1]).reshape(-1)
        with trusted_indices():  # ids valid by construction: no value checks (a sync on a GPU)
            d = point_mesh_signed_distance(lib, q_ids.reshape(-1), local.reshape(-1, 3), bound)
        out.append(d.reshape(local.shape[:-1]))
    return torch.cat(out, 1) if len(out) > 1 else out[0]


def _cloud_distances(world, centres: torch.Tensor, env: torch.Tensor, max_pairs: int) -> torch.Tensor:
    table, store = world.tables["point_cloud"], world.sphere_store
    ids = table.ids[env]
    points, valid = store["cloud_points"][ids], store["point_valid"][ids]  # (B, Nc, P, 3), (B, Nc, P)
    out = []
    chunk = _step(*valid.shape, max_pairs)
    for s in range(0, centres.shape[1], chunk):
        local = _to_local(centres[:, s:s + chunk], table.pose[env])  # (B, s, Nc, 3)
        sq = ((local[..., None, :] - points[:, None]) ** 2).sum(-1).masked_fill(~valid[:, None], float("inf"))
        best = sq.min(-1).values
        out.append(torch.where(best > 0, best.clamp_min(1e-30).sqrt(), torch.zeros_like(best)))
    dist = torch.cat(out, 1) if len(out) > 1 else out[0]
    return dist - store["point_radius"][ids][:, None]


def _per_obstacle(world, spheres: torch.Tensor, env: torch.Tensor, max_pairs: int,
                  cutoff: torch.Tensor | None = None) -> torch.Tensor:
    """(B, S, N_all) signed distances of spheres (B, S, 4) to every slot of every sphere table
    (+inf where disabled). cutoff (B, S): mesh distances of centres outside may stop there."""
    centres, radii = spheres[..., :3], spheres[..., 3:]
    parts = []
    prim = world.tables["primitive"]
    local = _to_local(centres, prim.pose[env])
    parts.append((primitive_signed_distance(local, prim.ids[env][:, None], prim.params[env][:, None]), prim))
    parts.append((_mesh_distances(world, centres, env, cutoff, max_pairs), world.tables["mesh"]))
    parts.append((_cloud_distances(world, centres, env, max_pairs), world.tables["point_cloud"]))
    grids = world.tables["voxel_grid"]
    store = world.sphere_store
    local = _to_local(centres, grids.pose[env])
    gid = grids.ids[env][:, None].expand(local.shape[:-1])
    parts.append((trilinear(store["grid_values"], store["grid_dims"], store["grid_origin"], store["grid_voxel"],
                            gid, local), grids))
    signed = torch.cat([d - radii for d, _ in parts], -1)
    enabled = torch.cat([t.enabled[env] for _, t in parts], -1)[:, None]
    return torch.where(enabled, signed, float("inf"))


def _check(world, spheres, env_idx, validate: bool):
    from contactnet.planning.world import CollisionWorld

    if not isinstance(world, CollisionWorld):
        raise ValueError(f"world: expected a CollisionWorld, got {type(world).__name__}")
    if not isinstance(spheres, torch.Tensor):
        raise ValueError(f"spheres: expected a torch.Tensor {_LAYOUT}, got {type(spheres).__name__}")
    if not world.obstacle_names:
        raise ValueError("world: it has no obstacle; add one (add_cuboid, add_obstacle, ...) before querying")
    if spheres.dim() != 4 or spheres.shape[-1] != 4:
        raise ValueError(f"spheres: expected shape {_LAYOUT}, got {tuple(spheres.shape)}")
    if not spheres.dtype.is_floating_point:
        raise ValueError(f"spheres: expected a float tensor, got dtype {spheres.dtype}")
    if spheres.device != world.device:
        raise ValueError(f"spheres: is on {spheres.device} but the world is on {world.device}")
    batch = spheres.shape[0]
    if env_idx is None:
        env = torch.zeros(batch, dtype=torch.int64, device=world.device)
    else:
        env = torch.as_tensor(env_idx, device=world.device)
        if env.dtype.is_floating_point or env.dtype in (torch.bool, torch.complex64, torch.complex128):
            raise ValueError(f"env_idx: expected integer environment indices, got dtype {env.dtype}")
        if env.shape != (batch,):
            raise ValueError(f"env_idx: expected shape ({batch},), one environment per batch row, got "
                             f"{tuple(env.shape)}")
        env = env.long()
    if validate:
        if not bool(torch.isfinite(spheres).all()):
            raise ValueError(f"spheres: contains NaN or Inf ({_LAYOUT})")
        if bool((spheres[..., 3] < 0).any()):
            raise ValueError("spheres: a radius (last column) is negative")
        if env.numel() and (int(env.min()) < 0 or int(env.max()) >= world.num_envs):
            raise ValueError(f"env_idx: environment indices must lie in [0, {world.num_envs}), got "
                             f"[{int(env.min())}, {int(env.max())}]")
    return env


def _distances(world, spheres, env_idx, validate, max_pairs, eta=None):
    """(batch, horizon, n, N_all) signed distances; with eta (the cost's), mesh distances of centres
    outside stop at radius + 2 eta, where the cost and its gradient are 0."""
    env = _check(world, spheres, env_idx, validate)
    if isinstance(max_pairs, bool) or not isinstance(max_pairs, int) or max_pairs < 1:
        raise ValueError(f"max_pairs: expected an int >= 1, got {max_pairs!r}")
    b, h, n, _ = spheres.shape
    flat = spheres.to(world.dtype).reshape(b, h * n, 4)
    if eta is None:
        cutoff = None
    else:  # (no cut-off where radius + 2 eta is not a valid bound: NaN or negative radii, unvalidated)
        bound = flat[..., 3].detach() + 2 * eta
        cutoff = torch.where(bound > 0, bound, float("inf"))
    return _per_obstacle(world, flat, env, max_pairs, cutoff).reshape(b, h, n, -1)


def sphere_signed_distance(world, spheres: torch.Tensor, env_idx=None, validate: bool = True,
                           max_pairs: int = 1 << 22) -> torch.Tensor:
    """(batch, horizon, n) minimum signed distance (metres, > 0 apart) of each sphere to the
    enabled obstacles of its environment; +inf where there is none."""
    return _distances(world, spheres, env_idx, validate, max_pairs).min(-1).values.to(spheres.dtype)


def sphere_cost(world, spheres: torch.Tensor, env_idx=None, eta: float = 0.02, validate: bool = True,
                max_pairs: int = 1 << 22) -> torch.Tensor:
    """(batch, horizon, n) cuRobo's collision cost of each sphere, summed over the enabled
    obstacles of its environment: collision_cost(d, eta) (cost.py) of each signed distance d."""
    if not eta > 0:
        raise ValueError(f"eta: expected an activation distance > 0, got {eta}")
    d = _distances(world, spheres, env_idx, validate, max_pairs, eta)
    return collision_cost(d, eta).sum(-1).to(spheres.dtype)

"""`CollisionChecker`: batched, differentiable collision queries against a `CollisionWorld`, with a
learned backend (LOCC or Global-OCN over cached shape embeddings), the exact kernels, or the
certified hybrid of both.

Queries (leading batch shape `...` is anything, e.g. (B, Q) or (B, H) trajectories):
- `pairwise(a, b, poses_a, poses_b)`: mesh names/ids `a`, `b` (...), poses (..., 7) ->
  `PairResult` (colliding, probability, logit [learned], signed distance [exact]);
- `world_query(mesh, poses, env_idx)`: one moving mesh per query against every enabled obstacle of its
  environment -> `WorldResult` (per-query verdict and per-obstacle values);
- `cost(mesh, poses, env_idx)` (also `forward`): the summed activation-distance cost (cost.py),
  differentiable with respect to `poses` for every backend.

Voxel grids (`CollisionWorld.add_voxel_grid`) have no mesh view: `world_query` and `cost` see them,
for every backend alike, through the query mesh's probe (grid_probe.py: the min of the grid's
trilinear value over surface and interior points of the mesh; the bound on what it can miss, and
the margin that covers it, are stated there). `WorldResult.per_grid` holds those distances; the
cost adds collision_cost(d, eta) per grid slot. Fixed shapes and no sync: the table's slots up to
the last one in use (`CollisionWorld.grid_slots`, host state that changes only when a grid is
added or removed) are computed and masked; none when the world holds no grid.

Certified hybrid ("hybrid", a LOCC or Global-OCN `model` and a threshold `tau` > 0): a pair whose
convex hulls are certainly apart is free (`hulls_separated`, exact); otherwise a confident
"collide" verdict, logit >= tau, stands, and the exact kernels decide the rest, every learned
"free" verdict included (hybrid.py). So it never calls a colliding pair free, and wherever a
query is deferred its verdict is the exact backend's. `pairwise` decides per pair, `world_query` per
(query, obstacle) slot before taking the any; both report what went to the exact check in
`deferred`. Each part runs only where it decides something: the network only on pairs whose
hulls are not certified apart (their logit reads -inf), the exact collision check (a verdict, no
distance) only on the deferred ones. `choose_tau` (hybrid.py) picks tau on validation data for a
target error rate. The cost stays the learned one (see `cost`).

Hot path. The learned backend, with `validate=False` and integer id / env tensors, has fixed shapes
and no host synchronisation (disabled and empty obstacle slots are computed and masked, never
skipped), so it traces under `torch.compile` and can be captured in a CUDA graph. `validate=True`
(the default) checks names, ranges, shapes and NaN first, which synchronises. The exact backend
skips disabled slots and bisects penetrations, both data dependent: it is the verifier, not the
graph-captured inner loop. So are the hybrid's verdicts: which queries reach the exact kernels
depends on the logits, and finding them synchronises. Its cost is the learned path.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch
from torch import nn

from contactnet.geometry.frames import frame_quaternions
from contactnet.models.collision_nets import LOCC, CollisionNet, GlobalOCN
from contactnet.models.encoder import ShapeEmbedding
from contactnet.models.frame_tables import FrameTable, frame_logits, frame_tables
from contactnet.ops.mesh_query import hulls_separated, mesh_collide
from contactnet.planning.cost import collision_cost, learned_collision_cost
from contactnet.planning.exact import exact_signed_distance
from contactnet.planning.grid_probe import grid_distances
from contactnet.planning.hybrid import certified_verdicts
from contactnet.planning.pose_input import POSE_ORDER
from contactnet.planning.world import CollisionWorld

__all__ = ["BACKENDS", "CollisionChecker", "PairResult", "WorldResult"]

BACKENDS = ("locc", "global_ocn", "exact", "hybrid")


class PairResult(NamedTuple):
    colliding: torch.Tensor  # (...) bool: logit > 0 (learned) or the exact verdict (hybrid: where deferred)
    probability: torch.Tensor  # (...) sigmoid(logit) (learned), colliding as 0/1 (exact, hybrid deferred)
    logit: torch.Tensor | None  # (...) learned and hybrid (hybrid: -inf where the hulls are certified
    #                             apart, the network not run)
    signed_distance: torch.Tensor | None  # (...) metres, exact only (see planning/exact.py)
    deferred: torch.Tensor | None = None  # (...) bool, hybrid only: decided by the exact kernels


class WorldResult(NamedTuple):
    colliding: torch.Tensor  # (...) bool: any enabled obstacle collides
    probability: torch.Tensor  # (...) max over enabled obstacles (0 when none is enabled)
    signed_distance: torch.Tensor | None  # (...) min over enabled obstacles (+inf if none), exact only
    per_obstacle: torch.Tensor  # (..., N) logits (learned, hybrid; -inf when disabled, and for the
    #                             hybrid where the hulls are certified apart) or signed distances
    #                             (exact, +inf when disabled), one per obstacle slot
    deferred: torch.Tensor | None = None  # (..., N) bool, hybrid only: slots decided exactly
    per_grid: torch.Tensor | None = None  # (..., G) probe signed distance to each voxel-grid slot (the
    #                                       first G = CollisionWorld.grid_slots of the table)
    #                                       (grid_probe.py; +inf when disabled), None without grids;
    #                                       every backend: a grid < 0 makes `colliding` (and
    #                                       probability 1), and the exact `signed_distance` is the min


class CollisionChecker(nn.Module):
    """Collision queries on `world` with backend "locc", "global_ocn" (both need `model`, a
    trained `LOCC` / `GlobalOCN`), "exact", or "hybrid" (`model` either, and `tau`).

    eta: activation distance of the cost (metres); chunk: queries per network call (bounds memory);
    penetration_tol: bisection tolerance of the exact penetration estimate (metres); validate:
    check every argument (names, shapes, NaN) — turn off on a compiled / graph-captured hot path;
    tau (hybrid only, > 0; inf defers all but the hull-certified pairs): "collide" verdicts with
    logit < tau, and every "free" verdict on a pair whose hulls are not certified apart, get the
    exact verdict (`hybrid.defer`);
    grid_max_points: probe-point evaluations per step of the voxel-grid term (bounds its memory);
    frames (learned and hybrid): each logit is the mean over that many frames of each object (its
    own, then fixed rotations: `frame_quaternions`), an ensemble at `frames` times the network cost
    that is more accurate near contact (docs/results.md); the hybrid's tau must be chosen with the
    same frames (`python eval.py frames=...`).
    The model is moved to the world's device, put in eval mode and frozen (requires_grad False) in
    place: pose gradients never need weight gradients.
    """

    def __init__(self, world: CollisionWorld, backend: str = "exact", model: CollisionNet | None = None,
                 eta: float = 0.02, chunk: int = 16384, penetration_tol: float = 1e-3, validate: bool = True,
                 tau: float | None = None, grid_max_points: int = 1 << 22, frames: int = 1):
        super().__init__()
        if not isinstance(world, CollisionWorld):
            raise ValueError(f"world: expected a CollisionWorld, got {type(world).__name__}")
        if backend not in BACKENDS:
            raise ValueError(f"backend: expected one of {BACKENDS}, got {backend!r}")
        if not eta > 0:
            raise ValueError(f"eta: expected an activation distance > 0, got {eta}")
        if not penetration_tol > 0:
            raise ValueError(f"penetration_tol: expected > 0, got {penetration_tol}")
        if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
            raise ValueError(f"chunk: expected an int >= 1, got {chunk!r}")
        if backend != "hybrid" and tau is not None:
            raise ValueError(f"tau: only the 'hybrid' backend takes a threshold, got tau={tau!r} with "
                             f"backend {backend!r}")
        if backend == "hybrid" and (isinstance(tau, bool) or not isinstance(tau, (int, float)) or not tau > 0):
            raise ValueError(f"tau: backend 'hybrid' needs a threshold tau > 0 (queries with |logit| < tau go "
                             f"to the exact check), got {tau!r}")
        if isinstance(grid_max_points, bool) or not isinstance(grid_max_points, int) or grid_max_points < 1:
            raise ValueError(f"grid_max_points: expected an int >= 1, got {grid_max_points!r}")
        self.grid_max_points = grid_max_points
        self.frame_quaternions = frame_quaternions(frames)  # checks frames
        if frames > 1 and backend == "exact":
            raise ValueError(f"frames: only a learned or hybrid backend averages over frames, got frames={frames} "
                             "with backend 'exact'")
        self.tau = None if tau is None else float(tau)
        self.world, self.backend, self.eta = world, backend, float(eta)
        self.chunk, self.penetration_tol, self.validate = chunk, float(penetration_tol), validate
        if backend == "exact":
            if model is not None:
                raise ValueError("model: the exact backend takes no model")
            self.model = None
        else:
            expected = {"locc": (LOCC,), "global_ocn": (GlobalOCN,), "hybrid": (LOCC, GlobalOCN)}[backend]
            if not isinstance(model, expected):
                raise ValueError(f"model: backend {backend!r} needs a {' or '.join(e.__name__ for e in expected)}, "
                                 f"got {type(model).__name__}")
            self.model = model.to(world.device).eval().requires_grad_(False)
        self._tables: list[FrameTable] = []  # one per frame, the meshes' own first
        self._table_version = -1

    @classmethod
    def from_checkpoint(cls, path, world: CollisionWorld, backend: str | None = None, max_error: float = 0.0,
                        **kwargs) -> CollisionChecker:
        """A checker with the network of a training checkpoint (`contactnet.models.load_model`).
        backend: None, the network's own ("locc" or "global_ocn"), or "hybrid": without a `tau`,
        the threshold training chose on its validation split for `max_error` (0: none of it wrong)
        and these `frames` (`contactnet.models.checkpoint.stored_tau`)."""
        from contactnet.models.checkpoint import load_model, stored_tau

        net = load_model(path, map_location=world.device)
        if backend is None:
            backend = "locc" if isinstance(net, LOCC) else "global_ocn"
        if backend == "hybrid" and kwargs.get("tau") is None:
            kwargs["tau"] = stored_tau(path, max_error, kwargs.get("frames", 1))
        return cls(world, backend=backend, model=net, **kwargs)

    @property
    def learned(self) -> bool:
        """Whether a network runs (the learned backends and the hybrid)."""
        return self.backend != "exact"

    # ---- embeddings -------------------------------------------------------------------------
    def embeddings(self) -> ShapeEmbedding:
        """The shape-embedding table of every world mesh (id order), computed once per mesh set."""
        if not self.learned:
            raise ValueError("backend: the exact backend has no shape embeddings")
        if self._table_version != self.world.version:
            w = self.world
            if w.points.shape[0] == 0:
                raise ValueError("world: no mesh registered; call add_mesh first")
            # The world keeps its samples in float32; a float64 model (gradcheck) encodes them in float64.
            dtype = next(self.model.parameters()).dtype
            points, normals, aabb = (t.to(dtype) for t in (w.points, w.normals, w.aabb))
            vertices = [m.vertices.to(w.device, dtype) for m in w.meshes]
            # Encoded and projected (`project_table`) once per mesh set, not once per batch.
            self._tables = frame_tables(self.model, points, normals, aabb, vertices, self.frame_quaternions)
            self._table_version = w.version
        return self._tables[0].table

    # ---- argument handling --------------------------------------------------------------------
    def _poses(self, poses, arg: str, shape: torch.Size | None = None) -> torch.Tensor:
        if not isinstance(poses, torch.Tensor):  # numpy or nested lists: a tensor on the world's device, once
            try:
                array = np.asarray(poses)
                poses = torch.as_tensor(array if array.dtype in (np.float32, np.float64) else array.astype(np.float64),
                                        device=self.world.device)
            except (TypeError, ValueError):
                raise ValueError(f"{arg}: expected a tensor or array of shape (..., 7) {POSE_ORDER}, got "
                                 f"{type(poses).__name__}") from None
        if self.validate:
            if not poses.dtype.is_floating_point:
                raise ValueError(f"{arg}: expected a float tensor, got dtype {poses.dtype}")
            if poses.dim() < 1 or poses.shape[-1] != 7:
                raise ValueError(f"{arg}: expected shape (..., 7) [x, y, z, qw, qx, qy, qz], got "
                                 f"{tuple(poses.shape)}")
            if shape is not None and poses.shape[:-1] != shape:
                raise ValueError(f"{arg}: expected leading shape {tuple(shape)} to match the ids, got "
                                 f"{tuple(poses.shape[:-1])}")
            if poses.device != self.world.device:
                raise ValueError(f"{arg}: is on {poses.device} but the world is on {self.world.device}")
            if not bool(torch.isfinite(poses).all()):
                raise ValueError(f"{arg}: contains NaN or Inf; poses are {POSE_ORDER}")
            if bool((poses[..., 3:].norm(dim=-1) == 0).any()):
                raise ValueError(f"{arg}: contains a zero quaternion; poses are {POSE_ORDER} (query poses are "
                                 f"normalised, so any other norm is accepted)")
        return poses

    def _ids(self, names, arg: str) -> torch.Tensor:
        if isinstance(names, torch.Tensor) and not self.validate:
            return names
        return self.world.mesh_ids(names, arg)

    def _env(self, env_idx, shape: torch.Size) -> torch.Tensor:
        w = self.world
        if env_idx is None:
            return torch.zeros(shape, dtype=torch.int64, device=w.device)
        env = torch.as_tensor(env_idx, device=w.device)
        if self.validate:
            if env.dtype.is_floating_point or env.dtype == torch.bool or env.dtype.is_complex:
                raise ValueError(f"env_idx: expected integer environment indices, got dtype {env.dtype}")
            try:
                env = env.expand(shape)
            except RuntimeError:
                raise ValueError(f"env_idx: shape {tuple(env.shape)} does not broadcast to the queries' "
                                 f"{tuple(shape)}") from None
            if env.numel() and (int(env.min()) < 0 or int(env.max()) >= w.num_envs):
                raise ValueError(f"env_idx: environment indices must lie in [0, {w.num_envs}), got "
                                 f"[{int(env.min())}, {int(env.max())}]")
        return env.expand(shape).long()

    def _logits(self, ids_a, ids_b, poses_a, poses_b) -> torch.Tensor:
        """Flat (Q,) logits in chunks of `self.chunk` queries, averaged over the frames."""
        dtype = self.embeddings().features.dtype
        return frame_logits(self.model, self._tables, ids_a, ids_b, poses_a.to(dtype), poses_b.to(dtype), self.chunk)

    def _signed(self, ids_a, ids_b, poses_a, poses_b, upper_bound=None):
        w = self.world
        return exact_signed_distance(w.library, w.aabb, ids_a.contiguous(), ids_b.contiguous(),
                                     poses_a.to(w.dtype), poses_b.to(w.dtype), self.penetration_tol,
                                     upper_bound)

    def _exact_at(self, mask, ids_a, ids_b, poses_a, poses_b, fill: float, upper_bound=None, per_a: int = 1):
        """Exact (signed distance, colliding) where `mask` (K,) or (Q, N) is set, `fill` / False
        elsewhere, in mask's shape. Flat entry k pairs a = k // per_a (ids_a, poses_a (K / per_a,
        ...)) with b = k (ids_b, poses_b (K, ...)): per_a = N for (query, obstacle) slots. Only the
        set entries reach the kernels, so this synchronises."""
        sel = torch.nonzero(mask.reshape(-1)).squeeze(1)
        qi = sel // per_a
        signed, hit = self._signed(ids_a[qi], ids_b[sel], poses_a[qi], poses_b[sel], upper_bound)
        full = torch.full((mask.numel(),), fill, dtype=signed.dtype, device=signed.device)
        full = full.index_put((sel,), signed)
        colliding = torch.zeros(mask.numel(), dtype=torch.bool, device=signed.device).index_put((sel,), hit)
        return full.reshape(mask.shape), colliding.reshape(mask.shape)

    def _hybrid(self, ids_a, ids_b, poses_a, poses_b, per_a: int = 1, live=None):
        """The hybrid's decisions (`certified_verdicts`): flat entry k pairs a = k // per_a (ids_a,
        poses_a (K / per_a, ...)) with b = k (ids_b, poses_b (K, ...)); live (K,) bool or None:
        the entries to answer (enabled slots). Returns colliding, probability (0/1 where deferred,
        certified or not live), logit (-inf where certified or not live) and deferred, all (K,)."""
        ia = ids_a[:, None].expand(-1, per_a).reshape(-1)
        pa = poses_a[:, None].expand(-1, per_a, 7).reshape(-1, 7)
        lib = self.world.library
        separated = hulls_separated(lib, ia, ids_b, pa, poses_b)
        dtype = self.embeddings().features.dtype
        colliding, logit, deferred = certified_verdicts(
            separated, lambda r: self._logits(ia[r], ids_b[r], pa[r], poses_b[r]),
            lambda r: mesh_collide(lib, ia[r], ids_b[r], pa[r], poses_b[r]), self.tau, dtype, live)
        probability = torch.where(deferred, colliding.to(dtype), torch.sigmoid(logit))
        return colliding, probability, logit, deferred

    # ---- queries ------------------------------------------------------------------------------
    def pairwise(self, a, b, poses_a: torch.Tensor, poses_b: torch.Tensor) -> PairResult:
        """Mesh `a` (...) at poses_a (..., 7) against mesh `b` (...) at poses_b (..., 7); a name or
        id broadcasts against the poses."""
        ids_a, ids_b = self._ids(a, "a"), self._ids(b, "b")
        poses_a, poses_b = self._poses(poses_a, "poses_a"), self._poses(poses_b, "poses_b")
        if self.validate and poses_a.shape != poses_b.shape:
            raise ValueError(f"poses_b: shape {tuple(poses_b.shape)} differs from poses_a's {tuple(poses_a.shape)}")
        shape = poses_a.shape[:-1]
        try:
            ids_a, ids_b = ids_a.expand(shape).reshape(-1), ids_b.expand(shape).reshape(-1)
        except RuntimeError:
            raise ValueError(f"a, b: id shapes {tuple(ids_a.shape)}, {tuple(ids_b.shape)} do not broadcast "
                             f"to the poses' {tuple(shape)}") from None
        pa, pb = poses_a.reshape(-1, 7), poses_b.reshape(-1, 7)
        if not self.learned:
            signed, hit = self._signed(ids_a, ids_b, pa, pb)
            return PairResult(hit.reshape(shape), hit.reshape(shape).to(signed.dtype), None, signed.reshape(shape))
        if self.backend == "hybrid":
            colliding, probability, logit, deferred = self._hybrid(ids_a, ids_b, pa, pb)
            return PairResult(*(t.reshape(shape) for t in (colliding, probability, logit)), None,
                              deferred.reshape(shape))
        logit = self._logits(ids_a, ids_b, pa, pb).reshape(shape)
        return PairResult(logit > 0, torch.sigmoid(logit), logit, None)

    def _world_pairs(self, mesh, poses, env_idx):
        poses = self._poses(poses, "poses")
        shape = poses.shape[:-1]
        ids = self._ids(mesh, "mesh")
        try:
            ids = ids.expand(shape).reshape(-1)
        except RuntimeError:
            raise ValueError(f"mesh: id shape {tuple(ids.shape)} does not broadcast to the poses' "
                             f"{tuple(shape)}") from None
        env = self._env(env_idx, shape).reshape(-1)
        w = self.world
        return (shape, ids, poses.reshape(-1, 7), w.obstacle_mesh[env], w.obstacle_pose[env], w.obstacle_enabled[env],
                env)

    def _grid(self, ids, poses, env) -> torch.Tensor | None:
        """(Q, G) probe signed distances (grid_probe.py) of meshes ids (Q,) at poses (Q, 7) to the
        voxel-grid slots of environments env (Q,), +inf where disabled; None when the world has no
        grid. G = `CollisionWorld.grid_slots` (host state: no sync); every one of them is computed
        and masked (fixed shapes)."""
        w = self.world
        slots = w.grid_slots  # host state: only the slots up to the last one in use
        if slots == 0:
            return None
        table = w.tables["voxel_grid"]
        return grid_distances(w.probe_store, w.sphere_store, ids, poses.to(w.dtype), table.ids[env, :slots],
                              table.pose[env, :slots], table.enabled[env, :slots], self.grid_max_points)

    def _per_obstacle(self, ids, poses, obs_ids, obs_poses, enabled, upper_bound=None):
        """(Q, N) logits (learned, every slot computed then masked to -inf) or signed distances
        (exact, enabled slots only, +inf elsewhere)."""
        q, n = obs_ids.shape
        if self.learned:
            logit = self._logits(ids[:, None].expand(q, n).reshape(-1), obs_ids.reshape(-1),
                                 poses[:, None, :].expand(q, n, 7).reshape(-1, 7), obs_poses.reshape(-1, 7))
            return torch.where(enabled, logit.reshape(q, n), float("-inf")), None
        return self._exact_at(enabled, ids, obs_ids.reshape(-1), poses, obs_poses.reshape(-1, 7), float("inf"),
                              upper_bound, per_a=n)

    def world_query(self, mesh, poses: torch.Tensor, env_idx=None) -> WorldResult:
        """Mesh `mesh` (name/id, or (...) ids) at poses (..., 7) against every enabled obstacle of
        environment env_idx (...) (int, tensor, or None for environment 0)."""
        shape, ids, poses, obs_ids, obs_poses, enabled, env = self._world_pairs(mesh, poses, env_idx)
        if self.backend == "hybrid":
            result = self._hybrid_world(shape, ids, poses, obs_ids, obs_poses, enabled)
        else:
            per, hit = self._per_obstacle(ids, poses, obs_ids, obs_poses, enabled)
            result = self._world_result(shape, per, hit)
        grid = self._grid(ids, poses, env)
        if grid is None:
            return result
        inside = (grid < 0).any(-1).reshape(shape)
        signed = result.signed_distance
        if self.backend == "exact":
            signed = torch.minimum(signed, grid.min(-1).values.to(signed.dtype).reshape(shape))
        return result._replace(colliding=result.colliding | inside,
                               probability=torch.maximum(result.probability, inside.to(result.probability.dtype)),
                               signed_distance=signed, per_grid=grid.reshape(*shape, -1))

    def _hybrid_world(self, shape, ids, poses, obs_ids, obs_poses, enabled) -> WorldResult:
        """world_query over the mesh-view slots, hybrid: decided per slot, then the any."""
        n = obs_ids.shape[-1]
        slot, prob, logit, deferred = self._hybrid(ids, obs_ids.reshape(-1), poses, obs_poses.reshape(-1, 7),
                                                   per_a=n, live=enabled.reshape(-1))
        slot, prob = slot.reshape(-1, n).any(-1), prob.reshape(-1, n).max(-1).values
        return WorldResult(slot.reshape(shape), prob.reshape(shape), None, logit.reshape(*shape, n),
                           deferred.reshape(*shape, n))

    def _world_result(self, shape, per, hit) -> WorldResult:
        """world_query over the mesh-view slots, learned or exact."""
        n = per.shape[-1]
        if self.learned:
            best = per.max(-1).values
            return WorldResult((best > 0).reshape(shape), torch.sigmoid(best).reshape(shape), None,
                               per.reshape(*shape, n))
        signed = per.min(-1).values
        colliding = hit.any(-1)
        return WorldResult(colliding.reshape(shape), colliding.to(signed.dtype).reshape(shape),
                           signed.reshape(shape), per.reshape(*shape, n))

    def cost(self, mesh, poses: torch.Tensor, env_idx=None, eta: float | None = None) -> torch.Tensor:
        """(...) collision cost of mesh at poses (..., 7) summed over the enabled obstacles of its
        environment: `collision_cost(signed distance, eta)` (exact) or `learned_collision_cost(logit,
        eta)` (learned and hybrid), plus `collision_cost` of the probe distance to each enabled voxel
        grid (any backend; module docstring). Differentiable with respect to `poses`.

        The hybrid uses the learned cost: it is smooth in the logit everywhere, whereas switching
        to the exact cost where |logit| < tau would make the cost jump at the threshold and change
        its scale per slot; its certified part is the verdict (`pairwise` / `world_query`), which a
        planner checks on the trajectory it keeps. It also keeps the cost graph-capturable."""
        eta = self.eta if eta is None else float(eta)
        if not eta > 0:
            raise ValueError(f"eta: expected an activation distance > 0, got {eta}")
        shape, ids, poses, obs_ids, obs_poses, enabled, env = self._world_pairs(mesh, poses, env_idx)
        if self.learned:
            logit, _ = self._per_obstacle(ids, poses, obs_ids, obs_poses, enabled)
            # softplus(-inf) = 0 for disabled slots, with zero gradient.
            cost = learned_collision_cost(logit, eta).sum(-1)
        else:
            # Beyond eta the cost is 0: the distance search stops there (upper bound).
            signed, _ = self._per_obstacle(ids, poses, obs_ids, obs_poses, enabled, upper_bound=eta)
            cost = collision_cost(signed, eta).sum(-1)
        grid = self._grid(ids, poses, env)
        if grid is not None:  # every backend: the grid is geometry (cost 0, gradient 0 where +inf)
            cost = cost + collision_cost(grid, eta).sum(-1).to(cost.dtype)
        return cost.reshape(shape)

    def forward(self, mesh, poses: torch.Tensor, env_idx=None) -> torch.Tensor:
        return self.cost(mesh, poses, env_idx)

    def extra_repr(self) -> str:
        tau = f", tau={self.tau}" if self.backend == "hybrid" else ""
        frames = f", frames={len(self.frame_quaternions)}" if self.learned else ""
        return (f"backend={self.backend!r}{tau}{frames}, eta={self.eta}, chunk={self.chunk}, "
                f"validate={self.validate}")

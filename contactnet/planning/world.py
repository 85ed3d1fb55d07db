"""A collision world for planners: meshes registered once, obstacles in preallocated per-environment
slots whose poses and enable flags change in place (as cuRobo's object cache does, so captured CUDA
graphs stay valid).

Two kinds of names:
- meshes (`add_mesh`): shapes, packed in one `MeshLibrary` and addressed by name or id. Query
  objects (a grasped object, a robot link) are meshes too. Each mesh is re-centred on its AABB
  centre at registration (the project's object frame, which the learned models assume): every pose
  in this package places that frame. `mesh_offset(name)` is the shift that was removed.
- obstacles (`add_obstacle`): a mesh placed at a pose in one environment, enabled or not.

Buffers (E environments, N = max_obstacles slots each; empty slots are disabled and point at mesh 0):
    obstacle_mesh    (E, N) int64
    obstacle_pose    (E, N, 7) world dtype, [x, y, z, qw, qx, qy, qz], metres
    obstacle_enabled (E, N) bool
Adding a mesh reallocates the library (and a checker's embedding table); adding, moving, enabling
or disabling obstacles never reallocates. Register every mesh before capturing a graph.

Every cuRobo obstacle kind (`add_cuboid`, `add_sphere`, `add_capsule`, `add_cylinder`,
`add_obstacle` for meshes, `add_point_cloud`, `add_voxel_grid`) lives in one world, per
environment. Two views of each obstacle, written together by `set_pose` / `set_enabled`:
- the mesh view above (`obstacle_*`), read by `CollisionChecker`'s mesh queries, exact and learned:
  cuboids are their exact 12 triangles; spheres, capsules and cylinders a tessellation that
  contains the true shape and lies at most `tessellation_tol` outside it (so the mesh backends
  never miss a contact; see primitives.py), registered as a mesh named `_<kind>/<obstacle>`;
  point clouds the octahedra of point_clouds.py, with the cloud's own points and open3d normals as
  the learned models' input. Voxel grids have no mesh view (a sampled distance has no surface for
  the exact kernels or the networks): a query mesh sees them through its probe (grid_probe.py:
  surface and interior points at `probe_spacing`, `probe_store`), the trilinear value at its
  points, with the bound stated there (a contact narrower than the probe spacing and the voxel
  size can be missed; an activation distance above the probe radius plus the grid's error covers it);
- the sphere-query view (spheres.py), exact: one `SlotTable` per family in `tables`, sized by
  `cache` (slots per environment, as cuRobo's `cache={"obb": 10, "mesh": 3}`): "primitive"
  (analytic distances), "mesh" (the meshes' triangles), "point_cloud", "voxel_grid".
Adding a mesh, cloud or grid reallocates the packed geometry the sphere queries read (`sphere_store`).

Poses: (7,) [x, y, z, qw, qx, qy, qz] (quaternion scalar first, as cuRobo), float64, float32 or a
list, cast once to the world's dtype when written. Every pose the world takes (`add_*`,
`add_obstacle`, `set_pose(s)`, a camera pose) goes through one check (pose_input.py): a quaternion
whose norm is off 1 by more than 1e-3 is refused (a wrong order or a typo, not rounding), one within
it is normalised.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from contactnet.geometry.mesh import Mesh, MeshLibrary
from contactnet.geometry.poses import transform_points
from contactnet.geometry.sampling import SURFACE_POINTS, sample_surface_even
from contactnet.planning import point_clouds
from contactnet.planning.grid_probe import mesh_probe
from contactnet.planning.pose_input import checked_poses
from contactnet.planning.primitives import NUM_PARAMS, PrimitiveKind, primitive_params, tessellate
from contactnet.planning.slots import SlotTable
from contactnet.planning.voxels import VoxelGrid

TABLES = ("primitive", "mesh", "point_cloud", "voxel_grid")

__all__ = ["CollisionWorld"]


class CollisionWorld:
    """Meshes and per-environment obstacles on one device.

    num_envs: E environments; max_obstacles: N slots per environment; dtype: float32/float64 of
    poses and exact queries; num_points: K surface samples (with normals) per mesh, the learned
    models' input (`SURFACE_POINTS`, as in the built-in data); seed: the sampling seed;
    cache: sphere-query slots per environment per family ({"primitive", "mesh", "point_cloud",
    "voxel_grid"} -> int, each max_obstacles unless given); tessellation_tol: metres, how far
    outside a curved primitive its mesh view may lie; probe_spacing (metres) / probe_max_points:
    the probe through which query meshes see voxel grids (grid_probe.py), built on first use.
    """

    def __init__(self, num_envs: int = 1, max_obstacles: int = 16, device: torch.device | str = "cpu",
                 dtype: torch.dtype = torch.float32, num_points: int = SURFACE_POINTS, seed: int = 0,
                 cache: dict | None = None, tessellation_tol: float = 1e-3, probe_spacing: float = 0.02,
                 probe_max_points: int = 2048):
        for name, v in (("num_envs", num_envs), ("max_obstacles", max_obstacles), ("num_points", num_points)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name}: expected an int >= 1, got {v!r}")
        if isinstance(probe_max_points, bool) or not isinstance(probe_max_points, int) or probe_max_points < 8:
            raise ValueError(f"probe_max_points: expected an int >= 8, got {probe_max_points!r}")
        if isinstance(probe_spacing, bool) or not isinstance(probe_spacing, (int, float)) or not probe_spacing > 0:
            raise ValueError(f"probe_spacing: expected a number > 0 (metres), got {probe_spacing!r}")
        self.probe_spacing, self.probe_max_points = float(probe_spacing), probe_max_points
        self._probe: dict | None = None
        if dtype not in (torch.float32, torch.float64):
            raise ValueError(f"dtype: expected torch.float32 or torch.float64, got {dtype}")
        # The device its tensors land on ("cuda" -> "cuda:0"), so device checks compare like with like.
        self.device, self.dtype = torch.empty(0, device=device).device, dtype
        self.num_envs, self.max_obstacles = num_envs, max_obstacles
        self.num_points, self.seed = num_points, seed
        self._meshes: list[Mesh] = []
        self._mesh_ids: dict[str, int] = {}
        self._offsets: list[torch.Tensor] = []
        self._obstacles: dict[str, tuple[int, int]] = {}  # name -> (env, slot)
        self._library: MeshLibrary | None = None
        self.version = 0  # bumped whenever a mesh is added (checkers refresh their embeddings)
        self.obstacle_mesh = torch.zeros(num_envs, max_obstacles, dtype=torch.int64, device=self.device)
        self.obstacle_pose = torch.zeros(num_envs, max_obstacles, 7, dtype=dtype, device=self.device)
        self.obstacle_pose[..., 3] = 1
        self.obstacle_enabled = torch.zeros(num_envs, max_obstacles, dtype=torch.bool, device=self.device)
        self._used = np.zeros((num_envs, max_obstacles), dtype=bool)
        # Per-mesh encoder inputs and bounding radii, stacked when a mesh is added.
        self.points = torch.zeros(0, num_points, 3, device=self.device)
        self.normals = torch.zeros(0, num_points, 3, device=self.device)
        self.aabb = torch.zeros(0, 2, 3, device=self.device)
        self.radius = torch.zeros(0, dtype=dtype, device=self.device)
        self._init_sphere_view(cache, tessellation_tol)

    # ---- meshes -------------------------------------------------------------------------------
    def add_mesh(self, name: str, mesh) -> int:
        """Register a shape; returns its id. mesh: a `Mesh`, a `trimesh.Trimesh`, a path trimesh can
        read, or a (vertices (V, 3), faces (F, 3)) pair (numpy or torch; int32 or int64 faces), in
        metres."""
        return self._register(name, mesh)

    def _register(self, name: str, mesh, samples=None, sphere_queryable: bool = True) -> int:
        """add_mesh; samples: (points, normals) (K, 3) in the mesh's given frame to use as the
        learned models' input instead of surface samples (point clouds)."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"name: expected a non-empty string, got {name!r}")
        if name in self._mesh_ids:
            raise ValueError(f"name: a mesh named {name!r} is already registered")
        if isinstance(mesh, (str, Path)):
            mesh = Mesh.from_file(mesh, name=name)
        elif isinstance(mesh, tuple) and len(mesh) == 2:
            mesh = Mesh(mesh[0], mesh[1], name=name)
        elif type(mesh).__module__.startswith("trimesh") and hasattr(mesh, "faces"):
            mesh = Mesh.from_trimesh(mesh, name=name)
        elif not isinstance(mesh, Mesh):
            raise ValueError(f"mesh: expected a Mesh, a trimesh.Trimesh, a file path or (vertices, faces), got "
                             f"{type(mesh).__name__}")
        offset = mesh.aabb_center()
        mesh = mesh.recentered()
        mesh.name = name
        v, f = mesh.vertices.numpy(), mesh.faces.numpy()
        if samples is None:
            pts, nrm, _ = sample_surface_even(v, f, self.num_points, seed=self.seed + len(self._meshes))
        else:
            pts, nrm = samples[0] - offset.numpy().astype(np.float32), samples[1]
        box = mesh.bounds()
        if samples is not None:  # a completed view reaches past the visible points' mesh: box both
            pts_t = torch.as_tensor(pts, dtype=box.dtype)
            box = torch.stack([torch.minimum(box[0], pts_t.amin(0)), torch.maximum(box[1], pts_t.amax(0))])
        self.points = torch.cat([self.points, torch.as_tensor(pts, dtype=torch.float32, device=self.device)[None]])
        self.normals = torch.cat([self.normals, torch.as_tensor(nrm, dtype=torch.float32, device=self.device)[None]])
        self.aabb = torch.cat([self.aabb, box.to(device=self.device, dtype=torch.float32)[None]])
        r = mesh.vertices.norm(dim=1).max().to(device=self.device, dtype=self.dtype)
        self.radius = torch.cat([self.radius, r[None]])
        self._mesh_ids[name] = len(self._meshes)
        self._meshes.append(mesh)
        self._offsets.append(offset)
        self._mesh_row.append(self._num_rows if sphere_queryable else -1)
        self._num_rows += int(sphere_queryable)
        self._library = None
        self._store = None
        self._probe = None
        self.version += 1
        return self._mesh_ids[name]

    @property
    def mesh_names(self) -> list[str]:
        return [m.name for m in self._meshes]

    @property
    def meshes(self) -> list[Mesh]:
        """The registered meshes in id order, each in its own frame (re-centred on its AABB)."""
        return list(self._meshes)

    def mesh_offset(self, name: str) -> torch.Tensor:
        """(3,) float64: the AABB centre removed from mesh `name` at registration (its frame origin
        in the coordinates it was given in)."""
        return self._offsets[self._mesh_id(name, "name")].clone()

    @property
    def library(self) -> MeshLibrary:
        """The registered meshes packed (re-centred), built on first use after an `add_mesh`."""
        if not self._meshes:
            raise ValueError("world: no mesh registered; call add_mesh first")
        if self._library is None:
            self._library = MeshLibrary(self._meshes, dtype=self.dtype, device=self.device)
        return self._library

    def _mesh_id(self, name, arg: str) -> int:
        if isinstance(name, str):
            if name not in self._mesh_ids:
                raise ValueError(f"{arg}: unknown mesh {name!r}; registered: {sorted(self._mesh_ids)}")
            return self._mesh_ids[name]
        if isinstance(name, (int, np.integer)) and not isinstance(name, bool):
            if not 0 <= int(name) < len(self._meshes):
                raise ValueError(f"{arg}: mesh id {int(name)} out of range [0, {len(self._meshes)})")
            return int(name)
        raise ValueError(f"{arg}: expected a mesh name or id, got {type(name).__name__}")

    def mesh_ids(self, names, arg: str = "names") -> torch.Tensor:
        """int64 tensor of mesh ids on the world's device, same nesting as `names` (a name, an id,
        nested lists of them, or an integer tensor or numpy array, which is range-checked and passed
        through)."""
        if isinstance(names, np.ndarray) and names.dtype.kind in "iu":
            names = torch.as_tensor(names)
        if isinstance(names, torch.Tensor):
            if names.dtype.is_floating_point or names.dtype.is_complex or names.dtype == torch.bool:
                raise ValueError(f"{arg}: expected integer mesh ids, got dtype {names.dtype}")
            ids = names.to(device=self.device, dtype=torch.int64)
            if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= len(self._meshes)):
                raise ValueError(f"{arg}: mesh ids must lie in [0, {len(self._meshes)}), got "
                                 f"[{int(ids.min())}, {int(ids.max())}]")
            return ids

        def walk(x):
            if isinstance(x, (list, tuple)):
                return [walk(y) for y in x]
            return self._mesh_id(x, arg)

        return torch.as_tensor(walk(names), dtype=torch.int64, device=self.device)

    # ---- obstacles ----------------------------------------------------------------------------
    def add_obstacle(self, name: str, mesh, pose=None, env: int = 0, enabled: bool = True) -> int:
        """Place mesh `mesh` (name or id) at `pose` (7,) in environment `env`, in its first free
        slot; returns the slot. Obstacle names are unique across environments."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"name: expected a non-empty string, got {name!r}")
        if name in self._obstacles:
            raise ValueError(f"name: an obstacle named {name!r} already exists")
        mid = self._mesh_id(mesh, "mesh")
        if self._mesh_row[mid] < 0:
            raise ValueError(f"mesh: {self.mesh_names[mid]!r} is the mesh view of another obstacle; place a "
                             f"mesh registered with add_mesh")
        return self._place(name, mid, pose, env, enabled, "mesh", self._mesh_row[mid])

    def _place(self, name, mesh_id, pose, env, enabled, table, table_id, params=None, kind="mesh") -> int:
        """Take a mesh-view slot (unless mesh_id is None) and a slot of sphere table `table`;
        returns the mesh-view slot (the table's slot for a voxel grid)."""
        env = self._env(env)
        pose = self._pose(pose)  # checked before a slot is taken
        if mesh_id is not None:
            free = np.flatnonzero(~self._used[env])
            if free.size == 0:
                raise ValueError(f"env: environment {env} is full ({self.max_obstacles} obstacles); "
                                 f"make the world with a larger max_obstacles")
        view = self.tables[table]
        view_slot = view.take(env)
        self._views[name] = (table, env, view_slot)
        self._kinds[name] = kind
        view.ids[env, view_slot] = table_id
        if params is not None:
            view.params[env, view_slot] = torch.as_tensor(params, dtype=self.dtype, device=self.device)
        view.pose[env, view_slot] = pose
        if mesh_id is None:
            self.set_enabled(name, enabled)
            return view_slot
        slot = int(free[0])
        self._used[env, slot] = True
        self._obstacles[name] = (env, slot)
        self.obstacle_mesh[env, slot] = mesh_id
        self.obstacle_pose[env, slot] = pose
        self.set_enabled(name, enabled)
        return slot

    def remove_obstacle(self, name: str) -> None:
        """Disable the obstacle and free its slots (no reallocation)."""
        self._known(name)
        if name in self._obstacles:
            env, slot = self._obstacles.pop(name)
            self.obstacle_enabled[env, slot] = False
            self._used[env, slot] = False
        if name in self._views:
            table, env, slot = self._views.pop(name)
            self.tables[table].free(env, slot)
            del self._kinds[name]
            self._count_grid_slots()

    def set_pose(self, name: str, pose=None) -> None:
        """Write obstacle `name`'s pose (7,) in place (identity if None), checked as every pose
        (module docstring)."""
        self._known(name)
        pose = self._pose(pose)
        if name in self._obstacles:
            env, slot = self._obstacles[name]
            self.obstacle_pose[env, slot] = pose
        if name in self._views:
            table, env, slot = self._views[name]
            self.tables[table].pose[env, slot] = pose

    def set_poses(self, names: list[str], poses) -> None:
        """Write many obstacles' poses (len(names), 7) in place with one scatter."""
        if isinstance(names, str):
            raise ValueError("names: expected a list of obstacle names; use set_pose for one")
        for n in names:
            self._known(n)
        poses = checked_poses(poses, "poses", self.dtype, self.device, (len(names), 7))
        rows = [i for i, n in enumerate(names) if n in self._obstacles]
        if rows:
            env = torch.tensor([self._obstacles[names[i]][0] for i in rows], device=self.device)
            slot = torch.tensor([self._obstacles[names[i]][1] for i in rows], device=self.device)
            self.obstacle_pose[env, slot] = poses[rows]
        for table in TABLES:  # one scatter per sphere table
            rows = [i for i, n in enumerate(names) if self._views.get(n, ("",))[0] == table]
            if rows:
                env = torch.tensor([self._views[names[i]][1] for i in rows], device=self.device)
                slot = torch.tensor([self._views[names[i]][2] for i in rows], device=self.device)
                self.tables[table].pose[env, slot] = poses[rows]

    def _pose(self, pose, arg: str = "pose") -> torch.Tensor:
        """The checked pose (7,) in the world's dtype (pose_input.py); None is the identity."""
        return checked_poses(pose, arg, self.dtype, self.device)

    def set_enabled(self, name: str, enabled: bool = True) -> None:
        self._known(name)
        if name in self._obstacles:
            env, slot = self._obstacles[name]
            self.obstacle_enabled[env, slot] = bool(enabled)
        if name in self._views:
            table, env, slot = self._views[name]
            self.tables[table].enabled[env, slot] = bool(enabled)

    def enable(self, name: str) -> None:
        self.set_enabled(name, True)

    def disable(self, name: str) -> None:
        self.set_enabled(name, False)

    def obstacle(self, name: str) -> tuple[int, int]:
        """(env, slot) of obstacle `name`."""
        return self._slot(name)

    @property
    def obstacle_names(self) -> list[str]:
        return list(dict.fromkeys([*self._obstacles, *self._kinds]))

    def obstacle_kind(self, name: str) -> str:
        """'cuboid', 'sphere', 'capsule', 'cylinder', 'mesh', 'point_cloud' or 'voxel_grid'."""
        self._known(name)
        return self._kinds.get(name, "mesh")

    def _known(self, name) -> None:
        if name not in self._obstacles and name not in self._views:
            raise ValueError(f"name: unknown obstacle {name!r}; existing: {sorted(self.obstacle_names)}")

    def _slot(self, name) -> tuple[int, int]:
        if name not in self._obstacles:
            raise ValueError(f"name: unknown obstacle {name!r}; existing: {sorted(self._obstacles)}")
        return self._obstacles[name]

    def _env(self, env) -> int:
        if isinstance(env, bool) or not isinstance(env, (int, np.integer)) or not 0 <= env < self.num_envs:
            raise ValueError(f"env: expected an environment index in [0, {self.num_envs}), got {env!r}")
        return int(env)

    # ---- every cuRobo obstacle kind ---------------------------------------------------------
    def _init_sphere_view(self, cache, tessellation_tol) -> None:
        cache = dict(cache or {})
        unknown = set(cache) - set(TABLES)
        if unknown:
            raise ValueError(f"cache: unknown slot families {sorted(unknown)}; expected keys among {TABLES}")
        if isinstance(tessellation_tol, bool) or not isinstance(tessellation_tol, (int, float)) \
                or not tessellation_tol > 0:
            raise ValueError(f"tessellation_tol: expected a number > 0 (metres), got {tessellation_tol!r}")
        self.tessellation_tol = float(tessellation_tol)
        params = {"primitive": NUM_PARAMS, "mesh": 0, "point_cloud": 0, "voxel_grid": 0}
        self.tables = {t: SlotTable(t, self.num_envs, cache.get(t, self.max_obstacles), params[t], self.dtype,
                                    self.device) for t in TABLES}
        self._views: dict[str, tuple[str, int, int]] = {}  # name -> (table, env, slot)
        self._kinds: dict[str, str] = {}
        self._deviation: dict[str, float] = {}  # how far outside the true shape its mesh view may lie
        self._mesh_row: list[int] = []  # mesh id -> row of the sphere queries' triangle store (-1: none)
        self._num_rows = 0
        self._tessellations: dict[tuple, int] = {}  # (kind, params) -> mesh id, shared by equal shapes
        self._clouds: list[tuple[torch.Tensor, float]] = []  # (recentred points, point_radius)
        self._grids: list[VoxelGrid] = []
        self._store: dict | None = None
        self.grid_slots = 0  # see _count_grid_slots

    def _add_primitive(self, name, kind: PrimitiveKind, params, pose, env, enabled) -> int:
        self._new_name(name)
        pose = self._pose(pose)
        if kind == PrimitiveKind.CAPSULE:
            # Segment midpoint into the pose, so the primitive's frame is its mesh view's frame
            # (the AABB centre of a symmetric shape).
            mid = (np.asarray(params[1:4]) + np.asarray(params[4:7])) / 2
            params = [params[0], *(np.asarray(params[1:4]) - mid), *(np.asarray(params[4:7]) - mid)]
            shift = transform_points(pose.double().cpu(), torch.as_tensor(mid)[None])[0]
            pose = torch.cat([shift.to(pose), pose[3:]])
        key = (kind, tuple(float(x) for x in params))
        if key not in self._tessellations:
            v, f, deviation = tessellate(kind, params, self.tessellation_tol)
            mid = self._register(f"_{kind.name.lower()}/{name}", (v, f), sphere_queryable=False)
            # Symmetric tessellations: the recentring removed only rounding.
            assert float(self._offsets[mid].abs().max()) < 1e-9, self._offsets[mid]
            self._tessellations[key] = (mid, deviation)
        mid, self._deviation[name] = self._tessellations[key]
        return self._place(name, mid, pose, env, enabled, "primitive", int(kind), params, kind.name.lower())

    def add_cuboid(self, name: str, dims, pose=None, env: int = 0, enabled: bool = True) -> int:
        """A box of side lengths dims (3,) metres centred at `pose` (cuRobo's Cuboid). Returns
        its mesh-view slot."""
        return self._add_primitive(name, PrimitiveKind.CUBOID, primitive_params(PrimitiveKind.CUBOID, dims=dims),
                                   pose, env, enabled)

    def add_sphere(self, name: str, radius: float, pose=None, env: int = 0, enabled: bool = True) -> int:
        """A ball of `radius` metres centred at `pose` (cuRobo's Sphere)."""
        return self._add_primitive(name, PrimitiveKind.SPHERE,
                                   primitive_params(PrimitiveKind.SPHERE, radius=radius), pose, env, enabled)

    def add_capsule(self, name: str, radius: float, base, tip, pose=None, env: int = 0,
                    enabled: bool = True) -> int:
        """Segment base-tip (points in the capsule's frame) grown by `radius` (cuRobo's Capsule).
        Stored with the segment's midpoint moved into the pose (`describe` shows that form)."""
        return self._add_primitive(name, PrimitiveKind.CAPSULE, primitive_params(
            PrimitiveKind.CAPSULE, radius=radius, base=base, tip=tip), pose, env, enabled)

    def add_cylinder(self, name: str, radius: float, height: float, pose=None, env: int = 0,
                     enabled: bool = True) -> int:
        """A cylinder along its frame's z, centred (cuRobo's Cylinder)."""
        return self._add_primitive(name, PrimitiveKind.CYLINDER, primitive_params(
            PrimitiveKind.CYLINDER, radius=radius, height=height), pose, env, enabled)

    def add_point_cloud(self, name: str, points=None, *, depth=None, intrinsics=None, camera_pose=None,
                        point_radius: float = 0.005, env: int = 0, enabled: bool = True,
                        normal_radius: float | None = None, completion=None) -> int:
        """A cloud from `points` (P, 3) world metres (numpy or torch), or from a depth image (H, W)
        z-depth metres with `intrinsics` (3, 3) and `camera_pose` (7,) [x, y, z, qw, qx, qy, qz] /
        (4, 4) camera-to-world. Each point is a ball of `point_radius` (point_clouds.py). Normals
        for the learned models: open3d over neighbours within normal_radius (default 4 *
        point_radius, at least 1 cm), oriented towards the camera (or, for bare points, away from
        the cloud's centre); they need open3d, the `pointcloud` extra. The obstacle's pose is the
        cloud's AABB centre (set_pose moves it).

        completion: for a depth image of one object, a `ViewCompletion` (or its checkpoint path,
        `contactnet.training.completion`): the learned models then read the view completed with
        its predicted unseen side; the exact kernels always see the visible points only."""
        self._new_name(name)
        if points is not None and depth is not None:
            raise ValueError("points, depth: give one of them, not both")
        if completion is not None and depth is None:
            raise ValueError("completion: completes a depth image's view (normals facing its camera); give depth=")
        if isinstance(point_radius, bool) or not isinstance(point_radius, (int, float)) or not point_radius > 0:
            raise ValueError(f"point_radius: expected a number > 0 (metres), got {point_radius!r}")
        if depth is not None:
            if intrinsics is None or camera_pose is None:
                raise ValueError("intrinsics, camera_pose: a depth image needs both")
            if np.asarray(camera_pose).shape == (7,):
                self._pose(camera_pose, "camera_pose")
            cloud, viewpoint = point_clouds.cloud_from_depth(depth, intrinsics, camera_pose)
        elif points is not None:
            cloud = point_clouds.check_cloud(points)
            viewpoint = None
        else:
            raise ValueError("points: expected (P, 3) points or a depth image (depth=, intrinsics=, camera_pose=)")
        env = self._env(env)
        outward = viewpoint is None  # bare points: normals face away from the centre (a convex guess)
        if outward:
            viewpoint = (cloud.min(0) + cloud.max(0)) / 2
        radius = normal_radius if normal_radius is not None else max(4 * point_radius, 0.01)
        points, normals = point_clouds.encoder_samples(cloud, self.num_points, self.seed + len(self._meshes),
                                                       viewpoint, radius)
        samples = (points, -normals if outward else normals)
        if completion is not None:
            samples = point_clouds.completed_samples(completion, *samples)
        v, f = point_clouds.octahedra(cloud, point_radius)
        mid = self._register(f"_point_cloud/{name}", (v, f), samples=samples, sphere_queryable=False)
        offset = self._offsets[mid]
        self._clouds.append((torch.as_tensor(cloud, dtype=torch.float64) - offset, float(point_radius)))
        self._deviation[name] = (3 ** 0.5 - 1) * point_radius
        pose = torch.cat([offset, torch.tensor([1.0, 0, 0, 0], dtype=torch.float64)])
        return self._place(name, mid, pose, env, enabled, "point_cloud", len(self._clouds) - 1,
                           kind="point_cloud")

    def add_voxel_grid(self, name: str, grid: VoxelGrid, pose=None, env: int = 0, enabled: bool = True) -> int:
        """A signed-distance `VoxelGrid` placed at `pose` (its frame), seen by sphere queries
        (trilinear) and by mesh queries through their probes (module docstring). Returns its
        voxel_grid slot."""
        self._new_name(name)
        if not isinstance(grid, VoxelGrid):
            raise ValueError(f"grid: expected a VoxelGrid, got {type(grid).__name__}")
        pose = self._pose(pose)
        self._grids.append(grid)
        self._store = None
        slot = self._place(name, None, pose, env, enabled, "voxel_grid", len(self._grids) - 1, kind="voxel_grid")
        self._count_grid_slots()
        return slot

    def _new_name(self, name) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"name: expected a non-empty string, got {name!r}")
        if name in self._obstacles or name in self._views:
            raise ValueError(f"name: an obstacle named {name!r} already exists")

    @property
    def sphere_store(self) -> dict:
        """The packed geometry the sphere queries read (rebuilt after a mesh, cloud or grid is
        added): triangles (R, Fmax, 3, 3) + face_valid (R, Fmax) of the meshes registered with
        add_mesh; cloud_points (C, Pmax, 3) + point_valid + point_radius (C,); grid_values (G,
        Xmax, Ymax, Zmax), grid_dims (G, 3), grid_origin (G, 3), grid_voxel (G,). Padding is
        masked; a family without members holds one masked dummy row, so shapes never hit 0."""
        if self._store is None:
            kw = dict(dtype=self.dtype, device=self.device)
            meshes = [m for m, row in zip(self._meshes, self._mesh_row) if row >= 0]
            fmax = max([m.num_faces for m in meshes], default=1)
            tris = torch.zeros(max(len(meshes), 1), fmax, 3, 3, **kw)
            face_valid = torch.zeros(tris.shape[:2], dtype=torch.bool, device=self.device)
            for i, m in enumerate(meshes):
                tris[i, :m.num_faces] = m.triangles.to(**kw)
                face_valid[i, :m.num_faces] = True
            pmax = max([c.shape[0] for c, _ in self._clouds], default=1)
            cloud = torch.zeros(max(len(self._clouds), 1), pmax, 3, **kw)
            point_valid = torch.zeros(cloud.shape[:2], dtype=torch.bool, device=self.device)
            point_radius = torch.zeros(cloud.shape[0], **kw)
            for i, (c, r) in enumerate(self._clouds):
                cloud[i, :c.shape[0]], point_valid[i, :c.shape[0]], point_radius[i] = c.to(**kw), True, r
            dims = torch.tensor([g.shape for g in self._grids] or [[2, 2, 2]], dtype=torch.int64, device=self.device)
            values = torch.zeros(dims.shape[0], *dims.max(0).values.tolist(), **kw)
            for i, g in enumerate(self._grids):
                values[i, :g.shape[0], :g.shape[1], :g.shape[2]] = g.values.to(**kw)
            origin = torch.stack([g.origin.to(**kw) for g in self._grids]) if self._grids else torch.zeros(1, 3, **kw)
            voxel = torch.tensor([g.voxel_size for g in self._grids] or [1.0], **kw)
            self._store = dict(triangles=tris, face_valid=face_valid, cloud_points=cloud, point_valid=point_valid,
                               point_radius=point_radius, grid_values=values, grid_dims=dims, grid_origin=origin,
                               grid_voxel=voxel)
        return self._store

    @property
    def probe_store(self) -> dict:
        """The probes through which every registered mesh sees voxel grids (grid_probe.py), built on
        first use after a mesh is added: points (M, Smax, 3) world dtype in each mesh's frame, valid
        (M, Smax) bool, radius (M,) float64 (every surface point within it of a probe point), spacing
        (M,) float64 (the lattice pitch used, >= probe_spacing); other obstacles' mesh views have an
        empty probe (radius inf)."""
        if self._probe is None:
            if not self._meshes:
                raise ValueError("world: no mesh registered; call add_mesh first")
            # Other obstacles' mesh views (tessellations, cloud octahedra: no sphere-query row) are
            # never query meshes: an empty probe (grid_probe.py).
            empty = (np.zeros((0, 3)), float("inf"), float("inf"))
            probes = [mesh_probe(m.vertices.numpy(), m.faces.numpy(), self.probe_spacing, self.probe_max_points)
                      if row >= 0 else empty for m, row in zip(self._meshes, self._mesh_row)]
            smax = max(1, max(len(p) for p, _, _ in probes))
            points = torch.zeros(len(probes), smax, 3, dtype=self.dtype)
            valid = torch.zeros(len(probes), smax, dtype=torch.bool)
            for i, (p, _, _) in enumerate(probes):
                points[i, :len(p)], valid[i, :len(p)] = torch.as_tensor(p), True
            self._probe = dict(points=points.to(self.device), valid=valid.to(self.device),
                               radius=torch.tensor([r for _, r, _ in probes], dtype=torch.float64),
                               spacing=torch.tensor([s for _, _, s in probes], dtype=torch.float64))
        return self._probe

    def _count_grid_slots(self) -> None:
        """`grid_slots`: 1 + the highest voxel-grid slot in use in any environment, 0 without grids;
        a plain int (host state, read by traced queries without a sync), kept when grids come and go.
        The mesh queries evaluate that many grid slots (grid_probe.py)."""
        used = np.flatnonzero(self.tables["voxel_grid"]._used.any(0))
        self.grid_slots = int(used[-1]) + 1 if used.size else 0

    # ---- inspection and export ------------------------------------------------------------------
    def memory_bytes(self) -> dict[str, int]:
        """Bytes on the device per part: mesh library (+ BVH if built), encoder inputs, mesh-view
        slots, each sphere table, the sphere store (if built)."""
        def size(ts):
            return sum(t.numel() * t.element_size() for t in ts)
        out = {"library": self._library.memory_bytes() if self._library is not None else 0,
               "encoder_inputs": size([self.points, self.normals, self.aabb, self.radius]),
               "mesh_view_slots": size([self.obstacle_mesh, self.obstacle_pose, self.obstacle_enabled])}
        out.update({f"{t}_slots": self.tables[t].memory_bytes() for t in TABLES})
        out["sphere_store"] = size(self._store.values()) if self._store is not None else 0
        out["probe_store"] = size(self._probe.values()) if self._probe is not None else 0
        return out

    def describe(self) -> str:
        """A human-readable listing: environments and slot use per family, every obstacle (kind,
        environment, slots, enabled, pose, size, tessellation deviation), and memory."""
        lines = [f"CollisionWorld: {self.num_envs} environment(s), {self.dtype}, {self.device}, "
                 f"{len(self._meshes)} mesh(es) registered ({self._num_rows} sphere-queryable)"]
        used = [int(self._used[e].sum()) for e in range(self.num_envs)]
        lines.append(f"  mesh-view slots: {used} used of {self.max_obstacles} per environment")
        for t in TABLES:
            per_env = [int(self.tables[t]._used[e].sum()) for e in range(self.num_envs)]
            lines.append(f"  {t} slots: {per_env} used of {self.tables[t].capacity} per environment")
        lines.append(f"  obstacles ({len(self.obstacle_names)}):")
        for name in self.obstacle_names:
            kind = self.obstacle_kind(name)
            where, pose, enabled = [], None, None
            if name in self._obstacles:
                env, slot = self._obstacles[name]
                where.append(f"mesh slot {slot}")
                mesh = self.mesh_names[int(self.obstacle_mesh[env, slot])]
                enabled = bool(self.obstacle_enabled[env, slot])
            if name in self._views:
                table, env, slot = self._views[name]
                where.append(f"{table} slot {slot}")
                pose = self.tables[table].pose[env, slot]
                enabled = bool(self.tables[table].enabled[env, slot])
            if pose is None:
                pose = self.obstacle_pose[env, slot]
            extra = ""
            if kind in ("cuboid", "sphere", "capsule", "cylinder"):
                table, env, slot = self._views[name]
                p = [round(x, 6) for x in self.tables[table].params[env, slot].tolist()]
                extra = f" params {p}, mesh view within {self._deviation[name]:.2g} m"
            elif kind == "mesh":
                extra = f" mesh {mesh!r}"
            elif kind == "point_cloud":
                cloud, r = self._clouds[int(self.tables["point_cloud"].ids[env, self._views[name][2]])]
                extra = f" {cloud.shape[0]} points of radius {r} m"
            elif kind == "voxel_grid":
                grid = self._grids[int(self.tables["voxel_grid"].ids[env, self._views[name][2]])]
                extra = f" {grid.shape} samples of {grid.voxel_size} m"
            pose_s = ", ".join(f"{x:.4g}" for x in pose.tolist())
            lines.append(f"    {name}: {kind}, env {env}, {', '.join(where)}, "
                         f"{'enabled' if enabled else 'disabled'}, pose [{pose_s}]{extra}")
        mem = self.memory_bytes()
        lines.append(f"  memory: {sum(mem.values())} bytes (" + ", ".join(f"{k} {v}" for k, v in mem.items()) + ")")
        return "\n".join(lines)

    def world_mesh(self, env: int = 0, enabled_only: bool = True):
        """One `trimesh.Trimesh` of environment `env` in world coordinates: every obstacle's mesh
        view at its pose (tessellated primitives, octahedra for clouds), and for a voxel grid the
        cubes of its samples with value <= 0."""
        import trimesh

        env = self._env(env)
        parts = []
        for name in self.obstacle_names:
            if name in self._obstacles:
                e, slot = self._obstacles[name]
                if e != env or (enabled_only and not bool(self.obstacle_enabled[e, slot])):
                    continue
                mesh = self._meshes[int(self.obstacle_mesh[e, slot])]
                v = transform_points(self.obstacle_pose[e, slot].double().cpu(), mesh.vertices)
                parts.append(trimesh.Trimesh(v.numpy(), mesh.faces.numpy(), process=False))
            elif self._kinds[name] == "voxel_grid":
                _, e, slot = self._views[name]
                if e != env or (enabled_only and not bool(self.tables["voxel_grid"].enabled[e, slot])):
                    continue
                grid = self._grids[int(self.tables["voxel_grid"].ids[e, slot])]
                inside = torch.nonzero(grid.values.cpu() <= 0).double()
                if inside.shape[0] == 0:
                    continue
                centres = grid.origin.double().cpu() + grid.voxel_size * inside
                centres = transform_points(self.tables["voxel_grid"].pose[e, slot].double().cpu(), centres)
                box = trimesh.creation.box(extents=[grid.voxel_size] * 3)
                v = (centres.numpy()[:, None] + np.asarray(box.vertices)[None]).reshape(-1, 3)
                f = (np.asarray(box.faces)[None] + 8 * np.arange(centres.shape[0])[:, None, None]).reshape(-1, 3)
                parts.append(trimesh.Trimesh(v, f, process=False))
        if not parts:
            raise ValueError(f"env: environment {env} has no {'enabled ' if enabled_only else ''}obstacle to save")
        return trimesh.util.concatenate(parts)

    def save_world_as_mesh(self, path, env: int = 0, enabled_only: bool = True) -> None:
        """Write `world_mesh(env)` to `path` (any format trimesh writes: .obj, .stl, .ply, .glb)."""
        self.world_mesh(env, enabled_only).export(str(path))

    def buffers(self) -> list[torch.Tensor]:
        """The tensors updated in place (for checking that nothing was reallocated)."""
        return [self.obstacle_mesh, self.obstacle_pose, self.obstacle_enabled,
                *(t for table in TABLES for t in self.tables[table].buffers())]

    def __repr__(self) -> str:
        return (f"CollisionWorld({len(self._meshes)} meshes, {len(self._obstacles)} obstacles in "
                f"{self.num_envs} env(s) x {self.max_obstacles} slots, {self.dtype}, {self.device})")

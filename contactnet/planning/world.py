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
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from contactnet.geometry.mesh import Mesh, MeshLibrary
from contactnet.geometry.poses import normalize_poses
from contactnet.geometry.sampling import sample_surface_even

__all__ = ["CollisionWorld"]


class CollisionWorld:
    """Meshes and per-environment obstacles on one device.

    num_envs: E environments; max_obstacles: N slots per environment; dtype: float32/float64 of
    poses and exact queries; num_points: K surface samples (with normals) per mesh, the learned
    models' input (the paper's K = 1500); seed: the sampling seed.
    """

    def __init__(self, num_envs: int = 1, max_obstacles: int = 16, device: torch.device | str = "cpu",
                 dtype: torch.dtype = torch.float32, num_points: int = 1500, seed: int = 0):
        for name, v in (("num_envs", num_envs), ("max_obstacles", max_obstacles), ("num_points", num_points)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name}: expected an int >= 1, got {v!r}")
        if dtype not in (torch.float32, torch.float64):
            raise ValueError(f"dtype: expected torch.float32 or torch.float64, got {dtype}")
        self.device, self.dtype = torch.device(device), dtype
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

    # ---- meshes -------------------------------------------------------------------------------
    def add_mesh(self, name: str, mesh) -> int:
        """Register a shape; returns its id. mesh: a `Mesh`, a path trimesh can read, or a
        (vertices (V, 3), faces (F, 3)) pair, in metres."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"name: expected a non-empty string, got {name!r}")
        if name in self._mesh_ids:
            raise ValueError(f"name: a mesh named {name!r} is already registered")
        if isinstance(mesh, (str, Path)):
            mesh = Mesh.from_file(mesh, name=name)
        elif isinstance(mesh, tuple) and len(mesh) == 2:
            mesh = Mesh(mesh[0], mesh[1], name=name)
        elif not isinstance(mesh, Mesh):
            raise ValueError(f"mesh: expected a Mesh, a file path or (vertices, faces), got {type(mesh).__name__}")
        offset = mesh.aabb_center()
        mesh = mesh.recentered()
        mesh.name = name
        v, f = mesh.vertices.numpy(), mesh.faces.numpy()
        pts, nrm, _ = sample_surface_even(v, f, self.num_points, seed=self.seed + len(self._meshes))
        box = mesh.bounds()
        self.points = torch.cat([self.points, torch.as_tensor(pts, dtype=torch.float32, device=self.device)[None]])
        self.normals = torch.cat([self.normals, torch.as_tensor(nrm, dtype=torch.float32, device=self.device)[None]])
        self.aabb = torch.cat([self.aabb, box.to(device=self.device, dtype=torch.float32)[None]])
        r = mesh.vertices.norm(dim=1).max().to(device=self.device, dtype=self.dtype)
        self.radius = torch.cat([self.radius, r[None]])
        self._mesh_ids[name] = len(self._meshes)
        self._meshes.append(mesh)
        self._offsets.append(offset)
        self._library = None
        self.version += 1
        return self._mesh_ids[name]

    @property
    def mesh_names(self) -> list[str]:
        return [m.name for m in self._meshes]

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
        nested lists of them, or an integer tensor, which is range-checked and passed through)."""
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
        env = self._env(env)
        pose = self._pose(pose)  # checked before a slot is taken
        free = np.flatnonzero(~self._used[env])
        if free.size == 0:
            raise ValueError(f"env: environment {env} is full ({self.max_obstacles} obstacles); "
                             f"make the world with a larger max_obstacles")
        slot = int(free[0])
        self._used[env, slot] = True
        self._obstacles[name] = (env, slot)
        self.obstacle_mesh[env, slot] = mid
        self.obstacle_pose[env, slot] = pose
        self.set_enabled(name, enabled)
        return slot

    def remove_obstacle(self, name: str) -> None:
        """Disable the obstacle and free its slot (no reallocation)."""
        env, slot = self._slot(name)
        self.obstacle_enabled[env, slot] = False
        self._used[env, slot] = False
        del self._obstacles[name]

    def set_pose(self, name: str, pose=None) -> None:
        """Write obstacle `name`'s pose (7,) in place (identity if None); the quaternion is normalised."""
        env, slot = self._slot(name)
        self.obstacle_pose[env, slot] = self._pose(pose)

    def set_poses(self, names: list[str], poses) -> None:
        """Write many obstacles' poses (len(names), 7) in place with one scatter."""
        if isinstance(names, str):
            raise ValueError("names: expected a list of obstacle names; use set_pose for one")
        slots = [self._slot(n) for n in names]
        poses = torch.as_tensor(poses, dtype=self.dtype, device=self.device)
        if poses.shape != (len(slots), 7):
            raise ValueError(f"poses: expected shape ({len(slots)}, 7), got {tuple(poses.shape)}")
        poses = normalize_poses(poses, "poses")
        env = torch.tensor([e for e, _ in slots], device=self.device)
        slot = torch.tensor([k for _, k in slots], device=self.device)
        self.obstacle_pose[env, slot] = poses

    def _pose(self, pose) -> torch.Tensor:
        if pose is None:
            pose = [0, 0, 0, 1, 0, 0, 0]
        pose = torch.as_tensor(pose, dtype=self.dtype, device=self.device)
        if pose.shape != (7,):
            raise ValueError(f"pose: expected shape (7,) [x, y, z, qw, qx, qy, qz], got {tuple(pose.shape)}")
        return normalize_poses(pose, "pose")

    def set_enabled(self, name: str, enabled: bool = True) -> None:
        env, slot = self._slot(name)
        self.obstacle_enabled[env, slot] = bool(enabled)

    def enable(self, name: str) -> None:
        self.set_enabled(name, True)

    def disable(self, name: str) -> None:
        self.set_enabled(name, False)

    def obstacle(self, name: str) -> tuple[int, int]:
        """(env, slot) of obstacle `name`."""
        return self._slot(name)

    @property
    def obstacle_names(self) -> list[str]:
        return list(self._obstacles)

    def _slot(self, name) -> tuple[int, int]:
        if name not in self._obstacles:
            raise ValueError(f"name: unknown obstacle {name!r}; existing: {sorted(self._obstacles)}")
        return self._obstacles[name]

    def _env(self, env) -> int:
        if isinstance(env, bool) or not isinstance(env, (int, np.integer)) or not 0 <= env < self.num_envs:
            raise ValueError(f"env: expected an environment index in [0, {self.num_envs}), got {env!r}")
        return int(env)

    def buffers(self) -> list[torch.Tensor]:
        """The tensors updated in place (for checking that nothing was reallocated)."""
        return [self.obstacle_mesh, self.obstacle_pose, self.obstacle_enabled]

    def __repr__(self) -> str:
        return (f"CollisionWorld({len(self._meshes)} meshes, {len(self._obstacles)} obstacles in "
                f"{self.num_envs} env(s) x {self.max_obstacles} slots, {self.dtype}, {self.device})")

"""Scene description for the stepper: bodies with their meshes, initial state and material.

A `Scene` is one environment. The stepper takes one scene (replicated `num_envs` times) or a list
of scenes (one per environment, any body counts: they are padded).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from contactnet.geometry.mesh import Mesh
from contactnet.geometry.poses import identity_poses, normalize_poses
from contactnet.sim.affine import MassProperties, mass_properties

__all__ = ["Body", "BODY_KINDS", "Scene", "box_mesh"]

BODY_KINDS = ("dynamic", "static", "kinematic")


def box_mesh(extents, name: str = "box") -> Mesh:
    """A closed, outward-oriented box of `extents` (3,) metres centred at the origin (12 faces)."""
    e = 0.5 * np.asarray(extents, dtype=np.float64)
    if e.shape != (3,) or not (e > 0).all():
        raise ValueError(f"extents: expected 3 positive lengths, got {extents!r}")
    corners = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], dtype=np.float64) * e
    faces = np.array([
        [0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5],  # x = -e, x = +e
        [0, 4, 5], [0, 5, 1], [2, 3, 7], [2, 7, 6],  # y = -e, y = +e
        [0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3],  # z = -e, z = +e
    ])  # fmt: skip
    return Mesh(corners, faces, name=name)


@dataclass
class Body:
    """One body of a scene (see `Scene.add_body`)."""

    mesh: Mesh
    pose: torch.Tensor  # (7,) float64
    velocity: torch.Tensor  # (6,) float64 [v, ω]
    kind: str
    mass: MassProperties
    friction: float | None
    trajectory: Callable | None
    name: str


@dataclass
class Scene:
    """One environment: a list of bodies. Build it with `add_body` / `add_ground`."""

    bodies: list[Body] = field(default_factory=list)

    def add_body(self, mesh, pose=None, velocity=None, density: float = 1000.0, mass: float | None = None,
                 friction: float | None = None, kind: str = "dynamic", trajectory: Callable | None = None,
                 name: str | None = None) -> int:
        """Add a body; returns its index in the scene.

        mesh: a `Mesh`, a path trimesh reads, a trimesh.Trimesh or (vertices, faces); its own frame
        is the body frame. pose: (7,) [x, y, z, qw, qx, qy, qz] of that frame (identity by default).
        velocity: (6,) [v, ω] in m/s and rad/s, world frame. density (kg/m³) for closed meshes, or
        mass (kg), required for open meshes (treated as shells, see `mass_properties`).
        friction: this body's μ (None: the stepper's mu); a pair uses √(μ_a μ_b).
        kind: "dynamic"; "static" (never moves); "kinematic" (follows `trajectory(t) -> (7,) pose`
        at simulated time t, pushes other bodies and is not pushed back).
        """
        if kind not in BODY_KINDS:
            raise ValueError(f"kind: expected one of {BODY_KINDS}, got {kind!r}")
        if kind == "kinematic" and not callable(trajectory):
            raise ValueError("trajectory: a kinematic body needs a callable t -> (7,) pose")
        if kind != "kinematic" and trajectory is not None:
            raise ValueError(f"trajectory: only kinematic bodies follow a trajectory (this body is {kind})")
        mesh = _as_mesh(mesh, name)
        name = name if name is not None else mesh.name
        pose = identity_poses(1, dtype=torch.float64)[0] if pose is None else torch.as_tensor(
            pose, dtype=torch.float64)
        if pose.shape != (7,):
            raise ValueError(f"pose: expected shape (7,), got {tuple(pose.shape)}")
        pose = normalize_poses(pose, "pose")
        velocity = torch.zeros(6, dtype=torch.float64) if velocity is None else torch.as_tensor(
            velocity, dtype=torch.float64)
        if velocity.shape != (6,) or not bool(torch.isfinite(velocity).all()):
            raise ValueError(f"velocity: expected a finite (6,) [v, ω], got {velocity!r}")
        if kind != "dynamic" and bool(velocity.any()):
            raise ValueError(f"velocity: a {kind} body's motion comes from its kind, not a velocity")
        for value, label in ((density, "density"), (mass, "mass"), (friction, "friction")):
            if value is not None and not (np.isfinite(value) and value >= (0 if label == "friction" else 1e-300)):
                raise ValueError(f"{label}: expected a finite {'non-negative' if label == 'friction' else 'positive'}"
                                 f" number, got {value!r}")
        v, f = mesh.vertices.numpy(), mesh.faces.numpy()
        if kind == "dynamic" or mass is not None or _encloses_volume(v, f):
            props = mass_properties(v, f, density, mass)
        else:  # a scripted open mesh: its mass only scales how stiffly a kinematic body is held
            props = mass_properties(v, f, density, 1.0)
        self.bodies.append(Body(mesh, pose, velocity, kind, props, friction, trajectory, name))
        return len(self.bodies) - 1

    def add_ground(self, height: float = 0.0, size: float = 2.0, thickness: float = 0.1,
                   friction: float | None = None) -> int:
        """A static box whose top face is the plane z = height (size × size metres)."""
        mesh = box_mesh((size, size, thickness), name="ground")
        return self.add_body(mesh, pose=[0, 0, height - thickness / 2, 1, 0, 0, 0], kind="static",
                             friction=friction, name="ground")

    def __len__(self) -> int:
        return len(self.bodies)


def _encloses_volume(v, f) -> bool:
    try:
        mass_properties(v, f, 1.0, None)
        return True
    except ValueError:
        return False


def _as_mesh(mesh, name) -> Mesh:
    if isinstance(mesh, Mesh):
        return mesh
    if isinstance(mesh, tuple) and len(mesh) == 2:
        return Mesh(mesh[0], mesh[1], name=name)
    if hasattr(mesh, "vertices") and hasattr(mesh, "faces"):
        return Mesh.from_trimesh(mesh, name=name)
    return Mesh.from_file(mesh, name=name)

"""Ready-made scenes that the tests, the benchmark and the notebook share: Hauser's cube stack,
non-convex drops, a ring threaded on a peg and LOCC's bowl-shaking task. Objects come from the
procedural families (`contactnet.data.procedural`), so nothing is downloaded.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import torch

from contactnet.geometry.mesh import Mesh
from contactnet.sim.affine import is_closed
from contactnet.sim.scene import Scene, box_mesh

_REDRAWS, _REDRAW_STRIDE = 8, 100_003  # seeds tried for a closed procedural mesh

__all__ = ["bowl_shake", "cube_stack", "drop_objects", "procedural_mesh", "ring_on_peg", "shake_trajectory"]


def procedural_mesh(family: str, seed: int, size: float) -> Mesh:
    """A watertight object of a procedural family, largest side `size` metres, AABB-centred.

    A rare draw has a zero-area sliver face, which Mesh drops, leaving the surface open (no
    enclosed volume, so no mass from a density): such a draw is replaced by the next one in a fixed
    sequence of seeds, so every seed gives a closed mesh and the good draws are unchanged."""
    from contactnet.data.procedural import make_object

    for attempt in range(_REDRAWS):
        s = seed + attempt * _REDRAW_STRIDE
        v, f = make_object(family, s, (size, size))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a dropped sliver is handled here, not reported
            mesh = Mesh(v, f, name=f"{family}-{s}")
        if is_closed(mesh.faces.numpy()):
            return mesh
    raise RuntimeError(f"procedural_mesh: no closed {family!r} mesh in {_REDRAWS} draws from seed {seed}")


def _yaw(angle: float) -> list[float]:
    return [math.cos(angle / 2), 0.0, 0.0, math.sin(angle / 2)]


def cube_stack(count: int = 10, size: float = 0.05, gap: float = 5e-4, turn_deg: float = 10.0,
               density: float = 1000.0) -> Scene:
    """`count` triangulated cubes stacked on the ground with `gap` between them, each turned
    `turn_deg` about z from the one below (the BLEM paper's stability test).

    The turn keeps corners off corners: exactly aligned cubes meet corner-to-corner, where the
    point–point barrier pushes sideways with a force that grows with the offset, which the smoothed
    static friction (a damper below ε_v) can only slow down, not hold."""
    scene = Scene()
    scene.add_ground()
    cube = box_mesh((size, size, size), name="cube")
    for i in range(count):
        z = size / 2 + gap + i * (size + gap)
        scene.add_body(cube, pose=[0.0, 0.0, z, *_yaw(math.radians(turn_deg) * i)], density=density, name=f"cube{i}")
    return scene


def drop_objects(families=("mug", "bowl", "ring"), seed: int = 0, size: float = 0.08, height: float = 0.02,
                 spacing: float = 0.15) -> Scene:
    """Procedural objects side by side, `height` metres above the ground, tilted at random, to be
    dropped and left to settle."""
    rng = np.random.default_rng(seed)
    scene = Scene()
    scene.add_ground()
    for i, family in enumerate(families):
        mesh = procedural_mesh(family, seed * 100 + i, size)
        axis = rng.normal(size=3)
        axis /= np.linalg.norm(axis)
        angle = rng.uniform(0, 0.5)
        quat = [math.cos(angle / 2), *(math.sin(angle / 2) * axis)]
        r = torch.as_tensor(mesh.vertices).norm(dim=1).max().item()
        x = (i - (len(families) - 1) / 2) * spacing
        scene.add_body(mesh, pose=[x, 0.0, r + height, *quat], name=family)
    return scene


def ring_on_peg(seed: int = 0, ring_size: float = 0.08, peg_height: float = 0.1, peg_width: float = 0.015,
                drop: float = 0.03) -> Scene:
    """A static square peg standing on the ground and a procedural ring (torus) threaded on it,
    `drop` metres below the peg's top and tilted a little: it slides down the peg to the ground."""
    scene = Scene()
    scene.add_ground()
    peg = box_mesh((peg_width, peg_width, peg_height), name="peg")
    scene.add_body(peg, pose=[0.0, 0.0, peg_height / 2 + 1e-3, 1, 0, 0, 0], kind="static", name="peg")
    ring = procedural_mesh("ring", seed, ring_size)
    scene.add_body(ring, pose=[0.004, 0.0, peg_height - drop, *_tilt(0.1)], name="ring")
    return scene


def _tilt(angle: float) -> list[float]:
    return [math.cos(angle / 2), math.sin(angle / 2), 0.0, 0.0]


def shake_trajectory(amplitude: float = 0.01, frequency: float = 2.0, phase: float = 0.0, height: float = 0.0):
    """t ↦ pose of a bowl shaken sinusoidally along x: x = A sin(2πft + φ); vectorised over t."""

    def trajectory(t: torch.Tensor) -> torch.Tensor:
        t = torch.as_tensor(t, dtype=torch.float64)
        pose = torch.zeros(*t.shape, 7, dtype=torch.float64, device=t.device)
        pose[..., 0] = amplitude * torch.sin(2 * math.pi * frequency * t + phase)
        pose[..., 2] = height
        pose[..., 3] = 1.0
        return pose

    return trajectory


BOWL_OBJECT_FAMILIES = ("mug", "ring", "egad_like", "l_bracket", "cup", "hook", "star_prism", "random_union")


def bowl_shake(seed: int = 0, bowl_size: float = 0.22, object_size: float = 0.06, amplitude: float = 0.01,
               frequency: float = 2.0) -> Scene:
    """LOCC's bowl-shaking task (§IV-B): a procedural bowl, kinematic, shaken along x, and two
    procedural objects (families drawn from `seed`) dropped into it from just above its rim."""
    rng = np.random.default_rng(seed)
    scene = Scene()
    bowl = procedural_mesh("bowl", 1000 + seed, bowl_size)
    scene.add_body(bowl, kind="kinematic", trajectory=shake_trajectory(amplitude, frequency), name="bowl")
    top = float(bowl.vertices[:, 2].max())
    families = rng.choice(BOWL_OBJECT_FAMILIES, size=2, replace=False)
    for i, family in enumerate(families):
        mesh = procedural_mesh(str(family), seed * 10 + i, object_size)
        r = float(mesh.vertices.norm(dim=1).max())
        angle = rng.uniform(0, math.pi)
        quat = [math.cos(angle / 2), *(math.sin(angle / 2) * np.array([1.0, 0.0, 0.0]))]
        x = (i - 0.5) * 1.1 * object_size
        scene.add_body(mesh, pose=[x, 0.0, top + r + 0.005, *quat], name=str(family))
    return scene

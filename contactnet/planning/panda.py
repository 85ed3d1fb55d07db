"""The Franka Panda that robosuite's wheel ships (`bullet_data/panda_description`): its URDF with STL
collision meshes, extracted from the wheel's zip without installing robosuite.

    urdf = extract_panda("data/robots")          # data/robots/panda_description/urdf/panda_arm_hand.urdf
    robot = Robot(urdf, world, ignore=PANDA_IGNORE)

The wheel is found as `contactnet.data.robosuite_meshes` finds it (`wheel`, the environment variable
CONTACTNET_ROBOSUITE_WHEEL, a cached wheel under `<cache>`, or `pip download` when `download`). The
package folder is written whole (URDF + collision meshes) so `package://panda_description/...`
resolves from the URDF's ancestors. Visual meshes (.dae) are skipped: only collision is read.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
import zipfile
from pathlib import Path

import numpy as np

from contactnet.data.robosuite_meshes import WHEEL_ENV, locate_wheel, read_mesh

__all__ = ["CLUTTER", "HOUSEHOLD", "PANDA_IGNORE", "PANDA_READY", "PANDA_URDF", "add_clutter", "extract_panda",
           "household_meshes"]

PACKAGE = "robosuite/models/assets/bullet_data/panda_description/"
PANDA_URDF = "panda_description/urdf/panda_arm_hand.urdf"
OBJECTS = "robosuite/models/assets/objects/meshes/"
# Household objects whose STL collision meshes the wheel ships at scale 1 (metres).
HOUSEHOLD = ("bread", "can", "cereal", "milk", "bottle")
# The usual "ready" configuration: 7 arm joints, then the finger joint, open (panda_finger_joint2
# mimics panda_finger_joint1 in the URDF, so it is not in q: see robot.py).
PANDA_READY = (0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785, 0.04)
# Non-adjacent pairs in contact by design: the two fingers touch when the gripper closes on nothing.
# (Every other non-adjacent pair is free at PANDA_READY; over 400 uniform configurations within the
# joint limits the exact backend finds real self-collisions, mostly link5 against link7 and the
# hand when the wrist folds, which must stay checked.)
PANDA_IGNORE = (("panda_leftfinger", "panda_rightfinger"),)


def _wheel(wheel, download: bool, cache: Path) -> Path:
    return locate_wheel(cache, wheel or os.environ.get(WHEEL_ENV), None, download)


def household_meshes(names=HOUSEHOLD, wheel: str | Path | None = None, download: bool = True,
                     cache: str | Path = "data/meshes/robosuite") -> dict:
    """{name: (vertices (V, 3) float64 metres, faces (F, 3) int64)} of robosuite household objects,
    read from `objects/meshes/<name>.stl` in the wheel (found as `extract_panda` finds it, cached
    wheels under `<cache>/.cache`)."""
    path = _wheel(wheel, download, Path(cache))
    with zipfile.ZipFile(path) as archive:
        files = set(archive.namelist())
        out = {}
        for name in names:
            entry = f"{OBJECTS}{name}.stl"
            if entry not in files:
                raise ValueError(f"names: {name!r} has no {entry} in {path.name}")
            out[name] = read_mesh(archive.read(entry), entry)
    return out


# The clutter of the notebook and the benchmark, in front of a Panda at the origin: x, y, yaw of each
# object standing on a table whose top is z = 0 (0.5 x 0.8 m, from x = 0.35).
CLUTTER = {"cereal": (0.52, 0.085, 0.0), "milk": (0.52, -0.075, 0.0), "can": (0.62, 0.02, 0.0),
           "bread": (0.42, 0.06, 0.8), "bottle": (0.45, -0.12, 0.0)}


def add_clutter(world, objects: dict, env: int = 0) -> list[str]:
    """Add the table and the CLUTTER objects (meshes from `household_meshes`) to `world` as obstacles
    of environment `env`; returns the obstacle names (the table first)."""
    import trimesh

    table = trimesh.creation.box(extents=[0.5, 0.8, 0.04])
    names = []
    for name, (x, y, yaw) in {"table": (0.6, 0.0, 0.0), **CLUTTER}.items():
        v, f = (table.vertices, table.faces) if name == "table" else objects[name]
        if name not in world.mesh_names:
            world.add_mesh(name, (v, f))
        # Stand it on the table: its lowest point at z = 0 (the table's top at z = 0 too).
        z = -0.02 if name == "table" else -float(np.min(v[:, 2])) + float(world.mesh_offset(name)[2])
        names.append(f"{name}_{env}")
        world.add_obstacle(names[-1], name, [x, y, z, math.cos(yaw / 2), 0, 0, math.sin(yaw / 2)], env=env)
    return names


def extract_panda(out: str | Path, wheel: str | Path | None = None, download: bool = True,
                  cache: str | Path | None = None) -> Path:
    """Write the Panda's URDF and collision meshes under `out` (once; later calls reuse them) and
    return the URDF's path. cache: where a wheel is looked for / downloaded (default `<out>/.cache`)."""
    out = Path(out)
    urdf = out / PANDA_URDF
    if urdf.is_file():
        return urdf
    path = _wheel(wheel, download, Path(cache) if cache is not None else out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out) as stage, zipfile.ZipFile(path) as archive:
        for name in archive.namelist():
            if name.startswith(PACKAGE) and not name.endswith((".dae", "/")):
                target = Path(stage) / "panda_description" / name[len(PACKAGE):]
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(archive.read(name))
        if not (Path(stage) / PANDA_URDF).is_file():
            raise FileNotFoundError(f"wheel: {path.name} has no {PACKAGE}urdf/panda_arm_hand.urdf")
        if not urdf.is_file():  # another process may have finished first
            shutil.rmtree(out / "panda_description", ignore_errors=True)
            os.replace(Path(stage) / "panda_description", out / "panda_description")
    return urdf

"""Reading a robot's collision geometry from a URDF: each link's `<collision>` elements (meshes,
boxes, cylinders, spheres), with their `<origin>` and mesh `scale`, merged into one triangle soup in
the link's frame, and the joint tree (parent / child links, joint origins), which `robot.py` uses
for the adjacency rule and the swept check's motion bounds, and `<mimic joint= multiplier= offset=>`
(a joint that follows another: value = multiplier * leader + offset; defaults 1 and 0), which
robot.py applies. Forward kinematics itself is pytorch_kinematics' (see robot.py); this module only
reads geometry and topology.

Mesh paths: `package://<pkg>/<rest>` resolves to `package_dirs[<pkg>]/<rest>` when package_dirs
is a mapping {package name: folder}; otherwise to `<dir>/<pkg>/<rest>` for the first of
`package_dirs` (then the URDF file's ancestor folders) that has a folder `<pkg>`, or to
`<dir>/<rest>` when `<dir>` itself is named `<pkg>`; `file://` and relative paths resolve against
the URDF file's folder. Primitives are meshed as the world meshes its primitive obstacles
(`primitives.tessellate`): boxes exactly, cylinders and spheres as polytopes that contain the shape
and lie at most `tessellation_tol` outside it, so the mesh backends never miss a contact of the
true link (they may report one up to that far early).
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from contactnet.planning.primitives import PrimitiveKind, primitive_params, tessellate

__all__ = ["UrdfJoint", "UrdfModel", "load_urdf", "resolve_mesh_path", "rpy_matrix"]


@dataclass
class UrdfJoint:
    name: str
    type: str  # revolute, continuous, prismatic, fixed (others are rejected)
    parent: str
    child: str
    origin: np.ndarray  # (4, 4) float64: child joint frame in the parent link's frame
    axis: np.ndarray  # (3,) float64 unit axis in the joint frame
    mimic: tuple[str, float, float] | None = None  # (leader joint, multiplier, offset): this joint's
    #                                               value is multiplier * leader + offset (URDF <mimic>)


@dataclass
class UrdfModel:
    name: str
    text: str  # the URDF text, handed to pytorch_kinematics for the kinematic chain
    links: list[str]  # every link, in file order
    joints: list[UrdfJoint]
    collision: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    # link -> (vertices (V, 3) float64 metres in the link frame, faces (F, 3) int64), links with
    # at least one <collision> only

    @property
    def parent_of(self) -> dict[str, str]:
        """child link -> parent link."""
        return {j.child: j.parent for j in self.joints}

    @property
    def joint_of(self) -> dict[str, UrdfJoint]:
        """child link -> the joint that moves it."""
        return {j.child: j for j in self.joints}

    @property
    def mimic(self) -> dict[str, tuple[str, float, float]]:
        """mimic joint -> (independent leader, multiplier, offset), chains of mimics composed (a
        joint mimicking a mimic follows the first leader that is not one)."""
        direct = {j.name: j.mimic for j in self.joints if j.mimic is not None}
        out = {}
        for name in direct:
            leader, mult, off = direct[name]
            while leader in direct:  # acyclic: load_urdf refuses cycles
                up, m, o = direct[leader]
                leader, mult, off = up, mult * m, mult * o + off
            out[name] = (leader, mult, off)
        return out


def rpy_matrix(rpy) -> np.ndarray:
    """(3, 3) rotation of URDF roll-pitch-yaw (fixed axes x, y, z: R = Rz(yaw) Ry(pitch) Rx(roll))."""
    r, p, y = (float(v) for v in rpy)
    cr, sr, cp, sp, cy, sy = math.cos(r), math.sin(r), math.cos(p), math.sin(p), math.cos(y), math.sin(y)
    return np.array([[cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
                     [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
                     [-sp, cp * sr, cp * cr]])


def _numbers(text: str | None, n: int, default, where: str) -> np.ndarray:
    if text is None:
        return np.array(default, dtype=np.float64)
    try:
        values = np.array([float(v) for v in text.split()], dtype=np.float64)
    except ValueError:
        raise ValueError(f"urdf: {where}: expected {n} numbers, got {text!r}") from None
    if values.shape != (n,) or not np.isfinite(values).all():
        raise ValueError(f"urdf: {where}: expected {n} finite numbers, got {text!r}")
    return values


def _origin(element: ET.Element | None, where: str) -> np.ndarray:
    t = np.eye(4)
    if element is not None:
        t[:3, :3] = rpy_matrix(_numbers(element.get("rpy"), 3, (0, 0, 0), f"{where} origin rpy"))
        t[:3, 3] = _numbers(element.get("xyz"), 3, (0, 0, 0), f"{where} origin xyz")
    return t


def resolve_mesh_path(filename: str, urdf_dir: Path | None, package_dirs=()) -> Path:
    """The file a URDF mesh `filename` names (see the module docstring); FileNotFoundError if none."""
    if filename.startswith("package://"):
        package, _, rest = filename[len("package://"):].partition("/")
        if isinstance(package_dirs, dict):
            if package not in package_dirs:
                raise FileNotFoundError(f"urdf: mesh {filename!r}: package {package!r} is not in package_dirs "
                                        f"{sorted(package_dirs)}")
            path = Path(package_dirs[package]) / rest
            if not path.is_file():
                raise FileNotFoundError(f"urdf: mesh {filename!r} resolves to {path}, which does not exist")
            return path
        roots = [Path(d) for d in package_dirs]
        if urdf_dir is not None:
            roots += [urdf_dir, *urdf_dir.parents]
        for root in roots:
            for candidate in (root / package / rest, root / rest if root.name == package else None):
                if candidate is not None and candidate.is_file():
                    return candidate
        raise FileNotFoundError(f"urdf: mesh {filename!r}: no folder {package!r} under package_dirs "
                                f"{[str(d) for d in package_dirs]} or the URDF's ancestor folders")
    path = Path(filename[len("file://"):] if filename.startswith("file://") else filename)
    if not path.is_absolute():
        if urdf_dir is None:
            raise FileNotFoundError(f"urdf: mesh {filename!r} is relative but the URDF was given as text; "
                                    f"pass its path instead")
        path = urdf_dir / path
    if not path.is_file():
        raise FileNotFoundError(f"urdf: mesh {filename!r} resolves to {path}, which does not exist")
    return path


def _geometry(geometry: ET.Element, where: str, urdf_dir, package_dirs, tol: float) -> tuple[np.ndarray, np.ndarray]:
    import trimesh

    shapes = [c for c in geometry if isinstance(c.tag, str)]
    if len(shapes) != 1:
        raise ValueError(f"urdf: {where}: expected one shape in <geometry>, got {[c.tag for c in shapes]}")
    shape = shapes[0]
    if shape.tag in ("box", "cylinder", "sphere"):
        try:
            if shape.tag == "box":
                kind = PrimitiveKind.CUBOID
                params = primitive_params(kind, dims=_numbers(shape.get("size"), 3, None, f"{where} box size"))
            elif shape.tag == "cylinder":
                kind = PrimitiveKind.CYLINDER
                params = primitive_params(kind, radius=_numbers(shape.get("radius"), 1, None, f"{where} radius")[0],
                                          height=_numbers(shape.get("length"), 1, None, f"{where} length")[0])
            else:
                kind = PrimitiveKind.SPHERE
                params = primitive_params(kind, radius=_numbers(shape.get("radius"), 1, None, f"{where} radius")[0])
        except ValueError as error:
            raise ValueError(f"urdf: {where}: {error}") from None
        v, f, _ = tessellate(kind, params, tol)
        return np.asarray(v, dtype=np.float64), np.asarray(f, dtype=np.int64)
    if shape.tag == "mesh":
        filename = shape.get("filename")
        if not filename:
            raise ValueError(f"urdf: {where}: <mesh> without a filename")
        tm = trimesh.load(resolve_mesh_path(filename, urdf_dir, package_dirs), force="mesh", process=False)
        scale = _numbers(shape.get("scale"), 3, (1, 1, 1), f"{where} mesh scale")
        tm = trimesh.Trimesh(np.asarray(tm.vertices) * scale, np.asarray(tm.faces), process=False)
        if np.prod(scale) < 0:  # a mirrored mesh: keep the faces' orientation outward
            tm.invert()
    else:
        raise ValueError(f"urdf: {where}: unsupported collision shape <{shape.tag}> "
                         f"(expected box, cylinder, sphere or mesh)")
    return np.asarray(tm.vertices, dtype=np.float64), np.asarray(tm.faces, dtype=np.int64)


def _check_mimic(joints: list[UrdfJoint]) -> None:
    """Every <mimic> names an existing movable joint, and no chain of mimics closes a loop."""
    kinds = {j.name: j.type for j in joints}
    leader_of = {j.name: j.mimic[0] for j in joints if j.mimic is not None}
    for name, leader in leader_of.items():
        if kinds.get(leader, "fixed") == "fixed":
            raise ValueError(f"urdf: joint {name!r} mimics {leader!r}, which is not a movable joint of this "
                             f"robot; movable joints: {[n for n, k in kinds.items() if k != 'fixed']}")
        seen = [name]
        while leader in leader_of:
            if leader in seen:
                raise ValueError(f"urdf: <mimic> joints form a loop: {' -> '.join(seen + [leader])}")
            seen.append(leader)
            leader = leader_of[leader]


def load_urdf(urdf, package_dirs=(), tessellation_tol: float = 1e-3) -> UrdfModel:
    """Parse `urdf` (a file path, or the URDF text itself) into links, joints and per-link collision
    meshes in the link frame. package_dirs: {package: folder}, or folders searched for
    `package://` meshes; tessellation_tol: metres, how far outside a cylinder or sphere its mesh may
    lie (module docstring)."""
    if isinstance(urdf, Path) or (isinstance(urdf, str) and not urdf.lstrip().startswith("<")):
        path = Path(urdf)
        if not path.is_file():
            raise FileNotFoundError(f"urdf: {path} does not exist (pass a URDF file path or its XML text)")
        text, urdf_dir = path.read_text(), path.resolve().parent
    elif isinstance(urdf, str):
        text, urdf_dir = urdf, None
    else:
        raise ValueError(f"urdf: expected a file path or URDF text, got {type(urdf).__name__}")
    root = ET.fromstring(text)
    if root.tag != "robot":
        raise ValueError(f"urdf: expected a <robot> root element, got <{root.tag}>")
    links = [link.get("name") for link in root.findall("link")]
    if len(set(links)) != len(links) or None in links:
        raise ValueError(f"urdf: link names must be present and unique, got {links}")
    joints = []
    for j in root.findall("joint"):
        name, kind = j.get("name"), j.get("type")
        if kind not in ("revolute", "continuous", "prismatic", "fixed"):
            raise ValueError(f"urdf: joint {name!r} has type {kind!r}; supported: revolute, continuous, "
                             f"prismatic, fixed")
        parent, child = j.find("parent"), j.find("child")
        if parent is None or child is None or parent.get("link") not in links or child.get("link") not in links:
            raise ValueError(f"urdf: joint {name!r} must name an existing <parent link> and <child link>")
        axis = _numbers(j.find("axis").get("xyz") if j.find("axis") is not None else None, 3, (1, 0, 0),
                        f"joint {name!r} axis")
        if kind != "fixed":
            if not np.linalg.norm(axis) > 0:
                raise ValueError(f"urdf: joint {name!r} has a zero axis")
            axis = axis / np.linalg.norm(axis)
        mimic = j.find("mimic")
        if mimic is not None:
            if kind == "fixed":
                raise ValueError(f"urdf: joint {name!r} is fixed and cannot <mimic> another joint")
            mimic = (mimic.get("joint"),
                     float(_numbers(mimic.get("multiplier"), 1, (1.0,), f"joint {name!r} mimic multiplier")[0]),
                     float(_numbers(mimic.get("offset"), 1, (0.0,), f"joint {name!r} mimic offset")[0]))
        joints.append(UrdfJoint(name, kind, parent.get("link"), child.get("link"),
                                _origin(j.find("origin"), f"joint {name!r}"), axis, mimic))
    _check_mimic(joints)
    model = UrdfModel(root.get("name", "robot"), text, links, joints)
    for link in root.findall("link"):
        parts = []
        for k, col in enumerate(link.findall("collision")):
            where = f"link {link.get('name')!r} collision {k}"
            geometry = col.find("geometry")
            if geometry is None:
                raise ValueError(f"urdf: {where}: no <geometry>")
            v, f = _geometry(geometry, where, urdf_dir, package_dirs, tessellation_tol)
            t = _origin(col.find("origin"), where)
            parts.append((v @ t[:3, :3].T + t[:3, 3], f))
        if parts:
            counts = np.cumsum([0] + [len(v) for v, _ in parts[:-1]])
            model.collision[link.get("name")] = (np.concatenate([v for v, _ in parts]),
                                                 np.concatenate([f + c for (_, f), c in zip(parts, counts)]))
    return model

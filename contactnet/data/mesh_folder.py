"""Real mesh sets read from a local folder: GSO (`*/meshes/model.obj`), YCB
(`*/google_16k/textured.obj`), EGAD, or any folder of .obj/.stl/.ply/.glb files. Nothing is ever
downloaded. Each mesh is validated and cleaned by `contactnet.geometry.Mesh` (degenerate faces
dropped with a warning), optionally scaled, and centred on its AABB centre; a manifest records
what was loaded and what was skipped, and why."""

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from contactnet.geometry.mesh import Mesh

# Layouts tried in order; the first that matches anything wins, else every mesh file is taken.
KNOWN_LAYOUTS = {"gso": "*/meshes/model.obj", "ycb": "*/google_16k/textured.obj"}
MESH_SUFFIXES = (".obj", ".stl", ".ply", ".glb", ".gltf", ".off")


@dataclass
class LoadedMesh:
    name: str
    path: str
    vertices: np.ndarray  # (V, 3) float64, metres, centred on the AABB centre
    faces: np.ndarray  # (F, 3) int64
    dropped_faces: int = 0


@dataclass
class FolderManifest:
    root: str
    layout: str
    scale: float
    loaded: list[dict] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)


def find_mesh_files(root: Path) -> tuple[str, list[tuple[str, Path]]]:
    """(layout name, [(object name, path)]) for the meshes under `root`, sorted by name."""
    for layout, pattern in KNOWN_LAYOUTS.items():
        hits = sorted(root.glob(pattern))
        if hits:
            return layout, [(p.relative_to(root).parts[0], p) for p in hits]
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix.lower() in MESH_SUFFIXES)
    names = [str(p.relative_to(root).with_suffix("")).replace("/", "__") for p in files]
    return "files", list(zip(names, files))


def load_mesh_folder(root: str | Path, scale: float = 1.0) -> tuple[list[LoadedMesh], FolderManifest]:
    """Load every mesh under `root`, scaled by `scale` and centred on its AABB centre."""
    import trimesh  # heavy: imported where used

    root = Path(root)
    if not root.is_dir():
        raise ValueError(f"root: {root} is not a directory")
    if not (scale > 0 and np.isfinite(scale)):
        raise ValueError(f"scale: expected a positive finite factor, got {scale}")
    layout, files = find_mesh_files(root)
    manifest = FolderManifest(root=str(root), layout=layout, scale=scale)
    meshes = []
    for name, path in files:
        try:
            loaded = trimesh.load(path, force="mesh", process=False)
            mesh = Mesh(np.asarray(loaded.vertices) * scale, np.asarray(loaded.faces), name=name)
        except Exception as exc:  # any unreadable or invalid file is skipped, with its reason
            manifest.skipped.append({"name": name, "path": str(path), "reason": f"{type(exc).__name__}: {exc}"})
            continue
        dropped = len(loaded.faces) - mesh.num_faces
        mesh = mesh.recentered()
        vertices, faces = mesh.vertices.numpy(), mesh.faces.numpy()
        meshes.append(LoadedMesh(name, str(path), vertices, faces, dropped))
        manifest.loaded.append({"name": name, "path": str(path), "vertices": len(vertices),
                                "faces": len(faces), "dropped_faces": dropped})
    if not meshes:
        raise ValueError(f"root: no loadable mesh under {root} ({len(manifest.skipped)} skipped)")
    return meshes, manifest

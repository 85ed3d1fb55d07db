"""Real mesh sets read from a local folder: GSO (`*/meshes/model.obj`), YCB
(`*/google_16k/textured.obj`), EGAD, or any folder of .obj/.stl/.ply/.glb files. Nothing is ever
downloaded. Each mesh is cleaned, optionally scaled, and centred on its AABB centre; a manifest
records what was loaded and what was skipped, and why."""

import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

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


def clean_mesh(vertices: np.ndarray, faces: np.ndarray, name: str) -> tuple[np.ndarray, np.ndarray, int]:
    """Validate and tidy a polygon soup: NaN/Inf vertices or bad face indices raise ValueError
    naming the mesh; degenerate faces (repeated index or zero area) are dropped and counted;
    unreferenced vertices are removed. Watertightness is not required."""
    vertices = np.asarray(vertices, dtype=np.float64)
    faces = np.asarray(faces)
    if vertices.ndim != 2 or vertices.shape[1] != 3 or faces.ndim != 2 or faces.shape[1] != 3:
        raise ValueError(f"mesh {name!r}: expected vertices (V, 3) and faces (F, 3), got "
                         f"{vertices.shape} and {faces.shape}")
    if not np.isfinite(vertices).all():
        raise ValueError(f"mesh {name!r}: vertices contain NaN or Inf")
    if len(faces) and (faces.min() < 0 or faces.max() >= len(vertices)):
        raise ValueError(f"mesh {name!r}: face indices must lie in [0, {len(vertices)}), got "
                         f"[{faces.min()}, {faces.max()}]")
    faces = faces.astype(np.int64)
    tri = vertices[faces]
    area2 = np.linalg.norm(np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0]), axis=1)
    repeated = (faces[:, 0] == faces[:, 1]) | (faces[:, 1] == faces[:, 2]) | (faces[:, 0] == faces[:, 2])
    keep = ~repeated & (area2 > 0)
    dropped = int((~keep).sum())
    faces = faces[keep]
    if len(faces) == 0:
        raise ValueError(f"mesh {name!r}: no non-degenerate faces")
    used, faces = np.unique(faces, return_inverse=True)
    return vertices[used], faces.reshape(-1, 3), dropped


def centre_on_aabb(vertices: np.ndarray) -> np.ndarray:
    lo, hi = vertices.min(0), vertices.max(0)
    return vertices - (lo + hi) / 2


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
            vertices, faces, dropped = clean_mesh(loaded.vertices, loaded.faces, name)
        except Exception as exc:  # any unreadable or invalid file is skipped, with its reason
            manifest.skipped.append({"name": name, "path": str(path), "reason": f"{type(exc).__name__}: {exc}"})
            continue
        if dropped:
            warnings.warn(f"mesh {name!r}: dropped {dropped} degenerate faces", stacklevel=2)
        vertices = centre_on_aabb(vertices * scale)
        meshes.append(LoadedMesh(name, str(path), vertices, faces, dropped))
        manifest.loaded.append({"name": name, "path": str(path), "vertices": len(vertices),
                                "faces": len(faces), "dropped_faces": dropped})
    if not meshes:
        raise ValueError(f"root: no loadable mesh under {root} ({len(manifest.skipped)} skipped)")
    return meshes, manifest

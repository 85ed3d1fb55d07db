"""A real-mesh evaluation set anyone can rebuild: the collision meshes that robosuite's wheel ships.

    python -m contactnet.data.robosuite_meshes --out data/meshes/robosuite            # all of them
    python -m contactnet.data.robosuite_meshes --out /tmp/rs --max-meshes 4           # a handful, for CI
    python -m contactnet.data.robosuite_meshes --out data/meshes/robosuite --wheel robosuite-1.5.2-py3-none-any.whl

Only the wheel's zip is read; robosuite is never installed or imported. The wheel is, in order:
`--wheel PATH` (or the environment variable CONTACTNET_ROBOSUITE_WHEEL), a wheel of the requested
version cached in `<out>/.cache/`, or `pip download robosuite==<version> --no-deps` into that cache
(the only network access, through pip).

Which meshes: the MJCF models under `robosuite/models/assets/` are parsed (default classes,
`childclass`, compiler `meshdir` resolved as MuJoCo does) and a mesh is taken when at least one
`type="mesh"` geom that uses it collides, i.e. does not have contype = conaffinity = 0.
- objects/        household objects, `objects/*.xml` (bread, can, milk, ...)
- robot_links/    arm and body links, `robots/*/robot.xml`
- gripper_links/  gripper and hand links, `grippers/*.xml`
The kind is the mesh's parent folder, hence its family in an object set built from the folder.
Meshes only visual geoms use, or no model uses, are listed in the manifest as skipped, with why.

Units: MuJoCo works in metres and applies a mesh asset's `scale` when it loads the file (the
Robotiq 85 finger STLs are in millimetres with scale 0.001; the lemon is stretched 1.5x along x),
so each mesh is written with its asset's scale applied, in metres, as a binary PLY with duplicate
vertices merged (STL stores each triangle's corners apart). Legacy MuJoCo `.msh` files (the can,
milk, lemon and cereal) are read here too. A mesh used with two scales is written once per scale;
negative scale components (a mirrored copy: Tiago's left arm) count as the positive scale, so a
mirror image is not written twice.

The folder is written atomically: everything goes to a staging folder beside `--out` that is
renamed into place at the end, and `<out>/manifest.json` (the source wheel's name and sha256, the
files written, those skipped and why) marks a finished set. Running again with the set present
does nothing (an error if the request differs from what is there).
"""

import argparse
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
import zipfile
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path, PurePosixPath

import numpy as np

from contactnet.data.storage import write_json_atomic

ROBOSUITE_VERSION = "1.5.2"  # the default: the evaluation set's meshes are those of this release
WHEEL_ENV = "CONTACTNET_ROBOSUITE_WHEEL"
ASSETS = "robosuite/models/assets/"
# kind (output subfolder = object family) -> MJCF models under ASSETS that define it
KINDS = {"objects": "objects/*.xml", "robot_links": "robots/*/robot.xml", "gripper_links": "grippers/*.xml"}
MESH_FILES = (".stl", ".obj", ".msh", ".ply", ".dae")
CACHE = ".cache"
MANIFEST = "manifest.json"
FORMAT = "contactnet.robosuite_meshes/1"


class RobosuiteMeshError(RuntimeError):
    """The wheel cannot be found, fetched or read, or the output folder conflicts with the request."""


@dataclass(frozen=True)
class MeshUse:
    """One `type="mesh"` geom of an MJCF model, with its mesh asset resolved."""

    kind: str
    model: str  # the model's name: the xml's stem, or the robot's folder for robots/*/robot.xml
    xml: str  # zip path of the model
    mesh: str  # the mesh asset's name
    file: str  # zip path of the mesh file
    scale: tuple[float, float, float]
    collision: bool  # contype or conaffinity non-zero


# ---------------------------------------------------------------------------------------------
# MJCF: which mesh files the collision geoms use, at which scale


def _defaults(root: ET.Element) -> dict[str, dict[str, dict[str, str]]]:
    """class -> element tag -> attributes, each class merged over its ancestors ("main" at the top)."""
    classes: dict[str, dict[str, dict[str, str]]] = {}

    def visit(node: ET.Element, inherited: dict[str, dict[str, str]], name: str) -> None:
        own = {tag: dict(attrs) for tag, attrs in inherited.items()}
        for child in node:
            if child.tag != "default":
                own[child.tag] = {**own.get(child.tag, {}), **child.attrib}
        classes[name] = own
        for child in node.findall("default"):
            visit(child, own, child.get("class", "main"))

    for top in root.findall("default"):
        visit(top, {}, top.get("class", "main"))
    return classes


def _floats(text: str, n: int) -> tuple[float, ...]:
    values = tuple(float(v) for v in text.split())
    if len(values) == 1:
        values *= n
    if len(values) != n:
        raise ValueError(f"expected {n} numbers, got {text!r}")
    return values


def mjcf_mesh_uses(xml_text: str | bytes, xml_path: str, kind: str, model: str) -> list[MeshUse]:
    """Every `type="mesh"` geom of one MJCF file (`xml_path`: its path inside the wheel)."""
    root = ET.fromstring(xml_text)
    classes = _defaults(root)
    folder = PurePosixPath(xml_path).parent
    meshdir = ""
    for compiler in root.iter("compiler"):
        meshdir = compiler.get("meshdir", compiler.get("assetdir", meshdir))

    meshes = {}
    for asset in root.iter("asset"):
        for node in asset.findall("mesh"):
            attrs = {**classes.get(node.get("class", "main"), {}).get("mesh", {}), **node.attrib}
            if "file" not in attrs:
                continue  # a mesh given by vertices in the XML: not a file of the wheel
            name = attrs.get("name", PurePosixPath(attrs["file"]).stem)
            file = os.path.normpath(str(folder / meshdir / attrs["file"]))
            meshes[name] = (file, _floats(attrs.get("scale", "1 1 1"), 3))

    uses = []

    def visit(body: ET.Element, childclass: str) -> None:
        childclass = body.get("childclass", childclass)
        for node in body:
            if node.tag == "geom":
                attrs = {**classes.get(node.get("class", childclass), {}).get("geom", {}), **node.attrib}
                if attrs.get("type", "sphere") == "mesh" and attrs.get("mesh") in meshes:
                    file, scale = meshes[attrs["mesh"]]
                    collision = int(attrs.get("contype", 1)) != 0 or int(attrs.get("conaffinity", 1)) != 0
                    uses.append(MeshUse(kind, model, xml_path, attrs["mesh"], file, scale, collision))
            elif node.tag in ("body", "frame"):
                visit(node, childclass)

    for world in root.iter("worldbody"):
        visit(world, "main")
    return uses


def _model_name(kind: str, xml_path: str) -> str:
    path = PurePosixPath(xml_path)
    return path.parent.name if kind == "robot_links" else path.stem


def _matches(relative: str, pattern: str) -> bool:
    parts, wanted = relative.split("/"), pattern.split("/")
    return len(parts) == len(wanted) and all(fnmatch(p, w) for p, w in zip(parts, wanted))


# ---------------------------------------------------------------------------------------------
# Mesh files out of the zip


def read_msh(data: bytes) -> tuple[np.ndarray, np.ndarray]:
    """MuJoCo's legacy binary mesh: int32 counts (vertices, normals, texcoords, faces), then
    float32 vertices (V, 3), normals, texcoords (T, 2), int32 faces (F, 3)."""
    if len(data) < 16:
        raise ValueError("msh: shorter than its 16-byte header")
    nv, nn, nt, nf = (int(n) for n in np.frombuffer(data, "<i4", 4))
    expected = 16 + 12 * nv + 12 * nn + 8 * nt + 12 * nf
    if min(nv, nn, nt, nf) < 0 or len(data) != expected:
        raise ValueError(f"msh: header ({nv}, {nn}, {nt}, {nf}) implies {expected} bytes, the file has {len(data)}")
    vertices = np.frombuffer(data, "<f4", 3 * nv, 16).reshape(nv, 3).astype(np.float64)
    faces = np.frombuffer(data, "<i4", 3 * nf, 16 + 12 * nv + 12 * nn + 8 * nt).reshape(nf, 3).astype(np.int64)
    if nf == 0:
        raise ValueError("msh: no faces (MuJoCo would take the convex hull of the vertices)")
    return vertices, faces


def read_mesh(data: bytes, name: str) -> tuple[np.ndarray, np.ndarray]:
    """(vertices (V, 3) float64, faces (F, 3) int64) of a mesh file's bytes, in the file's units."""
    import trimesh  # heavy: imported where used

    suffix = PurePosixPath(name).suffix.lower()
    if suffix == ".msh":
        return read_msh(data)
    loaded = trimesh.load(io.BytesIO(data), file_type=suffix[1:], force="mesh", process=False)
    if len(loaded.faces) == 0:
        raise ValueError("no faces")
    return np.asarray(loaded.vertices, np.float64), np.asarray(loaded.faces, np.int64)


def sha256_file(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# ---------------------------------------------------------------------------------------------
# The wheel


def wheel_version(path: str | Path) -> str:
    """robosuite-1.5.1-py3-none-any.whl -> 1.5.1 (the wheel file-name convention)."""
    match = re.match(r"robosuite-([^-]+)-", Path(path).name)
    if not match:
        raise RobosuiteMeshError(f"wheel: {path} is not named like a robosuite wheel (robosuite-<version>-*.whl)")
    return match.group(1)


def pip_download(version: str, cache: Path) -> Path:
    """`pip download robosuite==<version> --no-deps` into `cache`; the wheel's path."""
    cache.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=cache, prefix=".pip-"))
    command = [sys.executable, "-m", "pip", "download", f"robosuite=={version}", "--no-deps",
               "--only-binary=:all:", "--disable-pip-version-check", "--dest", str(staging)]
    print(f"fetching robosuite=={version} with pip into {cache} (about 150 MB) ...", file=sys.stderr)
    try:
        try:
            result = subprocess.run(command, capture_output=True, text=True)
        except OSError as error:
            raise RobosuiteMeshError(f"pip: cannot run {sys.executable} -m pip ({error})") from error
        if result.returncode != 0:
            if "No module named pip" in result.stderr:
                hint = f"pip is not installed for {sys.executable}"
            else:
                hint = "no network access to the package index, or no such version"
            tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-5:])
            raise RobosuiteMeshError(
                f"pip download robosuite=={version} failed ({hint}). Download the wheel where the "
                f"index is reachable (pip download robosuite=={version} --no-deps) and pass --wheel "
                f"PATH or set {WHEEL_ENV}.\npip said:\n{tail}")
        wheels = sorted(staging.glob("robosuite-*.whl"))
        if not wheels:
            raise RobosuiteMeshError(f"pip download robosuite=={version} produced no wheel in {staging}")
        target = cache / wheels[0].name
        os.replace(wheels[0], target)
        return target
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def locate_wheel(out: Path, wheel: str | Path | None = None, version: str | None = None,
                 download: bool = True) -> Path:
    """The robosuite wheel to read: `wheel` if given, else one of `version` cached in
    `<out>/.cache/`, else (when `download`) fetched there by pip."""
    if wheel is not None:
        wheel = Path(wheel)
        if not wheel.is_file():
            raise RobosuiteMeshError(f"wheel: {wheel} does not exist or is not a file")
        if version is not None and wheel_version(wheel) != version:
            raise RobosuiteMeshError(f"wheel: {wheel.name} is version {wheel_version(wheel)}, "
                                     f"not the requested {version}")
        return wheel
    version = version or ROBOSUITE_VERSION
    cached = sorted((out / CACHE).glob(f"robosuite-{version}-*.whl"))
    if cached:
        return cached[-1]
    if not download:
        raise RobosuiteMeshError(f"wheel: no robosuite {version} wheel in {out / CACHE} and downloads are off")
    return pip_download(version, out / CACHE)


# ---------------------------------------------------------------------------------------------
# Extraction


def collect_mesh_uses(archive: zipfile.ZipFile) -> list[MeshUse]:
    """Every mesh geom of the kinds' MJCF models in the wheel, sorted by model file."""
    uses = []
    for name in sorted(archive.namelist()):
        if not name.startswith(ASSETS):
            continue
        for kind, pattern in KINDS.items():
            if _matches(name[len(ASSETS):], pattern):
                uses += mjcf_mesh_uses(archive.read(name), name, kind, _model_name(kind, name))
    return uses


def plan(uses: list[MeshUse], files: set[str]) -> tuple[list[dict], list[dict]]:
    """(meshes to write, skipped files with reasons). A (file, scale) is written once, under the
    first model (in file order) whose collision geom uses it."""
    chosen, skipped = {}, {}
    for use in uses:
        # A scale with negative components mirrors or rotates the file's shape (Tiago's left arm):
        # the same shape up to a reflection, written once, unmirrored.
        key = (use.file, tuple(abs(s) for s in use.scale))
        if use.collision and key not in chosen:
            chosen[key] = use
    for use in uses:
        if use.file not in files:
            skipped[use.file] = f"referenced by {use.xml} but missing from the wheel"
        elif not any(key[0] == use.file for key in chosen):
            skipped[use.file] = f"visual-only: every geom using it has contype = conaffinity = 0 ({use.xml})"
    kept = {key for key in chosen if key[0] in files}
    used = {use.file for use in uses}
    for folder in {PurePosixPath(u.xml).parent for u in uses}:
        prefix = f"{folder}/"
        for name in files:
            if name.startswith(prefix) and name not in used:
                skipped.setdefault(name, "not used by any mesh geom of the robosuite models read")

    per_model = {}
    for key in kept:
        per_model.setdefault((chosen[key].kind, chosen[key].model), []).append(key)
    todo, names = [], set()
    for key in sorted(kept, key=lambda k: (chosen[k].kind, chosen[k].model, chosen[k].mesh, k)):
        use = chosen[key]
        single = use.kind == "objects" and len(per_model[(use.kind, use.model)]) == 1
        stem = use.model if single else f"{use.model}-{use.mesh}"
        stem = re.sub(r"[^A-Za-z0-9_.-]", "_", stem)
        while f"{use.kind}/{stem}" in names:  # the same mesh at two scales
            stem += "_"
        names.add(f"{use.kind}/{stem}")
        todo.append({"path": f"{use.kind}/{stem}.ply", "kind": use.kind, "model": use.model, "mesh": use.mesh,
                     "source": use.file, "xml": use.xml, "scale": list(key[1])})
    return todo, [{"source": name, "reason": reason} for name, reason in sorted(skipped.items())]


def _round_robin(todo: list[dict], n: int | None) -> tuple[list[dict], list[dict]]:
    """The first `n` meshes taking each kind in turn (a handful still covers every kind)."""
    if n is None:
        return todo, []
    queues = {}
    for entry in todo:
        queues.setdefault(entry["kind"], []).append(entry)
    picked = []
    while len(picked) < n and any(queues.values()):
        for queue in queues.values():
            if queue and len(picked) < n:
                picked.append(queue.pop(0))
    chosen = {id(e) for e in picked}
    return [e for e in todo if id(e) in chosen], [e for e in todo if id(e) not in chosen]


def _write_mesh(archive: zipfile.ZipFile, entry: dict, root: Path) -> dict:
    import trimesh

    vertices, faces = read_mesh(archive.read(entry["source"]), entry["source"])
    if not np.isfinite(vertices).all():
        raise ValueError("non-finite vertex coordinates")
    if faces.min() < 0 or faces.max() >= len(vertices):
        raise ValueError("face indices out of range")
    # process=True merges coincident vertices only; nothing else about the surface changes
    mesh = trimesh.Trimesh(vertices * np.asarray(entry["scale"]), faces, process=True)
    path = root / entry["path"]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(mesh.export(file_type="ply", encoding="binary"))
    extent = np.ptp(mesh.vertices, axis=0)
    return {**entry, "vertices": len(mesh.vertices), "faces": len(mesh.faces),
            "extent_m": [round(float(e), 6) for e in extent], "watertight": bool(mesh.is_watertight),
            "sha256": sha256_file(path)}


def _check_existing(manifest: dict, out: Path, wheel: str | Path | None, version: str | None,
                    max_meshes: int | None) -> None:
    """Raise when the finished set in `out` is not the one requested."""
    have = manifest.get("wheel", {})
    problems = []
    if manifest.get("format") != FORMAT:
        problems.append(f"format {manifest.get('format')!r}, expected {FORMAT!r}")
    if version is not None and have.get("version") != version:
        problems.append(f"robosuite {have.get('version')}, requested {version}")
    if wheel is not None and Path(wheel).is_file() and sha256_file(wheel) != have.get("sha256"):
        problems.append(f"wheel sha256 {have.get('sha256')}, {Path(wheel).name} differs")
    if manifest.get("max_meshes") != max_meshes:
        problems.append(f"max_meshes {manifest.get('max_meshes')}, requested {max_meshes}")
    if problems:
        raise RobosuiteMeshError(f"out: {out} already holds a different set ({'; '.join(problems)}); "
                                 f"remove it or choose another --out")


def extract(out: str | Path, wheel: str | Path | None = None, version: str | None = None,
            max_meshes: int | None = None, download: bool = True) -> dict:
    """Build the mesh folder `out` from a robosuite wheel (see the module docstring); returns
    its manifest. Does nothing but check the request when `out` already holds a finished set."""
    out = Path(out)
    if max_meshes is not None and max_meshes <= 0:
        raise ValueError(f"max_meshes: expected a positive count or None, got {max_meshes}")
    if (out / MANIFEST).is_file():
        manifest = json.loads((out / MANIFEST).read_text())
        _check_existing(manifest, out, wheel, version, max_meshes)
        return manifest
    if out.exists() and not out.is_dir():
        raise RobosuiteMeshError(f"out: {out} exists and is not a folder")
    strays = sorted(p.name for p in out.iterdir() if p.name != CACHE) if out.is_dir() else []
    if strays:
        raise RobosuiteMeshError(f"out: {out} has no {MANIFEST} but holds {strays[:5]}; "
                                 f"not overwriting it (remove it or choose another --out)")

    wheel_path = locate_wheel(out, wheel, version, download)
    found_version = wheel_version(wheel_path)
    try:
        archive = zipfile.ZipFile(wheel_path)
    except (zipfile.BadZipFile, OSError) as error:
        raise RobosuiteMeshError(f"wheel: cannot read {wheel_path} as a zip ({error})") from error
    with archive:
        files = {n for n in archive.namelist() if n.startswith(ASSETS) and n.lower().endswith(MESH_FILES)}
        uses = collect_mesh_uses(archive)
        if not uses:
            raise RobosuiteMeshError(f"wheel: {wheel_path.name} has no MJCF model with mesh geoms under {ASSETS}")
        todo, skipped = plan(uses, files)
        todo, beyond = _round_robin(todo, max_meshes)
        skipped += [{"source": e["source"], "reason": f"beyond --max-meshes {max_meshes}"} for e in beyond]

        for stale in out.parent.glob(f".{out.name}.staging-*"):  # left by an interrupted run
            shutil.rmtree(stale, ignore_errors=True)
        out.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.staging-"))
        staging.chmod(0o755)  # mkdtemp's 0700 would otherwise become the finished folder's
        try:
            written = []
            for entry in todo:
                try:
                    written.append(_write_mesh(archive, entry, staging))
                except Exception as error:  # a broken file is skipped with its reason, like mesh_folder
                    skipped.append({"source": entry["source"], "reason": f"{type(error).__name__}: {error}"})
            if not written:
                raise RobosuiteMeshError(f"wheel: no mesh of {wheel_path.name} could be read ({len(skipped)} skipped)")
            counts = {kind: sum(e["kind"] == kind for e in written) for kind in KINDS}
            manifest = {
                "format": FORMAT,
                "wheel": {"name": wheel_path.name, "version": found_version,
                          "sha256": sha256_file(wheel_path)},
                "max_meshes": max_meshes,
                "units": "metres: each file is its MJCF mesh asset's file with the asset's scale applied",
                "counts": counts,
                "written": written,
                "skipped": sorted(skipped, key=lambda s: s["source"]),
            }
            write_json_atomic(staging / MANIFEST, manifest)
            if (out / CACHE).is_dir():  # the cached wheel moves along with the finished set
                os.replace(out / CACHE, staging / CACHE)
            os.replace(staging, out)  # rename(2) replaces `out` when it is absent or (now) empty
        except BaseException:
            if (staging / CACHE).is_dir() and not (out / CACHE).exists():
                out.mkdir(parents=True, exist_ok=True)
                os.replace(staging / CACHE, out / CACHE)
            shutil.rmtree(staging, ignore_errors=True)
            raise
    return manifest


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description="Extract robosuite's collision meshes into a mesh folder "
                                                 "(objects/, robot_links/, gripper_links/), in metres.")
    parser.add_argument("--out", required=True, help="output folder, e.g. data/meshes/robosuite")
    parser.add_argument("--wheel", default=os.environ.get(WHEEL_ENV),
                        help=f"a robosuite wheel file (default: ${WHEEL_ENV}, else <out>/.cache, else pip download)")
    parser.add_argument("--version", default=None, help=f"robosuite version to fetch (default {ROBOSUITE_VERSION})")
    parser.add_argument("--max-meshes", type=int, default=None, help="only this many meshes, kinds in turn (CI)")
    parser.add_argument("--no-download", action="store_true", help="never call pip; fail if no wheel is found")
    args = parser.parse_args(argv)
    try:
        manifest = extract(args.out, args.wheel, args.version, args.max_meshes, download=not args.no_download)
    except (RobosuiteMeshError, ValueError) as error:
        raise SystemExit(f"error: {error}") from None
    counts = ", ".join(f"{n} {kind}" for kind, n in manifest["counts"].items())
    print(f"{args.out}: {counts} from {manifest['wheel']['name']} ({len(manifest['skipped'])} files skipped)")


if __name__ == "__main__":
    main()

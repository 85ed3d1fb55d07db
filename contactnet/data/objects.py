"""Object sets: the procedural families (built-in default) or a folder of real meshes, turned into
per-object cached files that pair generation and training read.

Layout of a set folder:
    manifest.json         spec, object table (name, family, source, sizes), skipped meshes, versions
    objects/<name>.npz    vertices (V, 3), faces (F, 3), points (K, 3), normals (K, 3), aabb (2, 3)
    partial/              optional cached depth views (contactnet.data.partial_views), read lazily

Each object file is a pure function of (spec, object index) and is written atomically, so an
interrupted build resumes by skipping the objects already on disk. Builds of one folder run one at
a time (a lock in it): when many generation jobs start together, the first builds the set and the
others wait, then find it complete.

After the N objects come N inner copies (ids N..2N-1, `inner_scale`): object i scaled by a factor
drawn in the range, named `<name>@inner`, same family. They are B in nested pairs (test splits and
`nested_fraction` of training: one object inside or just outside another); the known / unknown
object lists never include them.

    python -m contactnet.data.objects --out data/objects/procedural --objects-per-family 8
    python -m contactnet.data.objects --out data/objects/ycb --mesh-folder /data/ycb --scale 1.0
"""

import argparse
import json
import platform
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from contactnet.data.mesh_folder import load_mesh_folder
from contactnet.data.partial_views import PartialViews, load_partial_views
from contactnet.data.procedural import DEFAULT_FAMILIES, FAMILIES, make_object
from contactnet.data.seeds import derive_seed
from contactnet.data.storage import as_json, folder_lock, save_npz_atomic, write_json_atomic
from contactnet.geometry.convex_hulls import ConvexHulls, build_convex_hulls
from contactnet.geometry.sampling import SURFACE_POINTS, sample_surface_even


# The spec's fields that shape a finished set's clouds and inner copies: a set built with others is refused.
CLOUD_FIELDS = ("seed", "num_points", "scale", "inner_scale")


@dataclass
class ObjectSetSpec:
    source: str = "procedural"  # "procedural" or a folder of meshes
    families: list[str] | None = None  # procedural only; None = DEFAULT_FAMILIES
    objects_per_family: int = 8  # procedural only
    seed: int = 0
    num_points: int = SURFACE_POINTS  # K surface samples per object
    scale: float = 1.0  # folder only: the paper also tests 0.7x-2x
    inner_scale: tuple[float, float] | None = (0.2, 0.5)  # scale range of the inner copies; None: none


@dataclass
class ObjectSet:
    """A loaded object set: meshes, point clouds with normals and boxes, indexed by object id."""

    root: Path
    names: list[str]
    families: list[str]
    vertices: list[np.ndarray]
    faces: list[np.ndarray]
    points: np.ndarray  # (N, K, 3)
    normals: np.ndarray  # (N, K, 3)
    aabb: np.ndarray  # (N, 2, 3) min and max corners, object frame
    manifest: dict = field(repr=False, default_factory=dict)
    inner_of: list[int | None] = field(default_factory=list)  # id of the original, for inner copies
    _partial_views: PartialViews | None = field(repr=False, default=None)
    _convex_hulls: ConvexHulls | None = field(repr=False, default=None)
    _completed_views: dict = field(repr=False, default_factory=dict)

    def __len__(self) -> int:
        return len(self.names)

    def partial_views(self, build_missing: bool = True) -> PartialViews:
        """The cached single depth views of the objects (`contactnet.data.partial_views`), read
        on first use (and built then if missing and `build_missing`), shared by every user of the set."""
        if self._partial_views is None:
            self._partial_views = load_partial_views(self.root, build_missing=build_missing)
        return self._partial_views

    def completed_views(self, completion: str | Path) -> PartialViews:
        """`partial_views` with every view completed by the `ViewCompletion` checkpoint at
        `completion` (`contactnet.models.completion`; the same draws every time), computed on
        first use and kept per checkpoint."""
        key = str(Path(completion).resolve())
        if key not in self._completed_views:
            from contactnet.models.completion import complete_views, load_view_completion

            views = self.partial_views()
            points, normals = complete_views(load_view_completion(completion), views.points, views.normals)
            self._completed_views[key] = PartialViews(points, normals, views.eyes)
        return self._completed_views[key]

    def convex_hulls(self) -> ConvexHulls:
        """The objects' convex hulls (`build_convex_hulls`, about a second per 100 objects), built
        on first use and kept; what the hybrid certifies apart."""
        if self._convex_hulls is None:
            self._convex_hulls = build_convex_hulls(self.vertices)
        return self._convex_hulls


def _procedural_sources(spec: ObjectSetSpec):
    families = spec.families or list(DEFAULT_FAMILIES)
    unknown = sorted(set(families) - set(FAMILIES))
    if unknown:
        raise ValueError(f"families: unknown {unknown}; expected names from {sorted(FAMILIES)}")
    if spec.objects_per_family <= 0:
        raise ValueError(f"objects_per_family: expected a positive count, got {spec.objects_per_family}")
    for family in families:
        for i in range(spec.objects_per_family):
            seed = derive_seed(spec.seed, family, i)
            yield f"{family}_{i:03d}", family, f"procedural:{family}:{seed}", lambda f=family, s=seed: make_object(f, s)


def build_object_set(spec: ObjectSetSpec, out_dir: str | Path, progress: bool = True) -> dict:
    """Build (or finish building) the object set of `spec` in `out_dir`; returns the manifest."""
    out_dir = Path(out_dir)
    if spec.num_points <= 0:
        raise ValueError(f"num_points: expected a positive count, got {spec.num_points}")
    if spec.inner_scale is not None and not 0 < spec.inner_scale[0] <= spec.inner_scale[1]:
        raise ValueError(f"inner_scale: expected a range 0 < low <= high (or None), got {spec.inner_scale}")
    with folder_lock(out_dir):
        return _build_object_set(spec, out_dir, progress)


def _build_object_set(spec: ObjectSetSpec, out_dir: Path, progress: bool) -> dict:
    from tqdm import tqdm

    skipped = []
    if spec.source == "procedural":
        sources = list(_procedural_sources(spec))
    else:
        meshes, folder = load_mesh_folder(spec.source, spec.scale)
        skipped = folder.skipped
        sources = [(m.name, Path(m.path).parent.name if folder.layout == "files" else m.name,
                    m.path, lambda m=m: (m.vertices, m.faces)) for m in meshes]

    finished = out_dir / "manifest.json"
    if finished.exists():  # a complete set: the same objects, or a clear error (not ids that point elsewhere)
        stored = json.loads(finished.read_text())
        wanted_spec = as_json(asdict(spec))
        changed = [f"{key} {stored['spec'].get(key)} -> {wanted_spec[key]}" for key in CLOUD_FIELDS
                   if stored["spec"].get(key) != wanted_spec[key]]
        if changed:
            raise ValueError(f"out_dir: {out_dir} holds an object set built with other settings ({', '.join(changed)}); "
                             "delete the data folder or give the data config another name")
        built = [o["name"] for o in stored["objects"] if not o["name"].endswith("@inner")]
        wanted = [name for name, *_ in sources]
        if built != wanted:
            added, dropped = sorted(set(wanted) - set(built)), sorted(set(built) - set(wanted))
            raise ValueError(f"out_dir: {out_dir} holds an object set built with other objects (to add: {added[:6]}, "
                             f"not in the spec: {dropped[:6]}; the default families changed?); delete the data folder "
                             "or give the data config another name")

    table = []
    for index, (name, family, source, make) in enumerate(tqdm(sources, desc="objects", disable=not progress)):
        path = out_dir / "objects" / f"{name}.npz"
        if path.exists():  # finished by an earlier (possibly interrupted) run
            with np.load(path) as cached:
                n_vertices, n_faces, aabb = len(cached["vertices"]), len(cached["faces"]), cached["aabb"]
                if len(cached["points"]) != spec.num_points:  # an interrupted run of another config
                    raise ValueError(f"out_dir: {path} holds {len(cached['points'])} points, the spec asks "
                                     f"num_points {spec.num_points}; delete the data folder or rename the config")
        else:
            vertices, faces = make()
            points, normals, _ = sample_surface_even(vertices, faces, spec.num_points, seed=spec.seed + index)
            aabb = np.stack([vertices.min(0), vertices.max(0)])
            save_npz_atomic(path, vertices=vertices, faces=faces, points=points.astype(np.float32),
                            normals=normals.astype(np.float32), aabb=aabb)
            n_vertices, n_faces = len(vertices), len(faces)
        table.append({"name": name, "family": family, "source": source, "vertices": n_vertices,
                      "faces": n_faces, "extent_m": float((aabb[1] - aabb[0]).max())})
    if spec.inner_scale is not None:
        table += [_inner_copy(spec, out_dir / "objects", i, entry) for i, entry in enumerate(table)]

    manifest = {
        "format": "contactnet.object_set/1",
        "spec": asdict(spec),
        "objects": table,
        "skipped": skipped,
        "versions": {"python": platform.python_version(), "numpy": np.__version__},
    }
    write_json_atomic(out_dir / "manifest.json", manifest)
    return manifest


def _inner_copy(spec: ObjectSetSpec, folder: Path, index: int, entry: dict) -> dict:
    """Write (unless present) the inner copy of object `index`: its mesh and cloud scaled about the
    AABB centre (the frame origin) by a factor drawn from (seed, index); its table entry."""
    lo, hi = spec.inner_scale
    factor = lo + (hi - lo) * np.random.default_rng(derive_seed(spec.seed, "inner", index)).random()
    path = folder / f"{entry['name']}@inner.npz"
    if not path.exists():
        with np.load(folder / f"{entry['name']}.npz") as original:
            save_npz_atomic(path, vertices=original["vertices"] * factor, faces=original["faces"],
                            points=(original["points"] * factor).astype(np.float32), normals=original["normals"],
                            aabb=original["aabb"] * factor)
    return {**entry, "name": f"{entry['name']}@inner", "source": f"{entry['source']}@x{factor:.4f}",
            "extent_m": entry["extent_m"] * factor, "inner_of": index}


def load_object_set(root: str | Path) -> ObjectSet:
    """Load a set written by `build_object_set`."""
    import json

    root = Path(root)
    manifest_path = root / "manifest.json"
    if not manifest_path.exists():
        raise FileNotFoundError(f"root: {root} has no manifest.json; build it with build_object_set")
    manifest = json.loads(manifest_path.read_text())
    names, families, vertices, faces, points, normals, aabb = [], [], [], [], [], [], []
    for entry in manifest["objects"]:
        with np.load(root / "objects" / f"{entry['name']}.npz") as data:
            vertices.append(data["vertices"])
            faces.append(data["faces"])
            points.append(data["points"])
            normals.append(data["normals"])
            aabb.append(data["aabb"])
        names.append(entry["name"])
        families.append(entry["family"])
    return ObjectSet(root, names, families, vertices, faces, np.stack(points), np.stack(normals),
                     np.stack(aabb), manifest, [entry.get("inner_of") for entry in manifest["objects"]])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description="Build an object set (procedural or from a mesh folder).")
    parser.add_argument("--out", required=True, help="output folder, e.g. data/objects/procedural")
    parser.add_argument("--mesh-folder", default=None, help="folder of real meshes (GSO, YCB, EGAD, any)")
    parser.add_argument("--families", nargs="*", default=None, help=f"procedural families {sorted(FAMILIES)}")
    parser.add_argument("--objects-per-family", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--num-points", type=int, default=ObjectSetSpec.num_points)
    parser.add_argument("--scale", type=float, default=1.0)
    args = parser.parse_args(argv)
    spec = ObjectSetSpec(source=args.mesh_folder or "procedural", families=args.families,
                         objects_per_family=args.objects_per_family, seed=args.seed,
                         num_points=args.num_points, scale=args.scale)
    manifest = build_object_set(spec, args.out)
    print(f"{len(manifest['objects'])} objects in {args.out} ({len(manifest['skipped'])} meshes skipped)")


if __name__ == "__main__":
    main()

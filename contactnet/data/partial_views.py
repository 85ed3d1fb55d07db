"""Cached single depth views of every object of an object set, for training and evaluating on
partial point clouds (what one depth camera sees) instead of full surface samples.

Layout, inside the object set's folder:
    partial/manifest.json    settings (views per object, K, seed, ViewSpec) and the object set's spec
    partial/<name>.npz       points (V, K, 3), normals (V, K, 3) float32 (object frame, normals
                             estimated from the points, facing the camera), eyes (V, 3) camera positions

View v of object `name` is `partial_cloud(mesh, K, derive_seed(seed, name, v))`: a pure function
of (settings, name, v). Files are written atomically; a build resumes by skipping finished objects.

    python -m contactnet.data.partial_views --objects data/procedural_small/objects --views 8

`PairGroups(clouds="single_view")` and `partial_prob > 0` read these; when they are missing, the
data module builds them once with the default settings (about 0.15 s per object).
"""

import argparse
import json
import logging
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from contactnet.data.seeds import derive_seed
from contactnet.data.storage import as_json, save_npz_atomic, write_json_atomic
from contactnet.geometry.depth_views import ViewSpec, camera_eyes, render_views

log = logging.getLogger(__name__)

FORMAT = "contactnet.partial_views/1"


@dataclass
class PartialViews:
    """Every object's cached views, indexed like the object set."""

    points: np.ndarray  # (N, V, K, 3) float32, object frame
    normals: np.ndarray  # (N, V, K, 3) float32
    eyes: np.ndarray  # (N, V, 3) camera positions, object frame

    @property
    def views_per_object(self) -> int:
        return self.points.shape[1]


def _object_set_manifest(objects_root: Path) -> dict:
    path = objects_root / "manifest.json"
    if not path.exists():
        raise FileNotFoundError(f"object_set_root: {objects_root} has no manifest.json; build it with "
                                "`python -m contactnet.data.objects`")
    return json.loads(path.read_text())


def build_partial_views(object_set_root: str | Path, views_per_object: int = 8, num_points: int | None = None,
                        seed: int = 0, spec: ViewSpec | None = None, progress: bool = True) -> dict:
    """Render (or finish rendering) `views_per_object` single views of every object of the set in
    `object_set_root` into its `partial/` folder; returns the partial manifest.

    num_points: K points per view (default: the set's own K, so full and partial clouds match).
    """
    from tqdm import tqdm

    root = Path(object_set_root)
    object_set = _object_set_manifest(root)
    num_points = object_set["spec"]["num_points"] if num_points is None else num_points
    if views_per_object <= 0:
        raise ValueError(f"views_per_object: expected a positive count, got {views_per_object}")
    spec = spec or ViewSpec()
    manifest = {"format": FORMAT, "views_per_object": views_per_object, "num_points": num_points, "seed": seed,
                "view_spec": asdict(spec), "object_set_spec": object_set["spec"]}
    path = root / "partial" / "manifest.json"
    if path.exists() and json.loads(path.read_text()) != as_json(manifest):
        raise ValueError(f"object_set_root: {path} records other settings than the ones asked for; pass the "
                         "same settings to resume, or delete the partial/ folder to rebuild")
    write_json_atomic(path, manifest)  # first: a resumed build knows what the finished files hold
    for entry in tqdm(object_set["objects"], desc="partial views", disable=not progress):
        out = root / "partial" / f"{entry['name']}.npz"
        if out.exists():  # finished by an earlier (possibly interrupted) run
            continue
        with np.load(root / "objects" / f"{entry['name']}.npz") as mesh:
            vertices, faces = mesh["vertices"], mesh["faces"]
        points, normals, eyes = [], [], []
        for v in range(views_per_object):
            view_seed = derive_seed(seed, entry["name"], v)
            eye = camera_eyes(vertices, 1, view_seed, spec)
            p, n = render_views(vertices, faces, eye, num_points, view_seed, spec)
            points.append(p)
            normals.append(n)
            eyes.append(eye[0])
        save_npz_atomic(out, points=np.stack(points), normals=np.stack(normals), eyes=np.stack(eyes).astype(np.float32))
    return manifest


def _recorded_settings(manifest: dict) -> dict:
    """build_partial_views' arguments from the manifest it wrote."""
    view_spec = dict(manifest["view_spec"], distance_m=tuple(manifest["view_spec"]["distance_m"]))
    return {"views_per_object": manifest["views_per_object"], "num_points": manifest["num_points"],
            "seed": manifest["seed"], "spec": ViewSpec(**view_spec)}


def load_partial_views(object_set_root: str | Path, build_missing: bool = False) -> PartialViews:
    """Load the views `build_partial_views` wrote for the set in `object_set_root`.

    build_missing: build absent views first (the recorded settings if a build was started, else
    the defaults); otherwise a missing view file is a FileNotFoundError naming the command.
    """
    root = Path(object_set_root)
    object_set = _object_set_manifest(root)
    manifest_path = root / "partial" / "manifest.json"
    names = [entry["name"] for entry in object_set["objects"]]
    missing = [n for n in names if not (root / "partial" / f"{n}.npz").exists()]
    if not manifest_path.exists():  # files without their settings are of no known kind
        missing = names
    if missing and build_missing:
        settings = _recorded_settings(json.loads(manifest_path.read_text())) if manifest_path.exists() else {}
        log.warning("building the missing partial views of %d objects in %s (once; ahead of time: "
                    "python -m contactnet.data.partial_views --objects %s)", len(missing), root / "partial", root)
        build_partial_views(root, progress=False, **settings)
    elif missing:
        raise FileNotFoundError(f"object_set_root: {root / 'partial'} lacks the views of {len(missing)} objects "
                                f"(e.g. {missing[0]}); build them with `python -m contactnet.data.partial_views "
                                f"--objects {root}`")
    if json.loads(manifest_path.read_text())["object_set_spec"] != object_set["spec"]:
        raise ValueError(f"object_set_root: the views in {root / 'partial'} were rendered for another object set "
                         "spec; delete the partial/ folder and build them again")
    points, normals, eyes = [], [], []
    for name in names:
        with np.load(root / "partial" / f"{name}.npz") as data:
            points.append(data["points"])
            normals.append(data["normals"])
            eyes.append(data["eyes"])
    return PartialViews(np.stack(points), np.stack(normals), np.stack(eyes))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description="Render cached single depth views of an object set's objects.")
    parser.add_argument("--objects", required=True, help="object set folder, e.g. data/procedural_small/objects")
    parser.add_argument("--views", type=int, default=8, help="views per object")
    parser.add_argument("--num-points", type=int, default=None, help="K points per view (default: the set's K)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--width", type=int, default=ViewSpec.width)
    parser.add_argument("--height", type=int, default=ViewSpec.height)
    parser.add_argument("--dropout", type=float, default=ViewSpec.dropout)
    args = parser.parse_args(argv)
    spec = ViewSpec(width=args.width, height=args.height, dropout=args.dropout)
    manifest = build_partial_views(args.objects, args.views, args.num_points, args.seed, spec)
    print(f"{manifest['views_per_object']} views x {manifest['num_points']} points per object in "
          f"{Path(args.objects) / 'partial'}")


if __name__ == "__main__":
    main()

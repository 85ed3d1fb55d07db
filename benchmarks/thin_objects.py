"""Flat and thin objects: the learned nets on real shapes flatter than any training family.

Two evaluation sets built from robosuite's collision meshes (`python -m contactnet.data.robosuite_meshes`
first), labelled exactly like robosuite_real (48 object pairs x 20 poses per split):
- `squashed`: 24 of them, seeded, turned into sheets (shortest side 1:30-1:100 of the longest) or
  sticks (both shorter sides so), longest side 8-30 cm;
- `probe`: eleven meshes that break assumptions: a single-sided quad, a 2 mm plate, a 6 mm x 30 cm
  rod, a 4 x 6 mm screw, a 327k-face ellipsoid, a box with duplicate and degenerate faces and
  loose vertices, a robosuite mesh with 15% of its faces removed, and four robosuite objects.
Prints balanced accuracy (TPR / TNR) per split for each checkpoint and writes JSON.

    python -m benchmarks.thin_objects --ckpt make_train=outputs/quickstart/<run>/checkpoints/best.ckpt
"""

import argparse
from pathlib import Path

import numpy as np

from benchmarks.common import print_table, write_json

ROOT = Path(__file__).resolve().parents[1]
SPLITS = ("test_unknown", "boundary_unknown", "nested_unknown")


def squashed_meshes(source: Path, out: Path, count: int = 24, seed: int = 1) -> None:
    import trimesh

    rng = np.random.default_rng(seed)
    meshes = sorted(source.glob("*/*.ply"))
    for n, i in enumerate(rng.choice(len(meshes), min(count, len(meshes)), replace=False)):
        mesh = trimesh.load(meshes[i], force="mesh")
        extent, order = mesh.extents, np.argsort(mesh.extents)
        scale = np.ones(3)
        ratio = rng.uniform(0.01, 0.033)
        kind = "sheets" if n % 2 == 0 else "sticks"
        for axis in order[:1] if kind == "sheets" else order[:2]:
            scale[axis] = extent[order[2]] * ratio / extent[axis]
        size = rng.uniform(0.08, 0.3) / extent[order[2]]
        vertices = (mesh.vertices - mesh.bounds.mean(0)) * scale * size
        (out / kind).mkdir(parents=True, exist_ok=True)
        trimesh.Trimesh(vertices, mesh.faces, process=False).export(out / kind / f"{n:02d}_{meshes[i].name}")


def probe_meshes(source: Path, out: Path, seed: int = 0) -> None:
    import trimesh

    rng = np.random.default_rng(seed)
    odd, plain = out / "odd", out / "plain"
    odd.mkdir(parents=True, exist_ok=True)
    plain.mkdir(parents=True, exist_ok=True)
    objects = sorted((source / "objects").glob("*.ply"))
    holed = trimesh.load(objects[0], force="mesh")
    keep = rng.random(len(holed.faces)) > 0.15
    trimesh.Trimesh(holed.vertices, holed.faces[keep], process=False).export(odd / "open_holes.ply")
    trimesh.creation.box((0.2, 0.2, 0.002)).export(odd / "thin_plate.ply")
    quad = trimesh.Trimesh([[-0.1, -0.1, 0], [0.1, -0.1, 0], [0.1, 0.1, 0], [-0.1, 0.1, 0]], [[0, 1, 2], [0, 2, 3]],
                           process=False)
    quad.export(odd / "flat_quad.ply")
    box = trimesh.creation.box((0.08, 0.05, 0.03))
    vertices = np.vstack([box.vertices, rng.random((5, 3)) * 0.01])  # loose vertices
    faces = np.vstack([box.faces, box.faces[:4], [[0, 0, 1], [2, 3, 3]], [[0, 1, 1]]])  # duplicates, degenerate
    trimesh.Trimesh(vertices, faces, process=False).export(odd / "degenerate_box.ply")
    ellipsoid = trimesh.creation.icosphere(subdivisions=7, radius=0.06)
    ellipsoid.vertices *= [1.0, 0.6, 0.4]
    ellipsoid.export(odd / "dense_ellipsoid.ply")
    trimesh.creation.cylinder(radius=0.002, height=0.006).export(odd / "tiny_screw.ply")
    trimesh.creation.cylinder(radius=0.003, height=0.3).export(odd / "long_rod.ply")
    for path in objects[:4]:
        trimesh.load(path, force="mesh").export(plain / path.name)


def build(name: str, meshes: Path, data_dir: Path, workers: int, pairs: int = 48, poses: int = 20,
          overrides=()) -> Path:
    """The labelled splits of the mesh folder `meshes` under data_dir/name (resumes); overrides:
    more Hydra overrides of the generate config."""
    from hydra import compose, initialize_config_dir

    from contactnet.data.generate import run

    sizes = [f"data.splits.{s}.{k}={v}" for s in SPLITS
             for k, v in (("pairs_per_shard", pairs), ("poses_per_pair", poses))]
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose("generate", overrides=["data=robosuite_real", f"data.name={name}",
                                             f"data.objects.source={meshes}", f"out_dir={data_dir / name}",
                                             f"workers={workers}", "progress=false", *sizes, *overrides])
    run(cfg)
    return data_dir / name


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ckpt", action="append", required=True, help="name=path of a LOCC / Global-OCN checkpoint")
    parser.add_argument("--robosuite", default=str(ROOT / "data/meshes/robosuite"), help="robosuite's mesh folder")
    parser.add_argument("--data-dir", default=str(ROOT / "data/thin_objects"))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--pairs", type=int, default=48, help="object pairs per split")
    parser.add_argument("--poses", type=int, default=20, help="poses per object pair")
    parser.add_argument("--override", action="append", default=[], help="a Hydra override of the generation")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    import torch

    from contactnet.data.objects import load_object_set
    from contactnet.models import load_model
    from contactnet.training.evaluate import predict_split
    from contactnet.training.metrics import collision_report

    source, data_dir = Path(args.robosuite), Path(args.data_dir)
    if not (source / "objects").is_dir():
        raise SystemExit(f"--robosuite: {source} has no objects/; run python -m contactnet.data.robosuite_meshes first")
    roots = {}
    for name, make in (("squashed", squashed_meshes), ("probe", probe_meshes)):
        meshes = data_dir / "meshes" / name
        if not meshes.is_dir():
            make(source, meshes)
        roots[name] = build(name, meshes, data_dir, args.workers, args.pairs, args.poses, args.override)
    rows = []
    for spec in args.ckpt:
        label, path = spec.split("=", 1)
        net = load_model(path, map_location="cpu")
        for name, root in roots.items():
            objects = load_object_set(root / "objects")
            row = {"net": label, "set": name}
            for split in SPLITS:
                s = predict_split(net, root, split, objects=objects)
                r = collision_report(torch.sigmoid(s["logit"]), s["label"], s["signed_distance"])
                row[split] = f"{r['balanced_acc']:.3f} ({r['tpr']:.3f} / {r['tnr']:.3f})"
            rows.append(row)
        del net
        torch.cuda.empty_cache()
    print_table(rows, ["net", "set", *SPLITS])
    write_json("thin_objects", {"rows": rows}, args.out)


if __name__ == "__main__":
    main()

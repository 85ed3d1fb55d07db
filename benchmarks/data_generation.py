"""Labelled pairs per second for distance-manipulated pairs of 1k–5k-triangle procedural objects:
contactnet's pipeline (BVH distance to manipulate, exact collide with winding-number containment,
distance or penetration estimate, barrier) against the same steps done with python-fcl (distance
and collision) plus warp-lang winding numbers (containment), on the same poses, in one run.

    python benchmarks/data_generation.py [--pairs 2000] [--quick] [--out FILE]
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import print_table, write_json  # noqa: E402
from contactnet.data.pairs import PairSpec, label_pairs, sample_pairs  # noqa: E402
from contactnet.data.procedural import FAMILIES, make_object  # noqa: E402
from contactnet.geometry import Mesh, MeshLibrary  # noqa: E402
from contactnet.geometry.poses import pose_to_matrix  # noqa: E402
from tests.data.independent_labeller import FclLabeller  # noqa: E402


def objects_in_range(lo=1000, hi=5000, per_family=1):
    out = []
    for family in FAMILIES:
        for seed in range(40):
            v, f = make_object(family, seed)
            if lo <= len(f) <= hi:
                out.append((family, v, f))
                if sum(o[0] == family for o in out) == per_family:
                    break
    return out


def ours(lib, ids_a, ids_b, spec, seed):
    g = torch.Generator().manual_seed(seed)
    pa, pb, u, s = sample_pairs(lib, ids_a, ids_b, spec, g)
    labels = label_pairs(lib, ids_a, ids_b, pa, pb, u, spec)
    return pa, pb, labels


def with_fcl(labeller, ids_a, ids_b, poses_a, poses_b, sigma_gaps):
    """The same pipeline with python-fcl distance/collide and warp containment."""
    fcl = labeller.fcl
    req = fcl.DistanceRequest(enable_nearest_points=True)
    labels = np.empty(len(ids_a), dtype=bool)
    dist = np.empty(len(ids_a))
    for k in range(len(ids_a)):
        ia, ib = int(ids_a[k]), int(ids_b[k])
        oa, ob = labeller._object(ia, poses_a[k]), labeller._object(ib, poses_b[k])
        res = fcl.DistanceResult()
        d = fcl.distance(oa, ob, req, res)
        u = np.asarray(res.nearest_points[0]) - np.asarray(res.nearest_points[1])
        u = u / max(np.linalg.norm(u), 1e-12)
        moved = poses_b[k].clone()
        moved[:3] += torch.as_tensor((d - sigma_gaps[k]) * u)
        mat = pose_to_matrix(moved.double()).numpy()
        ob.setTransform(fcl.Transform(mat[:3, :3], mat[:3, 3]))
        hit = fcl.collide(oa, ob, fcl.CollisionRequest(), fcl.CollisionResult()) > 0
        hit = hit or labeller.contains(ib, moved, ia, poses_a[k]) or labeller.contains(ia, poses_a[k], ib, moved)
        labels[k] = hit
        dist[k] = 0.0 if hit else fcl.distance(oa, ob, fcl.DistanceRequest(), fcl.DistanceResult())
    return labels, dist


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=2000)
    parser.add_argument("--quick", action="store_true", help="300 pairs")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    n = 300 if args.quick else args.pairs
    objects = objects_in_range()
    lib = MeshLibrary([Mesh(v, f, name=name) for name, v, f in objects], dtype=torch.float64)
    labeller = FclLabeller([v for _, v, _ in objects], [f for _, _, f in objects])
    g = torch.Generator().manual_seed(0)
    ids_a = torch.randint(len(lib), (n,), generator=g)
    ids_b = torch.randint(len(lib), (n,), generator=g)
    spec = PairSpec()
    all_threads = torch.get_num_threads()

    rows = []
    for threads in (1, all_threads):
        torch.set_num_threads(threads)
        start = time.perf_counter()
        _, _, labels = ours(lib, ids_a, ids_b, spec, seed=1)
        rows.append({"labeller": "contactnet", "threads": threads, "pairs": n,
                     "pairs_per_s": n / (time.perf_counter() - start),
                     "positive_rate": float(labels["label"].float().mean())})
    torch.set_num_threads(all_threads)
    # Same initial poses and gaps for the fcl pipeline (its own distance decides the shift).
    g = torch.Generator().manual_seed(1)
    spec_plain = PairSpec(manipulate=False)
    poses_a, poses_b, _, _ = sample_pairs(lib, ids_a, ids_b, spec_plain, g)
    gaps = np.random.default_rng(1).normal(0, spec.sigma, n)
    m = min(n, 300)
    start = time.perf_counter()
    fcl_labels, _ = with_fcl(labeller, ids_a[:m], ids_b[:m], poses_a[:m], poses_b[:m], gaps[:m])
    rows.append({"labeller": "python-fcl + warp", "threads": 1, "pairs": m,
                 "pairs_per_s": m / (time.perf_counter() - start), "positive_rate": float(fcl_labels.mean())})
    per_core = rows[0]["pairs_per_s"] / rows[2]["pairs_per_s"]
    faces = [len(f) for _, _, f in objects]
    print(f"labelled pairs per second; {len(objects)} objects of {min(faces)}-{max(faces)} triangles")
    print_table(rows, ["labeller", "threads", "pairs", "pairs_per_s", "positive_rate"])
    print(f"contactnet vs python-fcl per core: {per_core:.2f}x (target >= 3x); "
          f"1M pairs here: {1e6 / rows[1]['pairs_per_s'] / 3600:.2f} h on {all_threads} threads")
    write_json("data_generation", {"rows": rows, "speedup_per_core": per_core,
                                   "triangles": [min(faces), max(faces)]}, args.out)


if __name__ == "__main__":
    main()

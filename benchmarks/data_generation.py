"""Labelled pairs per second for distance-manipulated pairs of 1k–5k-triangle procedural objects,
against python-fcl (collision, distance) plus warp-lang winding numbers (containment), in one run:

- labelling: the exact collision label of the same final poses (contactnet `mesh_collide` vs fcl
  collide + winding-number containment), agreement counted: the DESIGN's per-core target (>= 3x);
- pipeline: from the same start poses, measure the distance, impose the gap, label, and (ours)
  the signed distance / penetration bound and the barrier (fcl: the distance of free pairs only);
  with a GPU, also our pipeline on it (the library moved to CUDA: what `device=auto` generation runs).

    python -m benchmarks.data_generation [--pairs 2000] [--quick] [--out FILE]
"""

import argparse
import time

import numpy as np
import torch

from benchmarks.common import add_device_option, cuda_only, print_table, write_json
from contactnet.data.pairs import PairSpec, label_pairs, manipulate, start_poses
from contactnet.ops import mesh_collide
from contactnet.data.procedural import DEFAULT_FAMILIES, make_object
from contactnet.geometry import Mesh, MeshLibrary
from contactnet.geometry.poses import pose_to_matrix
from tests.data.independent_labeller import FclLabeller


def objects_in_range(lo=1000, hi=5000, per_family=1):
    out = []
    for family in DEFAULT_FAMILIES:
        for seed in range(40):
            v, f = make_object(family, seed)
            if lo <= len(f) <= hi:
                out.append((family, v, f))
                if sum(o[0] == family for o in out) == per_family:
                    break
    return out


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
    add_device_option(parser)
    args = parser.parse_args()
    gpu_only = cuda_only(args)
    n = 300 if args.quick else args.pairs
    objects = objects_in_range()
    lib = MeshLibrary([Mesh(v, f, name=name) for name, v, f in objects], dtype=torch.float64)
    g = torch.Generator().manual_seed(0)
    ids_a = torch.randint(len(lib), (n,), generator=g)
    ids_b = torch.randint(len(lib), (n,), generator=g)
    spec = PairSpec()
    all_threads = torch.get_num_threads()

    start_a, start_b, gaps = start_poses(lib, ids_a, ids_b, spec, torch.Generator().manual_seed(1))

    rows = []
    for threads in () if gpu_only else (1, all_threads):
        torch.set_num_threads(threads)
        t0 = time.perf_counter()
        poses_b, u, s = manipulate(lib, ids_a, ids_b, start_a, start_b, gaps)
        labels = label_pairs(lib, ids_a, ids_b, start_a, poses_b, u, spec, s)
        rows.append({"stage": "pipeline", "labeller": "contactnet", "threads": threads, "pairs": n,
                     "pairs_per_s": n / (time.perf_counter() - t0),
                     "positive_rate": float(labels["label"].float().mean())})
    if torch.cuda.is_available():
        gpu = lib.to("cuda")
        manipulate(gpu, ids_a[:8], ids_b[:8], start_a[:8], start_b[:8], gaps[:8])  # BVH upload, warm-up
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        poses_b_gpu, u_gpu, s_gpu = manipulate(gpu, ids_a, ids_b, start_a, start_b, gaps)
        gpu_labels = label_pairs(gpu, ids_a, ids_b, start_a, poses_b_gpu, u_gpu, spec, s_gpu)
        torch.cuda.synchronize()
        rows.append({"stage": "pipeline", "labeller": "contactnet cuda", "threads": "gpu", "pairs": n,
                     "pairs_per_s": n / (time.perf_counter() - t0),
                     "positive_rate": float(gpu_labels["label"].float().mean())})
    if gpu_only:
        print_table(rows, ["stage", "labeller", "threads", "pairs", "pairs_per_s", "positive_rate"])
        write_json("data_generation", {"rows": rows}, args.out)
        return
    labeller = FclLabeller([v for _, v, _ in objects], [f for _, _, f in objects])
    m = min(n, 300)
    t0 = time.perf_counter()
    fcl_pipeline, _ = with_fcl(labeller, ids_a[:m], ids_b[:m], start_a[:m], start_b[:m], gaps[:m].numpy())
    rows.append({"stage": "pipeline", "labeller": "python-fcl + warp", "threads": 1, "pairs": m,
                 "pairs_per_s": m / (time.perf_counter() - t0), "positive_rate": float(fcl_pipeline.mean())})

    # Labelling alone, on the same final poses.
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    ours_labels = mesh_collide(lib, ids_a, ids_b, start_a, poses_b)
    rows.append({"stage": "labelling", "labeller": "contactnet", "threads": 1, "pairs": n,
                 "pairs_per_s": n / (time.perf_counter() - t0), "positive_rate": float(ours_labels.float().mean())})
    torch.set_num_threads(all_threads)
    t0 = time.perf_counter()
    fcl_labels = np.array([labeller.label(int(ids_a[k]), int(ids_b[k]), start_a[k], poses_b[k]) for k in range(m)])
    rows.append({"stage": "labelling", "labeller": "python-fcl + warp", "threads": 1, "pairs": m,
                 "pairs_per_s": m / (time.perf_counter() - t0), "positive_rate": float(fcl_labels.mean())})
    disagree = int((ours_labels[:m].numpy() != fcl_labels).sum())

    row = {(r["stage"], r["labeller"], r["threads"]): r["pairs_per_s"] for r in rows}
    label_ratio = row["labelling", "contactnet", 1] / row["labelling", "python-fcl + warp", 1]
    pipeline_ratio = row["pipeline", "contactnet", 1] / row["pipeline", "python-fcl + warp", 1]
    faces = [len(f) for _, _, f in objects]
    print(f"labelled pairs per second; {len(objects)} objects of {min(faces)}-{max(faces)} triangles")
    print_table(rows, ["stage", "labeller", "threads", "pairs", "pairs_per_s", "positive_rate"])
    print(f"labelling per core: contactnet {label_ratio:.2f}x python-fcl + warp (target >= 3x); "
          f"labels differ on {disagree}/{m} pairs")
    print(f"whole pipeline per core: {pipeline_ratio:.2f}x (ours also bisects a penetration bound); "
          f"1M pairs here: {1e6 / row['pipeline', 'contactnet', all_threads] / 3600:.2f} h on {all_threads} threads")
    if ("pipeline", "contactnet cuda", "gpu") in row:
        print(f"GPU pipeline: {row['pipeline', 'contactnet cuda', 'gpu']:.3g} pairs/s, "
              f"{row['pipeline', 'contactnet cuda', 'gpu'] / row['pipeline', 'contactnet', 1]:.1f}x one CPU core")
    write_json("data_generation", {"rows": rows, "labelling_speedup_per_core": label_ratio,
                                   "pipeline_speedup_per_core": pipeline_ratio, "label_disagreements": disagree,
                                   "triangles": [min(faces), max(faces)]}, args.out)

if __name__ == "__main__":
    main()

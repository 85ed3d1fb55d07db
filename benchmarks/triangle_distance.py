"""Triangle–triangle distance throughput: the C++ op (1 thread, all threads, CUDA when present)
against the vectorised pure-torch reference and python-fcl (PQP's exact triangle distance), on the
same random pairs in one run, on two distributions:
  overlapping: both triangles drawn around one point (≈20% intersect, most need every feature test);
  scattered:   10 cm triangles placed uniformly in a 1 m box (mostly apart, as in BVH leaf tests).

    python -m benchmarks.triangle_distance [--pairs 1000000] [--quick] [--device all|cuda] [--out FILE]
"""

import argparse
import itertools

import numpy as np
import torch

import contactnet.ops as ops
from benchmarks.common import add_device_option, best_time, cuda_only, print_table, write_json
from contactnet.ops.reference.primitive_distance import triangle_distance_ref
from tests.ops.primitive_cases import random_triangle_pairs


def fcl_pairs_per_second(a: torch.Tensor, b: torch.Tensor) -> tuple[float, float]:
    """python-fcl distance calls on prebuilt one-triangle BVH models (construction not timed).
    Returns (pairs/s, max |ours - fcl| over the pairs) as a cross-check."""
    import fcl

    faces = np.array([[0, 1, 2]])

    def obj(tri):
        m = fcl.BVHModel()
        m.beginModel(3, 1)
        m.addSubModel(tri.double().numpy(), faces)
        m.endModel()
        return fcl.CollisionObject(m, fcl.Transform())

    objects = [(obj(x), obj(y)) for x, y in zip(a, b)]
    request = fcl.DistanceRequest()
    results = np.empty(len(objects))

    def run():
        for i, (oa, ob) in enumerate(objects):
            results[i] = fcl.distance(oa, ob, request, fcl.DistanceResult())

    seconds = best_time(run, repeats=2, warmup=0)
    ours = ops.triangle_distance(a.double(), b.double()).distance.numpy()
    separated = results > 0
    err = float(np.abs(ours[separated] - results[separated]).max()) if separated.any() else 0.0
    return len(objects) / seconds, err


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=1_000_000)
    parser.add_argument("--quick", action="store_true", help="100k pairs, fewer repeats")
    parser.add_argument("--out", default=None, help="JSON path (default benchmarks/results/)")
    add_device_option(parser)
    args = parser.parse_args()
    gpu_only = cuda_only(args)
    n = 100_000 if args.quick else args.pairs
    n_ref = min(n, 200_000)  # the reference's temporaries need ~2 KB per pair
    n_fcl = min(n, 20_000)  # one Python call per pair

    all_threads = torch.get_num_threads()
    rows = []
    for distribution, dtype in itertools.product(("overlapping", "scattered"), (torch.float32, torch.float64)):
        a, b = random_triangle_pairs(n, 0.1, dtype=dtype, seed=0)
        if distribution == "scattered":
            g = torch.Generator().manual_seed(1)
            a = a + torch.rand(n, 1, 3, generator=g, dtype=dtype)
            b = b + torch.rand(n, 1, 3, generator=g, dtype=dtype)
        row = {"distribution": distribution, "dtype": str(dtype).removeprefix("torch."), "pairs": n}
        if torch.cuda.is_available():
            ag, bg = a.cuda(), b.cuda()
            row["op_cuda"] = n / best_time(lambda: ops.triangle_distance(ag, bg), repeats=10)
        if gpu_only:
            rows.append(row)
            continue
        torch.set_num_threads(1)
        row["op_1thread"] = n / best_time(lambda: ops.triangle_distance(a, b))
        row["ref_1thread"] = n_ref / best_time(lambda: triangle_distance_ref(a[:n_ref], b[:n_ref]), repeats=2)
        torch.set_num_threads(all_threads)
        row["op_all_threads"] = n / best_time(lambda: ops.triangle_distance(a, b))
        row["ref_all_threads"] = n_ref / best_time(lambda: triangle_distance_ref(a[:n_ref], b[:n_ref]), repeats=2)
        if dtype == torch.float64 and distribution == "overlapping":
            torch.set_num_threads(1)
            row["fcl_1thread"], row["max_abs_diff_vs_fcl"] = fcl_pairs_per_second(a[:n_fcl], b[:n_fcl])
            torch.set_num_threads(all_threads)
            row["op_vs_fcl_per_core"] = row["op_1thread"] / row["fcl_1thread"]
        row["op_vs_ref_1thread"] = row["op_1thread"] / row["ref_1thread"]
        row["op_vs_ref_all_threads"] = row["op_all_threads"] / row["ref_all_threads"]
        rows.append(row)

    columns = ["distribution", "dtype", "pairs", "op_1thread", "op_all_threads", "op_cuda", "ref_1thread",
               "ref_all_threads", "fcl_1thread", "op_vs_ref_1thread", "op_vs_ref_all_threads",
               "op_vs_fcl_per_core", "max_abs_diff_vs_fcl"]
    print(f"triangle_distance, pairs per second ({all_threads} threads available)")
    print_table(rows, columns)
    path = write_json("triangle_distance", {"unit": "pairs/s", "rows": rows}, args.out)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()

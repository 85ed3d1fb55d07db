"""IPC barrier kernels against IPC Toolkit (ipctk) in one run, float64, on two jittered sheets
0.4 h apart (tests' `stacked_sheets`, 4n² triangles, d̂ = 0.6 h: every vertex has candidates):

  potential:  energy + per-vertex gradient + PSD-projected Hessian assembled into a sparse matrix
              (ours: barrier_potential, _gradient, _hessian; ipctk: BarrierPotential(), .gradient,
              .hessian(CLAMP)), on each side's own collision set;
  broad:      pairs closer than d̂ (ours: collision_candidates; ipctk: NormalCollisions.build,
              its default broad phase followed by its distance filter);
  ccd_step:   collision-free step fraction for the top sheet moving 0.8 h down through the other
              with ±0.1 h jitter (ours: collision_free_step = swept_candidates + ccd_time_of_impact;
              ipctk: compute_collision_free_stepsize with AdditiveCCD, the same algorithm).

Rates use OUR count for both sides (candidates within d̂, swept CCD pairs), so every ratio is a
time ratio: speedup = ipctk time / our time (> 1: ours faster). ipctk merges duplicate
edge-vertex / vertex-vertex collisions, so it evaluates fewer terms than our candidates (counts
in the JSON); our CPU Hessian likewise evaluates each shared point-edge / point-point feature
once. "1thread" = torch.set_num_threads(1) and ipctk.set_num_threads(1) (ipctk's TBB global
limit); "all" = every core for both. Agreement: relative difference of the energy, the gradient
(‖g − g_ipctk‖ / ‖g_ipctk‖), the Hessian (Frobenius) and the CCD step.

    python -m benchmarks.ipc_barrier [--quick] [--device all|cuda] [--out FILE]
"""

import argparse
import sys
import time
from collections.abc import Callable

import numpy as np
import scipy.sparse.linalg
import torch

from benchmarks.common import add_device_option, cuda_only, print_table, wall_time, write_json
from contactnet.ops import ipc
from tests.ops.ipc_cases import stacked_sheets

# Sheet resolution n → 4n² triangles: 1 024, 10 000, 99 856.
SIZES = (16, 50, 158)
QUICK_SIZES = (16, 50)
MIN_DISTANCE = 0.0


def interleaved_best(fns: dict[str, Callable[[], object]], repeats: int, warmup: int) -> dict[str, float]:
    """Best wall time of each function, alternating between them on every repeat so that load
    from other processes hits all of them alike."""
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(repeats):
        for name, fn in fns.items():
            best[name] = min(best[name], wall_time(fn))
    return best


def set_threads(n: int) -> None:
    import ipctk

    torch.set_num_threads(n)
    ipctk.set_num_threads(n)


def ccd_motion(vertices: torch.Tensor, body: torch.Tensor, n: int) -> torch.Tensor:
    """End positions: ±0.1 h jitter everywhere, the top sheet 0.8 h down (through the bottom one)."""
    h = 1.0 / n
    g = torch.Generator().manual_seed(1)
    d = 0.1 * h * (2 * torch.rand(vertices.shape, generator=g, dtype=vertices.dtype) - 1)
    d[body == 1, 2] -= 0.8 * h
    return (vertices + d).contiguous()


def rel(a, b) -> float:
    return float(abs(a - b) / abs(b))


def scipy_from_torch(m: torch.Tensor):
    idx = m.indices().numpy()
    return scipy.sparse.csr_matrix((m.values().numpy(), (idx[0], idx[1])), shape=tuple(m.shape))


def cuda_tasks(V, V1, F, E, cand, dhat: float, kappa: float) -> dict[str, Callable[[], object]]:
    """Each task of the table on the GPU (inputs copied there once)."""
    Vg, V1g, Fg, Eg = V.cuda(), V1.cuda(), F.cuda(), E.cuda()
    cg = ipc.Candidates(cand.face_vertex.cuda(), cand.edge_edge.cuda())
    return {
        "potential": lambda: (ipc.barrier_potential(Vg, Fg, Eg, cg, dhat, kappa),
                              ipc.barrier_potential_gradient(Vg, Fg, Eg, cg, dhat, kappa),
                              ipc.barrier_potential_hessian(Vg, Fg, Eg, cg, dhat, kappa).matrix),
        "broad": lambda: ipc.collision_candidates(Vg, Fg, Eg, dhat),
        "ccd_step": lambda: ipc.collision_free_step(Vg, V1g, Fg, Eg, MIN_DISTANCE),
    }


def bench_size_cuda(n: int, repeats: int) -> list[dict]:
    """The CUDA rows alone (`--device cuda`): no ipctk, no CPU timings."""
    V, F, E, body, dhat = stacked_sheets(n, seed=0)
    V1 = ccd_motion(V, body, n)
    cand = ipc.collision_candidates(V, F, E, dhat)
    counts = {"potential": (cand.count, "cand/s"), "broad": (cand.count, "s"),
              "ccd_step": (ipc.swept_candidates(V, V1, F, E, MIN_DISTANCE).count, "queries/s")}
    rows = []
    for task, fn in cuda_tasks(V, V1, F, E, cand, dhat, 1.0).items():
        count, unit = counts[task]
        seconds = interleaved_best({"cuda": fn}, max(repeats, 5), 1)["cuda"]
        rows.append({"triangles": F.shape[0], "vertices": V.shape[0], "task": task, "count": count, "unit": unit,
                     "ours_cuda_s": seconds, "ours_cuda": seconds if unit == "s" else count / seconds})
    return rows


def bench_size(n: int, repeats: int, warmup: int, all_threads: int, breakdown: bool) -> list[dict]:
    import ipctk

    V, F, E, body, dhat = stacked_sheets(n, seed=0)
    V1 = ccd_motion(V, body, n)
    kappa = 1.0
    Vn, V1n = np.asfortranarray(V.numpy()), np.asfortranarray(V1.numpy())
    mesh = ipctk.CollisionMesh(Vn, E.numpy().astype(np.int32), F.numpy().astype(np.int32))
    B = ipctk.BarrierPotential(dhat, kappa)
    accd = ipctk.AdditiveCCD()
    clamp = ipctk.PSDProjectionMethod.CLAMP
    set_threads(all_threads)
    cand = ipc.collision_candidates(V, F, E, dhat)
    swept = ipc.swept_candidates(V, V1, F, E, MIN_DISTANCE)
    coll = ipctk.NormalCollisions()
    coll.build(mesh, Vn, dhat)
    base = {"triangles": F.shape[0], "vertices": V.shape[0]}
    out = {}

    last = {}  # the latest CPU results, for the agreement check (no recomputation at 100k)

    def ours_potential(x=V, c=cand, f=F, e=E):
        result = (ipc.barrier_potential(x, f, e, c, dhat, kappa),
                  ipc.barrier_potential_gradient(x, f, e, c, dhat, kappa),
                  ipc.barrier_potential_hessian(x, f, e, c, dhat, kappa).matrix)
        if x.device.type == "cpu":
            last["ours"] = result

    def ipctk_potential():
        last["ipctk"] = B(coll, mesh, Vn), B.gradient(coll, mesh, Vn), B.hessian(coll, mesh, Vn, clamp)

    def ipctk_broad():
        ipctk.NormalCollisions().build(mesh, Vn, dhat)

    def ipctk_ccd():
        return ipctk.compute_collision_free_stepsize(mesh, Vn, V1n, MIN_DISTANCE, None, accd)

    tasks = {
        "potential": (ours_potential, ipctk_potential, cand.count, "cand/s"),
        "broad": (lambda: ipc.collision_candidates(V, F, E, dhat), ipctk_broad, cand.count, "s"),
        "ccd_step": (lambda: ipc.collision_free_step(V, V1, F, E, MIN_DISTANCE), ipctk_ccd, swept.count, "queries/s"),
    }
    for task, (ours, theirs, count, unit) in tasks.items():
        row = {**base, "task": task, "count": count, "unit": unit}
        for label, threads in (("1thread", 1), ("all", all_threads)):
            set_threads(threads)
            t = interleaved_best({"ours": ours, "ipctk": theirs}, repeats, warmup)
            row[f"ours_{label}_s"], row[f"ipctk_{label}_s"] = t["ours"], t["ipctk"]
        set_threads(all_threads)
        if torch.cuda.is_available():
            on_gpu = cuda_tasks(V, V1, F, E, cand, dhat, kappa)[task]
            row["ours_cuda_s"] = interleaved_best({"cuda": on_gpu}, max(repeats, 5), 1)["cuda"]
        for key in ("ours_1thread", "ours_all", "ipctk_1thread", "ipctk_all", "ours_cuda"):
            if f"{key}_s" in row:
                row[key] = row[f"{key}_s"] if unit == "s" else count / row[f"{key}_s"]
        row["speedup_per_core"] = row["ipctk_1thread_s"] / row["ours_1thread_s"]
        row["speedup_all"] = row["ipctk_all_s"] / row["ours_all_s"]
        out[task] = row

    # Agreement with ipctk (each side on its own collision set from its own broad phase).
    (e, g, H), (e_i, g_i, H_i) = last.pop("ours"), last.pop("ipctk")
    pot = out["potential"]
    pot["rel_diff_value"] = rel(float(e), e_i)
    pot["rel_diff_grad"] = float(np.linalg.norm(g.numpy().reshape(-1) - g_i) / np.linalg.norm(g_i))
    pot["rel_diff_hess"] = float(scipy.sparse.linalg.norm(scipy_from_torch(H) - H_i) / scipy.sparse.linalg.norm(H_i))
    del H, H_i
    pot["ipctk_collisions"] = {"fv": len(coll.fv_collisions), "ee": len(coll.ee_collisions),
                               "ev": len(coll.ev_collisions), "vv": len(coll.vv_collisions)}
    pot["our_candidates"] = {"fv": cand.face_vertex.shape[0], "ee": cand.edge_edge.shape[0]}
    step, step_i = float(ipc.collision_free_step(V, V1, F, E, MIN_DISTANCE)), ipctk_ccd()
    ccd = out["ccd_step"]
    ccd["step"], ccd["ipctk_step"] = step, step_i
    ccd["rel_diff_value"] = rel(step, step_i)

    # Extra single-thread figures for the JSON: where the time goes.
    set_threads(1)
    t = interleaved_best({
        "ours_swept_candidates": lambda: ipc.swept_candidates(V, V1, F, E, MIN_DISTANCE),
        "ours_ccd_time_of_impact": lambda: ipc.ccd_time_of_impact(V, V1, F, E, swept, MIN_DISTANCE),
        "ipctk_candidates_build_broad_only": lambda: ipctk.Candidates().build(mesh, Vn, dhat / 2),
        "ipctk_tight_inclusion_step": lambda: ipctk.compute_collision_free_stepsize(mesh, Vn, V1n, MIN_DISTANCE),
    }, 1, 0)
    ccd["breakdown_1thread_s"] = {k: v for k, v in t.items() if k.startswith(("ours_ccd", "ours_swept", "ipctk_tight"))}
    out["broad"]["ipctk_candidates_build_broad_only_1thread_s"] = t["ipctk_candidates_build_broad_only"]
    ccd["ipctk_tight_inclusion_step"] = ipctk.compute_collision_free_stepsize(mesh, Vn, V1n, MIN_DISTANCE)
    if breakdown:
        hess = ipc.barrier_potential_hessian(V, F, E, cand, dhat, kappa, assemble=False)
        pot["breakdown_1thread_s"] = interleaved_best({
            "ours_energy": lambda: ipc.barrier_potential(V, F, E, cand, dhat, kappa),
            "ours_gradient": lambda: ipc.barrier_potential_gradient(V, F, E, cand, dhat, kappa),
            "ours_hessian_blocks_psd": lambda: ipc.barrier_potential_hessian(V, F, E, cand, dhat, kappa, assemble=False),
            "ours_hessian_blocks_no_psd": lambda: ipc.barrier_potential_hessian(V, F, E, cand, dhat, kappa,
                                                                                project_to_psd=False, assemble=False),
            "ours_assemble_hessian": lambda: ipc.assemble_hessian(hess.local, hess.stencils, V.shape[0]),
            "ipctk_energy": lambda: B(coll, mesh, Vn),
            "ipctk_gradient": lambda: B.gradient(coll, mesh, Vn),
            "ipctk_hessian_psd": lambda: B.hessian(coll, mesh, Vn, clamp),
            "ipctk_hessian_no_psd": lambda: B.hessian(coll, mesh, Vn),
        }, repeats, 0)
    set_threads(all_threads)
    return list(out.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1k and 10k triangles only, fewer repeats")
    parser.add_argument("--out", default=None, help="JSON path (default benchmarks/results/)")
    add_device_option(parser)
    args = parser.parse_args()
    sizes = QUICK_SIZES if args.quick else SIZES
    if cuda_only(args):
        rows = [row for n in sizes for row in bench_size_cuda(n, 2 if args.quick else 5)]
        print("IPC barrier kernels on CUDA, float64 (rates count our candidates / CCD pairs)")
        print_table(rows, ["triangles", "task", "count", "unit", "ours_cuda"])
        print(f"wrote {write_json('ipc_barrier', {'dtype': 'float64', 'rows': rows}, args.out)}")
        return
    import ipctk

    all_threads = torch.get_num_threads()
    rows = []
    start = time.perf_counter()
    for n in sizes:
        tris = 4 * n * n
        # The 100k potential takes tens of seconds per call: one untimed-warmup-free call each.
        repeats, warmup = (1, 0) if tris > 50_000 else ((2, 1) if args.quick or tris > 5_000 else (5, 1))
        rows += bench_size(n, repeats, warmup, all_threads, breakdown=tris <= 20_000)
        print(f"  {tris} triangles done ({time.perf_counter() - start:.0f} s)", file=sys.stderr, flush=True)

    columns = ["triangles", "task", "count", "unit", "ours_1thread", "ipctk_1thread", "speedup_per_core",
               "ours_all", "ipctk_all", "speedup_all", "ours_cuda", "rel_diff_value", "rel_diff_grad",
               "rel_diff_hess"]
    if not torch.cuda.is_available():
        columns.remove("ours_cuda")
    print(f"IPC barrier kernels vs ipctk {ipctk.__version__}, float64 ({all_threads} threads available; "
          "rates count our candidates / CCD pairs for both; speedup = ipctk time / our time)")
    print_table(rows, columns)
    path = write_json("ipc_barrier", {"ipctk": ipctk.__version__, "dtype": "float64",
                                      "threads": {"1thread": "torch.set_num_threads(1), ipctk.set_num_threads(1)",
                                                  "all": all_threads},
                                      "rows": rows}, args.out)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()

"""Planner-facing collision queries: queries/s and latency of `CollisionChecker.pairwise` for 1, 64,
4096 and 262144 queries with the learned (LOCC, Global-OCN; embeddings cached) and exact backends,
against a python-fcl loop over the same queries, on one device.

    python -m benchmarks.planning [--ckpt CKPT] [--quick] [--exact-max N] [--threads N] [--out FILE]

A query is one (mesh A, pose A, mesh B, pose B) pair: learned -> collision logit; exact -> the
collision verdict plus the signed distance (exact distance when separated, bisection penetration
estimate when colliding, see contactnet/planning/exact.py); fcl -> `fcl.collide`, plus
`fcl.distance` when free (no containment test and no penetration depth: less work than exact).
A second table times the planner's call, `cost(mesh, poses, env_idx)` plus its gradient, for one
moving mesh against all 8 obstacles of its environment (4 environments).

"grad" columns time the same call plus the backward pass to both query poses (on at most 16384
queries, extrapolated).

Poses: near-contact uniform test pairs (`sample_pairs` with placement "uniform", about half colliding)
over the 15 procedural families, 4096 pairs tiled to the batch size. Speed does not depend on the
weights, so without --ckpt randomly initialised networks of the paper's sizes (M = 6, H = 256,
F = 64) are timed. The exact backend and fcl are timed on at most --exact-max (default 4096) and
1024 queries of the batch respectively (subsampled: per-query cost does not depend on the batch on
the CPU); their rows say how many were timed and report the rate extrapolated to the batch.
"""

import argparse
import time

import numpy as np
import torch

from benchmarks.common import best_time, print_table, write_json
from contactnet.data.pairs import PairSpec, sample_pairs
from contactnet.data.procedural import FAMILIES, make_object
from contactnet.geometry import Mesh, MeshLibrary
from contactnet.geometry.poses import pose_to_matrix
from contactnet.models import LOCC, GlobalOCN, ShapeEncoder
from contactnet.planning import CollisionChecker, CollisionWorld

SIZES = [1, 64, 4096, 262144]
FCL_MAX = 1024
GRAD_MAX = 16384  # "+grad" timing subsamples larger batches (the backward graph of 262144 queries is GBs)


def fcl_loop(models, ids_a, ids_b, poses_a, poses_b):
    """python-fcl over the queries one by one: collide, and distance when free."""
    import fcl

    ma, mb = pose_to_matrix(poses_a.double()).numpy(), pose_to_matrix(poses_b.double()).numpy()
    out = np.empty(len(ids_a))
    for k in range(len(ids_a)):
        oa = fcl.CollisionObject(models[int(ids_a[k])], fcl.Transform(ma[k, :3, :3], ma[k, :3, 3]))
        ob = fcl.CollisionObject(models[int(ids_b[k])], fcl.Transform(mb[k, :3, :3], mb[k, :3, 3]))
        if fcl.collide(oa, ob, fcl.CollisionRequest(), fcl.CollisionResult()) > 0:
            out[k] = 0.0
        else:
            out[k] = fcl.distance(oa, ob, fcl.DistanceRequest(), fcl.DistanceResult())
    return out


def fcl_models(world: CollisionWorld):
    import fcl

    models = []
    for i in range(len(world.mesh_names)):
        mesh = world.library[i]
        m = fcl.BVHModel()
        m.beginModel(mesh.num_vertices, mesh.num_faces)
        m.addSubModel(mesh.vertices.numpy(), mesh.faces.numpy().astype(np.int32))
        m.endModel()
        models.append(m)
    return models


WORLD_ENVS, WORLD_SLOTS = 4, 8
WORLD_LEARNED_MAX, WORLD_EXACT_MAX = 4096, 1024


def world_cost_rows(world: CollisionWorld, checkers: dict, sizes: list[int], timed, device) -> list[dict]:
    """Time `checker.cost(mesh, poses, env_idx)` + backward, the call a trajectory optimiser makes:
    each environment holds WORLD_SLOTS random procedural obstacles in a 0.4 m cube, queries are
    uniform poses of a random mesh in that cube."""
    g = torch.Generator().manual_seed(1)
    m = len(world.mesh_names)
    for env in range(WORLD_ENVS):
        for k in range(WORLD_SLOTS):
            q = torch.randn(4, generator=g)
            pose = torch.cat([(torch.rand(3, generator=g) - 0.5) * 0.4, q / q.norm()])
            world.add_obstacle(f"o{env}_{k}", int(torch.randint(m, (1,), generator=g)), pose, env=env)
    n_max = max(sizes)
    ids = torch.randint(m, (n_max,), generator=g).to(device)
    env = torch.randint(WORLD_ENVS, (n_max,), generator=g).to(device)
    q = torch.randn(n_max, 4, generator=g)
    poses = torch.cat([(torch.rand(n_max, 3, generator=g) - 0.5) * 0.4, q / q.norm(dim=1, keepdim=True)], 1).to(device)
    rows = []
    for n in sizes:
        for name, checker in checkers.items():
            k = min(n, WORLD_LEARNED_MAX if checker.learned else WORLD_EXACT_MAX)

            def call():
                p = poses[:k].clone().requires_grad_()
                checker.cost(ids[:k], p, env[:k]).sum().backward()

            seconds = timed(call, k, not checker.learned)
            rows.append({"backend": name, "queries": n, "timed": k, "latency_ms": 1e3 * seconds * n / k,
                         "qps": k / seconds, "us_per_query": 1e6 * seconds / k})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ckpt", default=None, help="a LOCC or Global-OCN checkpoint for the learned rows")
    parser.add_argument("--quick", action="store_true", help="sizes up to 4096")
    parser.add_argument("--exact-max", type=int, default=4096, help="exact queries timed per size (subsample)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    sizes = [s for s in SIZES if not args.quick or s <= 4096]

    world = CollisionWorld(num_envs=WORLD_ENVS, max_obstacles=WORLD_SLOTS, device=device, num_points=1500)
    for i, family in enumerate(FAMILIES):
        world.add_mesh(family, make_object(family, i))
    checkers = {}
    if args.ckpt:
        c = CollisionChecker.from_checkpoint(args.ckpt, world, validate=False)
        checkers[c.backend] = c
    for name, cls in (("locc", LOCC), ("global_ocn", GlobalOCN)):
        if name not in checkers:
            torch.manual_seed(0)
            checkers[name] = CollisionChecker(world, name, cls(ShapeEncoder()), validate=False)
    checkers["exact"] = CollisionChecker(world, "exact", validate=False)
    for c in checkers.values():
        if c.learned:
            c.embeddings()  # cached once per mesh set: not part of any query's time

    g = torch.Generator().manual_seed(0)
    base = 4096
    ids_a = torch.randint(len(FAMILIES), (base,), generator=g)
    ids_b = torch.randint(len(FAMILIES), (base,), generator=g)
    lib64 = MeshLibrary([world.library[i] for i in range(len(FAMILIES))], dtype=torch.float64)
    pa, pb, _, _ = sample_pairs(lib64, ids_a, ids_b, PairSpec(placement="uniform"), g)
    reps = (max(sizes) + base - 1) // base
    ids_a, ids_b = ids_a.repeat(reps).to(device), ids_b.repeat(reps).to(device)
    pa, pb = pa.float().repeat(reps, 1).to(device), pb.float().repeat(reps, 1).to(device)
    models = fcl_models(world)

    def timed(fn, n, slow=False):
        return best_time(fn, repeats=1 if n >= 100_000 or (slow and n >= 1024) else 3, warmup=1)

    rows = []
    started = time.perf_counter()
    for n in sizes:
        for name, checker in checkers.items():
            m = n if checker.learned else min(n, args.exact_max)
            qa, qb, xa, xb = ids_a[:m], ids_b[:m], pa[:m], pb[:m]
            with torch.no_grad():
                seconds = timed(lambda: checker.pairwise(qa, qb, xa, xb), m, not checker.learned)

            k = min(m, GRAD_MAX)

            def with_grad():
                ga, gb = xa[:k].clone().requires_grad_(), xb[:k].clone().requires_grad_()
                r = checker.pairwise(qa[:k], qb[:k], ga, gb)
                (r.logit if checker.learned else r.signed_distance).sum().backward()

            grad_seconds = timed(with_grad, k, not checker.learned)
            rows.append({"backend": name, "queries": n, "timed": m, "latency_ms": 1e3 * seconds * n / m,
                         "qps": m / seconds, "us_per_query": 1e6 * seconds / m, "grad_timed": k,
                         "grad_latency_ms": 1e3 * grad_seconds * n / k, "grad_qps": k / grad_seconds})
        m = min(n, FCL_MAX)
        seconds = timed(lambda: fcl_loop(models, ids_a[:m].cpu(), ids_b[:m].cpu(), pa[:m].cpu(), pb[:m].cpu()), m, True)
        rows.append({"backend": "python-fcl loop", "queries": n, "timed": m, "latency_ms": 1e3 * seconds * n / m,
                     "qps": m / seconds, "us_per_query": 1e6 * seconds / m})
    world_rows = world_cost_rows(world, checkers, sizes, timed, device)
    print(f"pairwise collision queries on {device} ({torch.get_num_threads()} threads), embeddings cached; "
          f"latency of the whole batch (extrapolated where timed < queries); "
          f"total {time.perf_counter() - started:.0f} s")
    print_table(rows, ["backend", "queries", "timed", "latency_ms", "qps", "us_per_query", "grad_timed",
                       "grad_latency_ms", "grad_qps"])
    print(f"\nobject-vs-world cost + gradient w.r.t. the poses: {WORLD_ENVS} environments x {WORLD_SLOTS} "
          f"enabled obstacles; one query = one pose against its whole environment (timed on at most "
          f"{WORLD_LEARNED_MAX} learned / {WORLD_EXACT_MAX} exact queries, extrapolated)")
    print_table(world_rows, ["backend", "queries", "timed", "latency_ms", "qps", "us_per_query"])
    write_json("planning", {"device": device, "rows": rows, "world_rows": world_rows, "sizes": sizes,
                            "exact_max": args.exact_max, "fcl_max": FCL_MAX, "grad_max": GRAD_MAX}, args.out)


if __name__ == "__main__":
    main()

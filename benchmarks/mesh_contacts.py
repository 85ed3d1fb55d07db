"""Mesh–mesh queries per second on pairs of 1k–1M-triangle meshes near contact: `blem_contacts`,
`mesh_distance` and `mesh_collide` (1 thread, all threads) against Klampt (`Geometry3D.contacts`,
`.distance`, `.collides`), python-fcl (`fcl.distance`, `fcl.collide` on OBBRSS BVHModels) and
Coal 3, the FCL successor (`coal.distance`, `coal.collide`, OBBRSS), on the same meshes and poses
in one run; plus contacts per query and the library's bytes per triangle.

Meshes: two bumpy icospheres (`bumpy_sphere`, 5 cm radius, different seeds) at subdivision 3, 5, 6
and 8 (1280, 20480, 81920 and 1310720 triangles each). Each pair of poses is random, then moved
to a surface gap of +0.5 mm ("gap" regime) and the same pairs pushed 1 mm deeper ("overlap",
≈0.5 mm interpenetration); mesh_distance / mesh_collide also run one object size apart ("far":
0.1 m gap). Boundary layers r_a = r_b = 1 mm. Peers run in double precision on one
core, so the per-core ratio uses our float64 library at 1 thread; float32 (the default) is shown
beside it.

Real meshes (the robosuite collision meshes, `python -m contactnet.data.robosuite_meshes`; the
section is skipped with a message when the folder is absent): random pairs of them, each query a
different pair, far (gap = the mean of the two meshes' largest extents), near (0.5 mm) and
overlapping (1 mm deeper), `mesh_distance` and `mesh_collide` against Coal.

Coal rows, here and on the bumpy spheres, are timed interleaved (ours, Coal, ours, ... in one
process, single-threaded; medians of the times and of the per-round ratios), so that a shared,
noisy machine loads both alike. Coal is called from a Python loop, which adds ~1 us per query.

The other timings, ours and the peers', are the best of 3 calls (2 with --quick) after one warm-up call,
the 1M pair's included: a single call of a 1M-triangle BLEM query varies by up to 40% with how
the kernel hands out the pages of its output.

    python -m benchmarks.mesh_contacts [--quick] [--radius 0.001] [--gap 0.0005] [--out FILE]
                                       [--real-meshes data/meshes/robosuite] [--real-queries 64]
"""

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from benchmarks.common import best_time, interleaved_times, print_table, write_json
from contactnet.geometry import Mesh, MeshLibrary, quaternion_to_matrix
from contactnet.ops import blem_contacts, mesh_collide, mesh_distance
from tests.ops.mesh_cases import bumpy_sphere, near_contact_poses

# (label, icosphere subdivisions, queries per regime, BLEM queries per regime): fewer BLEM
# queries where one (Klampt's) takes seconds; BLEM poses are drawn as a run of that many queries
# draws them (the same poses as when every row used that count). mesh_distance / mesh_collide take
# microseconds to a millisecond, so they keep 8+ queries: a batch of one would time the call
# overhead (~10 us) and a single pose.
SIZES = [("1k", 3, 32, 32), ("10k", 5, 8, 8), ("100k", 6, 8, 4), ("1M", 8, 8, 1)]
MAX_CONTACTS = 16  # the clustered variant (Klampt's Python contacts() ignores its cap)
FAR_GAP = 0.1  # the bumpy spheres' "far" regime: about one object size apart (m)


# ---- inputs -------------------------------------------------------------------------------------


def make_pair(subdivisions: int) -> tuple[Mesh, Mesh]:
    return (Mesh(*bumpy_sphere(subdivisions, 0.05, seed=1), name="bumpy_a"),
            Mesh(*bumpy_sphere(subdivisions, 0.05, seed=2), name="bumpy_b"))  # fmt: skip


def regime_poses(lib64: MeshLibrary, ids_a: torch.Tensor, ids_b: torch.Tensor, gap, seed: int,
                 far_gap=None, spread: float = 0.3) -> dict:  # fmt: skip
    """{"gap": (pa, pb), "overlap": (pa, pb), and with far_gap "far": (pa, pb)} float64: surface
    gap `gap`, then B pushed 2 * gap further along the closest-point direction (interpenetration
    ≈ gap); "far" at surface gap far_gap (a float or one per query)."""
    pa, pb = near_contact_poses(lib64, ids_a, ids_b, gap, seed=seed, spread=spread)
    res = mesh_distance(lib64, ids_a, ids_b, pa, pb)
    u = (res.point_a - res.point_b) / res.distance[:, None]
    pb_in = pb.clone()
    pb_in[:, :3] += 2 * gap * u
    poses = {"gap": (pa, pb), "overlap": (pa, pb_in)}
    if far_gap is not None:
        poses = {"far": near_contact_poses(lib64, ids_a, ids_b, far_gap, seed=seed, spread=spread), **poses}
    return poses


# ---- peers (single-threaded C++ behind a Python loop; transforms prepared outside the timing) ----


class Klampt:
    def __init__(self, a: Mesh, b: Mesh):
        from klampt import Geometry3D, TriangleMesh

        def geom(m):
            tm = TriangleMesh()
            tm.setVertices(m.vertices.numpy())
            tm.setIndices(m.faces.numpy().astype(np.int32))
            return Geometry3D(tm)

        self.ga, self.gb = geom(a), geom(b)
        self.ga.collides(self.gb)  # Klampt builds its PQP models lazily, on the first query

    @staticmethod
    def transforms(poses):
        r = quaternion_to_matrix(poses[:, 3:].double()).numpy()
        return [(m.T.reshape(-1).tolist(), t.tolist()) for m, t in zip(r, poses[:, :3].double().numpy())]

    def run(self, kind: str, ta, tb, r_a=0.0, r_b=0.0) -> list:
        out = []
        for (ra, xa), (rb, xb) in zip(ta, tb):
            self.ga.setCurrentTransform(ra, xa)  # rotation column-major
            self.gb.setCurrentTransform(rb, xb)
            if kind == "contacts":
                res = self.ga.contacts(self.gb, r_a, r_b)  # hold it: .depths is a view into it
                out.append(len(res.depths))
            elif kind == "distance":
                res = self.ga.distance(self.gb)
                out.append(res.d)
            else:
                out.append(bool(self.ga.collides(self.gb)))
        return out


class Fcl:
    def __init__(self, a: Mesh, b: Mesh):
        import fcl

        def obj(m):
            bvh = fcl.BVHModel()
            bvh.beginModel(m.num_vertices, m.num_faces)
            bvh.addSubModel(m.vertices.numpy(), m.faces.numpy().astype(np.int32))
            bvh.endModel()
            return fcl.CollisionObject(bvh, fcl.Transform())

        self.fcl = fcl
        self.oa, self.ob = obj(a), obj(b)

    def transforms(self, poses):
        p = poses.double().numpy()
        return [self.fcl.Transform(x[3:], x[:3]) for x in p]

    def run(self, kind: str, ta, tb) -> list:
        fcl, out = self.fcl, []
        for xa, xb in zip(ta, tb):
            self.oa.setTransform(xa)
            self.ob.setTransform(xb)
            if kind == "distance":
                out.append(fcl.distance(self.oa, self.ob, fcl.DistanceRequest(), fcl.DistanceResult()))
            else:
                out.append(fcl.collide(self.oa, self.ob, fcl.CollisionRequest(), fcl.CollisionResult()) > 0)
        return out


class Coal:
    """Coal 3 on OBBRSS BVHModels of a list of meshes; a query names its two meshes."""

    def __init__(self, meshes: list[Mesh]):
        import coal

        def model(m):
            bvh = coal.BVHModelOBBRSS()
            bvh.beginModel(m.num_faces, m.num_vertices)
            bvh.addVertices(m.vertices.numpy())
            bvh.addTriangles(m.faces.numpy().astype(np.int32))
            bvh.endModel()
            return bvh

        self.coal = coal
        self.models = [model(m) for m in meshes]

    def transforms(self, poses):
        r = quaternion_to_matrix(poses[:, 3:].double()).numpy()
        return [self.coal.Transform3s(m, t) for m, t in zip(r, poses[:, :3].double().numpy())]

    def run(self, kind: str, ids_a, ids_b, ta, tb) -> list:
        coal, out = self.coal, []
        models_a = [self.models[i] for i in ids_a.tolist()]
        models_b = [self.models[i] for i in ids_b.tolist()]
        if kind == "distance":
            req, res = coal.DistanceRequest(), coal.DistanceResult()
            for ga, xa, gb, xb in zip(models_a, ta, models_b, tb):
                res.clear()  # a kept result would seed the next query's bound
                out.append(coal.distance(ga, xa, gb, xb, req, res))
        else:
            req, res = coal.CollisionRequest(), coal.CollisionResult()
            for ga, xa, gb, xb in zip(models_a, ta, models_b, tb):
                res.clear()
                out.append(coal.collide(ga, xa, gb, xb, req, res) > 0)
        return out


def coal_rows(coal: Coal, lib64: MeshLibrary, ids_a, ids_b, regime: str, pa64, pb64, rounds: int,
              base: dict) -> list[dict]:  # fmt: skip
    """mesh_distance and mesh_collide against Coal, float64, one thread, timed interleaved."""
    q = ids_a.shape[0]
    ta, tb = coal.transforms(pa64), coal.transforms(pb64)
    torch.set_num_threads(1)
    rows = []
    for name, ours, kind in (("mesh_distance", mesh_distance, "distance"), ("mesh_collide", mesh_collide, "collide")):
        last = {}
        t_ours, t_peer, ratio = interleaved_times(
            lambda: last.__setitem__("ours", ours(lib64, ids_a, ids_b, pa64, pb64)),
            lambda: last.__setitem__("peer", coal.run(kind, ids_a, ids_b, ta, tb)), rounds=rounds)
        got, ref = last["ours"], np.asarray(last["peer"], dtype=np.float64)
        if kind == "distance":
            # Coal's distance of crossing surfaces is not a signed distance: separated pairs only
            sep = ref > 0
            check = (f"max|d-peer| {np.abs(got.distance.numpy()[sep] - ref[sep]).max():.1e} on {int(sep.sum())}/{q}"
                     if sep.any() else f"ours d=0 {int((got.distance == 0).sum())}/{q}")  # fmt: skip
        else:
            check = f"agree {int((got.numpy() == ref.astype(bool)).sum())}/{q}"
        rows.append({**base, "regime": regime, "queries": q, "op": name, "ours_1t": q / t_ours, "peer": f"coal.{kind}",
                     "peer_1t": q / t_peer, "ours/peer_per_core": ratio, "check": check})  # fmt: skip
        print(f"  {regime:7s} {name:22s} vs coal.{kind:10s} ours/peer per core {ratio:.3g} (interleaved)", flush=True)
    return rows


def timed(fn, repeats: int, warmup: int = 1):
    """(best seconds of `repeats` calls after `warmup`, the last call's output)."""
    last = []
    seconds = best_time(lambda: last.__setitem__(slice(None), [fn()]), repeats=repeats, warmup=warmup)
    return seconds, last[0]


# ---- one size -----------------------------------------------------------------------------------


def bench_size(label: str, subdivisions: int, q: int, q_blem: int, radius: float, gap: float,
               all_threads: int, repeats: int) -> list[dict]:  # fmt: skip
    t0 = time.perf_counter()
    a, b = make_pair(subdivisions)
    libs = {dt: MeshLibrary([a, b], dtype=dt) for dt in (torch.float64, torch.float32)}
    for lib in libs.values():
        lib.bvh  # built once, cached; not timed
    bytes_per_tri = {dt: lib.memory_bytes() / lib.faces.shape[0] for dt, lib in libs.items()}
    ids_a, ids_b = torch.zeros(q, dtype=torch.int64), torch.ones(q, dtype=torch.int64)
    poses = regime_poses(libs[torch.float64], ids_a, ids_b, gap, seed=subdivisions, far_gap=FAR_GAP)
    far = poses.pop("far")  # Coal rows only
    # BLEM's own (fewer) poses, drawn as a run of q_blem queries draws them
    blem_poses = poses if q_blem == q else regime_poses(libs[torch.float64], ids_a[:q_blem], ids_b[:q_blem], gap,
                                                        seed=subdivisions)  # fmt: skip
    klampt, fcl, coal = Klampt(a, b), Fcl(a, b), Coal([a, b])
    print(f"[{label}] {a.num_faces} triangles per mesh, {q} queries per regime ({q_blem} for BLEM); "
          f"setup {time.perf_counter() - t0:.1f} s", flush=True)  # fmt: skip
    qb = q_blem

    rows = []
    base = {"size": label, "triangles": a.num_faces}
    for regime, (pa64, pb64) in {"far": far, **poses}.items():
        rows += coal_rows(coal, libs[torch.float64], ids_a, ids_b, regime, pa64, pb64, 2 * repeats + 1, base)
    for regime, (pa64, pb64) in poses.items():
        bp64 = blem_poses[regime]
        bp = {dt: (bp64[0].to(dt), bp64[1].to(dt)) for dt in libs}
        ours_ops = {
            "blem_contacts": lambda lib, pa, pb: blem_contacts(
                lib, ids_a[:qb], ids_b[:qb], *bp[lib.dtype], radius, radius),
            f"blem_contacts(k={MAX_CONTACTS})": lambda lib, pa, pb: blem_contacts(
                lib, ids_a[:qb], ids_b[:qb], *bp[lib.dtype], radius, radius, max_contacts=MAX_CONTACTS),
            "mesh_distance": lambda lib, pa, pb: mesh_distance(lib, ids_a, ids_b, pa, pb),
            "mesh_collide": lambda lib, pa, pb: mesh_collide(lib, ids_a, ids_b, pa, pb),
        }  # fmt: skip
        ours, results = {}, {}
        for name, fn in ours_ops.items():
            n_q = qb if name.startswith("blem") else q
            speed = {}
            for key, dtype, threads in (("1t", torch.float64, 1), ("all", torch.float64, all_threads),
                                        ("f32_1t", torch.float32, 1)):  # fmt: skip
                lib = libs[dtype]
                pa, pb = pa64.to(dtype), pb64.to(dtype)
                torch.set_num_threads(threads)
                seconds, out = timed(lambda: fn(lib, pa, pb), repeats=repeats)
                speed[key] = n_q / seconds
                if key == "1t":
                    results[name] = out
            torch.set_num_threads(1)
            ours[name] = speed

        ka, kb = Klampt.transforms(pa64), Klampt.transforms(pb64)
        kba, kbb = Klampt.transforms(bp64[0]), Klampt.transforms(bp64[1])
        fa, fb = fcl.transforms(pa64), fcl.transforms(pb64)
        peers = {  # our op -> [(peer name, call)]
            "blem_contacts": [("klampt.contacts", lambda: klampt.run("contacts", kba, kbb, radius, radius))],
            "mesh_distance": [("klampt.distance", lambda: klampt.run("distance", ka, kb)),
                              ("fcl.distance", lambda: fcl.run("distance", fa, fb))],
            "mesh_collide": [("klampt.collides", lambda: klampt.run("collides", ka, kb)),
                             ("fcl.collide", lambda: fcl.run("collide", fa, fb))],
        }  # fmt: skip
        peers[f"blem_contacts(k={MAX_CONTACTS})"] = peers["blem_contacts"]
        peer_cache = {}
        for name, speed in ours.items():
            res = results[name]
            n_q = qb if name.startswith("blem") else q
            for peer, call in peers[name]:
                if peer not in peer_cache:  # the capped row reuses the uncapped Klampt timing
                    seconds, out = timed(call, repeats=repeats)
                    peer_cache[peer] = (n_q / seconds, out, seconds)
                peer_qps, peer_out, peer_s = peer_cache[peer]
                row = {"size": label, "triangles": a.num_faces, "regime": regime, "queries": n_q, "op": name,
                       "ours_1t": speed["1t"], "ours_all": speed["all"], "ours_f32_1t": speed["f32_1t"],
                       "peer": peer, "peer_1t": peer_qps, "ours/peer_per_core": speed["1t"] / peer_qps,
                       "bytes_per_tri": bytes_per_tri[torch.float64],
                       "bytes_per_tri_f32": bytes_per_tri[torch.float32]}  # fmt: skip
                if name.startswith("blem"):
                    n_ours = int(res.counts.sum())
                    row["ours_contacts"] = n_ours
                    row["peer_contacts"] = int(sum(peer_out))
                    if res is results["blem_contacts"]:  # contacts/s of the clustered row: not comparable
                        row["ours_contacts/s"] = n_ours * speed["1t"] / n_q
                        row["peer_contacts/s"] = row["peer_contacts"] / peer_s
                    row["intersecting"] = int(res.intersecting.sum())
                elif name == "mesh_distance":
                    ref = np.asarray(peer_out, dtype=np.float64)
                    got = res.distance.numpy()
                    row["check"] = (f"max|d-peer| {np.abs(got - ref).max():.1e}" if regime == "gap"
                                    else f"ours d=0 {int((got == 0).sum())}/{q}")  # fmt: skip
                else:
                    agree = int((res.numpy() == np.asarray(peer_out, dtype=bool)).sum())
                    row["check"] = f"agree {agree}/{q}"
                rows.append(row)
                print(f"  {regime:7s} {name:22s} vs {peer:16s} ours/peer per core {row['ours/peer_per_core']:.3g}",
                      flush=True)  # fmt: skip
    return rows


def bench_real_meshes(folder: Path, q: int, gap: float, rounds: int, seed: int = 0) -> list[dict]:
    """Coal rows on random pairs of the meshes under `folder` (each recentred on its box centre)."""
    import warnings

    paths = sorted(p for p in folder.rglob("*") if p.suffix.lower() in (".ply", ".obj", ".stl"))
    with warnings.catch_warnings():  # degenerate faces dropped at load time
        warnings.simplefilter("ignore")
        meshes = [Mesh.from_file(p).recentered() for p in paths]
    lib64 = MeshLibrary(meshes, dtype=torch.float64)
    lib64.bvh
    rng = np.random.default_rng(seed)
    ids_a = torch.from_numpy(rng.integers(0, len(meshes), q))
    ids_b = torch.from_numpy(rng.integers(0, len(meshes), q))
    size = torch.tensor([float((m.bounds()[1] - m.bounds()[0]).max()) for m in meshes], dtype=torch.float64)
    far_gap = 0.5 * (size[ids_a] + size[ids_b])
    poses = regime_poses(lib64, ids_a, ids_b, gap, seed=seed + 1, far_gap=far_gap, spread=1.0)
    faces = torch.tensor([m.num_faces for m in meshes])
    print(f"[{folder.name}] {len(meshes)} meshes ({int(faces.min())}-{int(faces.max())} triangles, median "
          f"{int(faces.median())}), {q} random pairs per regime", flush=True)  # fmt: skip
    coal = Coal(meshes)
    base = {"size": folder.name, "triangles": f"{int(faces.min())}-{int(faces.max())}"}
    rows = []
    for regime, (pa64, pb64) in poses.items():
        rows += coal_rows(coal, lib64, ids_a, ids_b, regime, pa64, pb64, rounds, base)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="skip the 1M-triangle pair, fewer repeats")
    parser.add_argument("--radius", type=float, default=0.001, help="boundary layer r_a = r_b (m)")
    parser.add_argument("--gap", type=float, default=0.0005, help="surface gap of the 'gap' regime (m)")
    parser.add_argument("--out", default=None, help="JSON path (default benchmarks/results/)")
    parser.add_argument("--real-meshes", default=str(Path(__file__).resolve().parents[1] / "data/meshes/robosuite"),
                        help="folder of real meshes for the Coal rows (skipped when absent)")
    parser.add_argument("--real-queries", type=int, default=64, help="random pairs per regime on the real meshes")
    parser.add_argument("--real-only", action="store_true", help="only the real-mesh Coal rows")
    args = parser.parse_args()
    sizes = SIZES[:-1] if args.quick else SIZES
    repeats = 2 if args.quick else 3
    all_threads = torch.get_num_threads()

    start = time.perf_counter()
    rows = []
    real = Path(args.real_meshes)
    if real.is_dir():
        rows += bench_real_meshes(real, args.real_queries, args.gap, rounds=15)
    else:
        print(f"no real meshes at {real}: real-mesh Coal rows skipped "
              f"(python -m contactnet.data.robosuite_meshes --out {real})")  # fmt: skip
    for label, subdivisions, q, q_blem in ([] if args.real_only else sizes):
        rows += bench_size(label, subdivisions, q, q_blem, args.radius, args.gap, all_threads, repeats)
    torch.set_num_threads(all_threads)

    print(f"\nmesh queries per second, float64 unless noted; 1t = one thread, all = {all_threads} threads; "
          f"peers single-threaded; Coal rows timed interleaved (medians); r_a = r_b = {args.radius * 1e3:g} mm, gap {args.gap * 1e3:g} mm / "
          f"overlap ≈{args.gap * 1e3:g} mm; contacts summed over the queries; bytes per triangle of the "
          f"MeshLibrary tensors incl. BVH")  # fmt: skip
    print_table(rows, ["size", "triangles", "regime", "queries", "op", "ours_1t", "ours_all", "ours_f32_1t",
                       "peer", "peer_1t", "ours/peer_per_core", "ours_contacts", "peer_contacts",
                       "ours_contacts/s", "peer_contacts/s", "bytes_per_tri", "bytes_per_tri_f32", "check"])
    print(f"total {time.perf_counter() - start:.0f} s")
    payload = {"unit": "queries/s", "radius": args.radius, "gap": args.gap, "max_contacts": MAX_CONTACTS,
               "real_meshes": str(real) if real.is_dir() else None, "far_gap": FAR_GAP,
               "sizes": [{"label": s[0], "subdivisions": s[1], "queries_per_regime": s[2], "blem_queries": s[3]}
                         for s in sizes],
               "rows": rows}  # fmt: skip
    path = write_json("mesh_contacts", payload, args.out)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()

"""Collision checks per second with cached shape embeddings (LOCC, Global-OCN) against exact
`mesh_collide` on the same pairs and device, for batch sizes 1k–1M; plus memory per query.

    python -m benchmarks.inference [--ckpt CKPT] [--quick] [--out FILE]

Speed does not depend on the weights, so without --ckpt randomly initialised networks with the
paper's sizes (M = 6, H = 256, F = 64) are timed, next to this project's boundary design
("locc_boundary": the network of conf/model/locc.yaml, the default: an 8³ grid, the surface
depths and the containment test; clouds of the data's 3,000 points), timed up to 100k queries
on a CPU; "locc_boundary_plain" is that network with the containment test off, so the ratio of the
two rows is the test's cost.
"""

import argparse
from pathlib import Path

import torch
from omegaconf import OmegaConf

from benchmarks.common import best_time, print_table, write_json
from contactnet.data.pairs import PairSpec, sample_pairs
from contactnet.data.procedural import DEFAULT_FAMILIES, make_object
from contactnet.geometry.sampling import SURFACE_POINTS, sample_surface_even
from contactnet.geometry import Mesh, MeshLibrary
from contactnet.models import LOCC, GlobalOCN, ShapeEmbedding, ShapeEncoder, load_model
from contactnet.models.checkpoint import build_net
from contactnet.ops import mesh_collide

DEFAULT_LOCC = Path(__file__).resolve().parents[1] / "conf" / "model" / "locc.yaml"
CHUNK = 16384  # queries per forward pass: bounds memory at large batch sizes
BOUNDARY_CPU_MAX = 100_000  # locc_boundary's largest batch on a CPU (a few seconds a call there)


def predict_chunked(net, table: ShapeEmbedding, ids_a, ids_b, poses_a, poses_b, projection=None) -> torch.Tensor:
    out = torch.empty(len(ids_a), device=poses_a.device)
    for s in range(0, len(ids_a), CHUNK):
        e = slice(s, s + CHUNK)
        out[e] = net.predict_indexed(table, ids_a[e], ids_b[e], poses_a[e], poses_b[e], projection=projection)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ckpt", default=None)
    parser.add_argument("--quick", action="store_true", help="batch sizes up to 100k")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    sizes = [1_000, 10_000, 100_000] + ([] if args.quick else [1_000_000])

    objects = [make_object(f, 0) for f in DEFAULT_FAMILIES]
    lib = MeshLibrary([Mesh(v, f) for v, f in objects], dtype=torch.float32).to(device)
    clouds = [sample_surface_even(v, f, SURFACE_POINTS, seed=0) for v, f in objects]
    points = torch.stack([torch.as_tensor(c[0], dtype=torch.float32) for c in clouds]).to(device)
    normals = torch.stack([torch.as_tensor(c[1], dtype=torch.float32) for c in clouds]).to(device)
    aabb = torch.stack([lib[i].bounds().float() for i in range(len(lib))]).to(device)
    boundary = OmegaConf.to_container(OmegaConf.load(DEFAULT_LOCC).net)
    nets = {"locc": load_model(args.ckpt, device) if args.ckpt else LOCC(ShapeEncoder()).eval().to(device),
            "global_ocn": GlobalOCN(ShapeEncoder()).eval().to(device),
            "locc_boundary": build_net(boundary).eval().to(device),
            "locc_boundary_plain": build_net({**boundary, "containment": False}).eval().to(device)}

    g = torch.Generator().manual_seed(0)
    n_max = max(sizes)
    ids_a = torch.randint(len(lib), (n_max,), generator=g)
    ids_b = torch.randint(len(lib), (n_max,), generator=g)
    lib64 = MeshLibrary([Mesh(v, f) for v, f in objects], dtype=torch.float64)
    pa, pb, _, _ = sample_pairs(lib64, ids_a[:100_000], ids_b[:100_000], PairSpec(placement="uniform"), g)
    reps = (n_max + 99_999) // 100_000  # the same 100k near-contact poses, tiled
    pa, pb = pa.float().repeat(reps, 1)[:n_max].to(device), pb.float().repeat(reps, 1)[:n_max].to(device)
    ids_a, ids_b = ids_a.to(device), ids_b.to(device)

    rows = []
    with torch.no_grad():
        embeddings = {k: net.encode(points, normals, aabb) for k, net in nets.items()}
        projections = {k: net.project_table(embeddings[k]) for k, net in nets.items()}  # cached, as the checker does
        n_exact = min(20_000, n_max)
        exact_s = best_time(lambda: mesh_collide(lib, ids_a[:n_exact], ids_b[:n_exact], pa[:n_exact], pb[:n_exact]), 2)
        exact_qps = n_exact / exact_s
        for n in sizes:
            row = {"queries": n, "exact_qps": exact_qps}
            for name, net in nets.items():
                if name.startswith("locc_boundary") and device == "cpu" and n > BOUNDARY_CPU_MAX:
                    continue
                emb, projection = embeddings[name], projections[name]
                seconds = best_time(lambda: predict_chunked(net, emb, ids_a[:n], ids_b[:n], pa[:n], pb[:n], projection),
                                    repeats=2 if n >= 100_000 else 3)
                row[f"{name}_qps"] = n / seconds
                row[f"{name}_vs_exact"] = row[f"{name}_qps"] / exact_qps
            rows.append(row)
    # Memory per query in flight: per side, cell weights, centres in the other frame and the kept
    # mask (C·(1 + 3 + 3) floats), the crop (F) and the head's activations; embeddings are shared.
    f = nets["locc"].encoder.features
    cells = nets["locc"].encoder.grid ** 3
    bytes_per_query = 4 * (2 * (7 * cells + f) + 2 * 256)
    print(f"collision checks per second on {device} ({torch.get_num_threads()} threads), embeddings cached;"
          f" exact mesh_collide timed on {n_exact} of the same pairs")
    for row in rows:
        if "locc_boundary_qps" in row:
            row["containment_cost"] = row["locc_boundary_plain_qps"] / row["locc_boundary_qps"]
    print_table(rows, ["queries", "locc_qps", "locc_boundary_qps", "locc_boundary_plain_qps", "global_ocn_qps",
                       "exact_qps", "locc_vs_exact", "locc_boundary_vs_exact", "global_ocn_vs_exact", "containment_cost"])
    print(f"LOCC memory per query in flight: ~{bytes_per_query / 1024:.1f} KiB (chunks of {CHUNK} queries)")
    write_json("inference", {"device": device, "rows": rows, "bytes_per_query": bytes_per_query,
                             "chunk": CHUNK}, args.out)


if __name__ == "__main__":
    main()

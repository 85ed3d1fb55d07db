"""LOCC Table II (simulation fidelity): min-|sd| at contacts on the bowl-shaking scene, our stepper
next to MuJoCo (meshes collide as their convex hulls) in the same run, the paper's rows beside.

    python -m benchmarks.paper_table2                 # 8 environments, 100 steps, 600 contact events
    python -m benchmarks.paper_table2 --quick         # smoke run: 1 environment, 40 steps

The statistic, as the paper defines it (§IV-B): "we compute the absolute signed distance among all
the objects whenever a contact arises, and take the minimum value", over 600 contacts; Table II
gives the average, the average of the highest 10% and the maximum of those 600 values (0 is ideal:
a value is the depth of a penetration or the gap of a false contact). Here, for both simulators:

- a contact event is an (environment, step) at whose end the simulator has a contact between two
  bodies: ours, some primitive pair closer than d̂, where the barrier acts
  (`Stepper.contact_pair_distances`); MuJoCo, an entry of its contact list;
- its value is the minimum over the body pairs in contact of |sd|, where sd is the exact signed
  distance between the bodies' true meshes at the simulator's poses (`exact_signed_distance`):
  the BVH distance when they are apart, and when they overlap minus the smallest translation that
  separates them over 90 directions (an upper bound of the penetration depth; every direction lies
  within 18° of one of them, so for a flat contact it is at most 5% above the depth);
- events are numbered in (step, environment) order and `--contacts` of them are kept, evenly
  spaced over the run (all of them when there are fewer), so the sample covers the drop and the
  shaking alike; both simulators run the same scenes (`scenes.bowl_shake`, seeds 0 .. envs-1),
  time step and number of steps.

Why MuJoCo is measured on the true meshes and not by its own contact distance: the paper measures
what the simulated objects do. IG-CVXH's 7 cm are objects resting on the convex hull of a bowl,
floating above its true surface; on the hulls MuJoCo's contact distance is a fraction of a
millimetre while the objects float. That hull distance is reported too, as a row of its own.

Ours is the IPC stepper with exact contact: intersection-free by construction, its contacts hold
the surfaces apart by less than d̂ (1 mm by default), which bounds its min-|sd|.

Writes results.json (every kept event's value), results.md and results.png in --out-dir (default
outputs/paper/table2[_quick]).
"""

import argparse
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from benchmarks.common import machine_info
from contactnet.data.storage import write_json_atomic
from contactnet.geometry import MeshLibrary
from contactnet.ops import mesh_collide, mesh_distance
from contactnet.ops.penetration import separating_translation
from contactnet.sim import Stepper, scenes

# Fibonacci-sphere directions added to the 26 of the cube's neighbourhood when searching the
# translation that separates overlapping meshes.
SPHERE_DIRECTIONS = 64
SEPARATION_TOL = 1e-5  # metres: bisection tolerance of a penetration depth

PAPER_TABLE_II = {  # metres: average, top-10% average, maximum of min-|sd| over 600 contacts
    "IG-CVXD": (0.0132, 0.0302, 0.0392),
    "IG-CVXH": (0.0709, 0.1266, 0.1286),
    "BRAX-LOCC": (0.0077, 0.0218, 0.0338),
}


def separation_directions(count: int = SPHERE_DIRECTIONS) -> torch.Tensor:
    """(26 + count, 3) float64 unit vectors: the 26 axis, face-diagonal and cube-diagonal directions
    (exact for box-like contacts) and `count` points of a Fibonacci sphere; with 64 of them every
    unit vector lies within 18° of one of the 90."""
    grid = torch.tensor([[x, y, z] for x in (-1, 0, 1) for y in (-1, 0, 1) for z in (-1, 0, 1) if x or y or z],
                        dtype=torch.float64)
    k = torch.arange(count, dtype=torch.float64) + 0.5
    z = 1 - 2 * k / count
    phi = math.pi * (1 + 5**0.5) * k
    r = (1 - z * z).sqrt()
    sphere = torch.stack([r * phi.cos(), r * phi.sin(), z], 1)
    return torch.cat([grid / grid.norm(dim=1, keepdim=True), sphere])


class TrueMeshes:
    """Every environment's body meshes in one float64 library: body b of environment e is mesh
    `offsets[e] + b`; the meshes the simulators were given, in their own frames."""

    def __init__(self, scene_list):
        meshes = [body.mesh for scene in scene_list for body in scene.bodies]
        self.offsets = np.cumsum([0] + [len(scene) for scene in scene_list])
        self.library = MeshLibrary(meshes, dtype=torch.float64)
        self.radius = torch.tensor([float(m.vertices.norm(dim=1).max()) for m in meshes], dtype=torch.float64)

    def ids(self, env, body) -> torch.Tensor:
        return torch.as_tensor(self.offsets[np.asarray(env)] + np.asarray(body), dtype=torch.int64)


def exact_signed_distance(meshes: TrueMeshes, ids_a: torch.Tensor, ids_b: torch.Tensor, poses_a: torch.Tensor,
                          poses_b: torch.Tensor, tol: float = SEPARATION_TOL) -> torch.Tensor:
    """(Q,) float64 signed distance (metres) between meshes ids_a at poses_a and ids_b at poses_b
    ((Q, 7) [x, y, z, qw, qx, qy, qz]): the exact surface distance when they do not collide, else
    minus the smallest translation of B, over `separation_directions()`, that separates them (to
    `tol`), an upper bound of the penetration depth."""
    lib = meshes.library
    poses_a, poses_b = poses_a.to(torch.float64).contiguous(), poses_b.to(torch.float64).contiguous()
    signed = mesh_distance(lib, ids_a, ids_b, poses_a, poses_b).distance.clone()
    hit = torch.nonzero(mesh_collide(lib, ids_a, ids_b, poses_a, poses_b)).squeeze(1)
    if hit.numel():
        directions = separation_directions()
        d = len(directions)
        rep = hit.repeat_interleave(d)
        # Any translation longer than the centre distance plus both radii separates the bounding spheres.
        radii = meshes.radius[ids_a[rep]] + meshes.radius[ids_b[rep]]
        reach = (poses_a[rep, :3] - poses_b[rep, :3]).norm(dim=1) + radii
        t = separating_translation(lib, ids_a[rep], ids_b[rep], poses_a[rep], poses_b[rep],
                                   directions.repeat(len(hit), 1), reach + tol, tol)
        signed[hit] = -t.view(len(hit), d).min(1).values
    return signed


@dataclass
class ContactLog:
    """The contact events of one simulator run, in (step, environment) order: per event the body
    pairs in contact, the environment's body poses and optionally the simulator's own contact
    distance (MuJoCo's on the hulls)."""

    steps: list[int] = field(default_factory=list)
    envs: list[int] = field(default_factory=list)
    pairs: list[np.ndarray] = field(default_factory=list)  # (k, 2) int body indices, a < b
    poses: list[torch.Tensor] = field(default_factory=list)  # (B, 7) float64
    own: list[float] = field(default_factory=list)  # the simulator's contact distance of least |.| (m)

    def add(self, step: int, env: int, pairs, poses: torch.Tensor, own: float | None = None) -> None:
        pairs = np.unique(np.sort(np.asarray(pairs, dtype=np.int64).reshape(-1, 2), axis=1), axis=0)
        if len(pairs) == 0:
            raise ValueError("pairs: a contact event needs at least one body pair in contact")
        self.steps.append(int(step))
        self.envs.append(int(env))
        self.pairs.append(pairs)
        self.poses.append(torch.as_tensor(poses, dtype=torch.float64).clone())
        if own is not None:
            self.own.append(float(own))

    def __len__(self) -> int:
        return len(self.steps)


def evenly_spaced(count: int, wanted: int) -> np.ndarray:
    """Indices of `wanted` of `count` events spread evenly from the first to the last (all of them
    when count <= wanted)."""
    if wanted <= 0:
        raise ValueError(f"wanted: expected a positive number of events, got {wanted}")
    if count <= wanted:
        return np.arange(count)
    return np.unique(np.round(np.linspace(0, count - 1, wanted)).astype(np.int64))


def event_values(log: ContactLog, meshes: TrueMeshes, events: np.ndarray) -> np.ndarray:
    """(len(events),) signed distance (m) of the closest body pair in contact at each event (the
    pair of least |sd|; its sign says whether the event penetrates)."""
    owner, ids_a, ids_b, poses_a, poses_b = [], [], [], [], []
    for i, e in enumerate(events):
        pairs, poses = log.pairs[e], log.poses[e]
        owner += [i] * len(pairs)
        ids_a.append(meshes.ids(log.envs[e], pairs[:, 0]))
        ids_b.append(meshes.ids(log.envs[e], pairs[:, 1]))
        poses_a.append(poses[pairs[:, 0]])
        poses_b.append(poses[pairs[:, 1]])
    if not owner:
        return np.zeros(0)
    sd = exact_signed_distance(meshes, torch.cat(ids_a), torch.cat(ids_b), torch.cat(poses_a), torch.cat(poses_b))
    out = np.full(len(events), np.inf)
    for i, value in zip(owner, sd.tolist()):
        if abs(value) < abs(out[i]):
            out[i] = value
    return out


def min_abs_sd_statistics(values) -> dict:
    """LOCC Table II's statistics of min-|sd| values (metres): their average, the average of the
    highest 10% (ceil(n / 10) values: 60 of 600), the maximum; plus their number and, for signed
    values, the fraction that penetrate (sd < 0)."""
    signed = np.asarray(values, dtype=np.float64).reshape(-1)
    if signed.size == 0:
        raise ValueError("values: no contact event to summarise (run more steps or environments)")
    if not np.isfinite(signed).all():
        raise ValueError("values: expected finite distances")
    d = np.sort(np.abs(signed))[::-1]
    top = d[: math.ceil(d.size / 10)]
    return {"events": int(d.size), "average": float(d.mean()), "top10_average": float(top.mean()),
            "maximum": float(d[0]), "penetrating_fraction": float((signed < 0).mean())}


# ---- the two simulators ---------------------------------------------------------------------------


def run_ours(scene_list, steps: int, dt: float, dhat: float) -> ContactLog:
    sim = Stepper(scene_list, dt=dt, dhat=dhat, on_failure="ignore")
    log = ContactLog()
    for step in range(steps):
        sim.step()
        env, a, b, _ = sim.contact_pair_distances()
        poses = sim.poses
        for e in sorted(set(env.tolist())):
            mine = env == e
            log.add(step, e, torch.stack([a[mine], b[mine]], 1).numpy(), poses[e])
        if (step + 1) % 10 == 0:
            print(f"ours: step {step + 1} of {steps}, {len(log)} contact events", flush=True)
    return log


def run_mujoco(scene_list, steps: int, dt: float) -> ContactLog:
    from contactnet.sim.mujoco_export import MujocoScene

    sims = [MujocoScene(s, dt=dt) for s in scene_list]
    log = ContactLog()
    for step in range(steps):
        for e, m in enumerate(sims):
            m.step()
            contacts = m.data.contact[: m.data.ncon]
            if len(contacts) == 0:
                continue
            body = m.model.geom_bodyid  # MuJoCo body i + 1 is scene body i (body 0 is the world)
            pairs = [(int(body[c.geom1]) - 1, int(body[c.geom2]) - 1) for c in contacts]
            log.add(step, e, pairs, m.poses, own=min((float(c.dist) for c in contacts), key=abs))
    return log


def measure(log: ContactLog, meshes: TrueMeshes, wanted: int) -> dict:
    events = evenly_spaced(len(log), wanted)
    values = event_values(log, meshes, events)
    out = {"statistics": min_abs_sd_statistics(values), "values": values.tolist(), "total_events": len(log),
           "steps": [log.steps[e] for e in events], "envs": [log.envs[e] for e in events]}
    if log.own:
        out["own_statistics"] = min_abs_sd_statistics(np.asarray(log.own)[events])
    return out


# ---- outputs ----------------------------------------------------------------------------------------


def table_rows(results: dict) -> list[tuple[str, str, dict]]:
    """(short name, description, statistics) per row: the paper's, ours, MuJoCo's on the true
    meshes, MuJoCo's own contact distance."""
    rows = [(name, "paper", {"average": v[0], "top10_average": v[1], "maximum": v[2], "events": 600})
            for name, v in PAPER_TABLE_II.items()]
    sims = results["simulators"]
    if "ours" in sims:
        rows.append(("ours", f"IPC stepper, exact meshes, d̂ = {1e3 * results['config']['dhat']:g} mm",
                     sims["ours"]["statistics"]))
    if "mujoco" in sims:
        rows.append(("MuJoCo", "convex hulls; true meshes at its poses", sims["mujoco"]["statistics"]))
        rows.append(("MuJoCo (own)", "convex hulls; its own contact distance", sims["mujoco"]["own_statistics"]))
    return rows


def write_table(results: dict, out_dir: Path) -> Path:
    c = results["config"]
    lines = ["# Table II: min-|sd| at contacts, bowl shaking", "", f"machine: {results['machine']}", "",
             f"{c['envs']} environments x {c['steps']} steps of {c['dt']} s; {c['contacts']} contact events wanted "
             "(fewer when the run has fewer).", "",
             "| simulator | what | average (mm) | top-10% average (mm) | maximum (mm) | events | penetrating |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for name, what, s in table_rows(results):
        pen = f"{s['penetrating_fraction']:.2f}" if "penetrating_fraction" in s else "–"
        lines.append(f"| {name} | {what} | {1e3 * s['average']:.3f} | {1e3 * s['top10_average']:.3f} | "
                     f"{1e3 * s['maximum']:.3f} | {s['events']} | {pen} |")
    path = out_dir / "results.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def plot(results: dict, out_dir: Path) -> Path:
    """results.png: the three statistics per row (log scale, mm), and the sorted min-|sd| values of
    each simulator of this run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = table_rows(results)
    fig, (bars, curves) = plt.subplots(1, 2, figsize=(11, 4))
    width = 0.27
    for k, (key, name) in enumerate((("average", "average"), ("top10_average", "top-10% average"),
                                     ("maximum", "maximum"))):
        heights = [1e3 * max(s[key], 1e-6) for _, _, s in rows]  # mm; a floor keeps 0 on the log axis
        bars.bar(np.arange(len(rows)) + (k - 1) * width, heights, width, label=name)
    bars.set_xticks(np.arange(len(rows)), [name for name, _, _ in rows], fontsize=7, rotation=20, ha="right")
    bars.set_yscale("log")
    bars.set_ylabel("min-|sd| (mm)")
    bars.legend(fontsize=7)
    bars.grid(alpha=0.3, axis="y")
    for name, sim in results["simulators"].items():
        values = np.sort(np.abs(sim["values"]))
        curves.plot(np.arange(1, len(values) + 1) / len(values), 1e3 * np.maximum(values, 1e-6), label=name)
    curves.set_yscale("log")
    curves.set_xlabel("fraction of contact events")
    curves.set_ylabel("min-|sd| (mm), sorted")
    curves.grid(alpha=0.3)
    curves.legend(fontsize=7)
    fig.suptitle("Table II: min-|sd| at contacts, bowl shaking", fontsize=10)
    fig.tight_layout()
    path = out_dir / "results.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: 1 environment, 40 steps")
    parser.add_argument("--envs", type=int, default=8, help="bowl scenes (seeds 0 .. envs-1)")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--dt", type=float, default=0.01, help="time step (s) of both simulators")
    parser.add_argument("--dhat", type=float, default=1e-3, help="our stepper's barrier distance d̂ (m)")
    parser.add_argument("--contacts", type=int, default=600, help="contact events kept per simulator")
    parser.add_argument("--no-mujoco", action="store_true", help="only our stepper")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--out-dir", default=None)
    args = parser.parse_args(argv)
    if args.quick:
        args.envs, args.steps = 1, 40
    for name in ("envs", "steps", "contacts"):
        if getattr(args, name) <= 0:
            raise SystemExit(f"--{name}: expected a positive count, got {getattr(args, name)}")
    for name in ("dt", "dhat"):
        if not getattr(args, name) > 0:
            raise SystemExit(f"--{name}: expected a positive value, got {getattr(args, name)}")
    return args


def main(argv=None) -> Path:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    out_dir = Path(args.out_dir or f"outputs/paper/table2{'_quick' if args.quick else ''}")
    scene_list = [scenes.bowl_shake(seed=s) for s in range(args.envs)]
    meshes = TrueMeshes(scene_list)
    config = {k: getattr(args, k) for k in ("envs", "steps", "dt", "dhat", "contacts")}
    results = {"config": config, "machine": machine_info(), "paper": PAPER_TABLE_II, "simulators": {}}
    results["simulators"]["ours"] = measure(run_ours(scene_list, args.steps, args.dt, args.dhat), meshes, args.contacts)
    if not args.no_mujoco:
        try:
            log = run_mujoco(scene_list, args.steps, args.dt)
        except ImportError:
            print("mujoco is not installed: MuJoCo's rows are skipped (pip install mujoco)")
        else:
            results["simulators"]["mujoco"] = measure(log, meshes, args.contacts)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out_dir / "results.json", results)
    table, figure = write_table(results, out_dir), plot(results, out_dir)
    print(table.read_text())
    print(f"wrote {out_dir / 'results.json'}, {table}, {figure}")
    return out_dir


if __name__ == "__main__":
    main()

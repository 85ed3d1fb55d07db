"""The batched stepper against MuJoCo: environment-steps/s for 1 … N environments on the bowl
scene (LOCC §IV-B: a kinematic bowl shaken along x with two procedural objects dropped in) and
Hauser's 10-cube stack, with Newton iterations and contacts per step; then LOCC's Table II
fidelity statistics (min-|sd| at 600 contacts) for both simulators on the bowl scene.

    python -m benchmarks.stepper [--quick] [--envs 1 4 16 64] [--steps 20] [--scenes bowl stack]
                                 [--fidelity-envs 4] [--contacts 600] [--threads N] [--out FILE]
                                 [--fixed-iterations N] [--no-fidelity]

--fixed-iterations N also times the fixed-iteration mode (N Newton iterations per step, no host
syncs; the CUDA-graph-capturable flow) on the same scenes in the same run, next to the adaptive one.

Timing: each environment count is warmed up (the objects land in the bowl, the stack settles),
then `--steps` steps are timed. MuJoCo steps the same scenes (meshes collide as convex hulls),
one MjData per environment in a loop, in the same run. min-|sd| at a contact (LOCC Table II): at
every step where an environment has objects in contact (ours: a primitive pair within d̂; MuJoCo:
an active contact), the smallest exact BVH distance between the touching meshes at that step's
poses — the gap of a false (floating) contact or the depth of a penetration; 0 is ideal.
"""

import argparse
import time

import numpy as np
import torch

from benchmarks.common import print_table, write_json
from contactnet.geometry import MeshLibrary
from contactnet.ops import mesh_distance
from contactnet.sim import Stepper, scenes

PAPER_TABLE_II = {  # metres: average, top-10% average, maximum of min-|sd| over 600 contacts
    "IG-CVXD": (0.0132, 0.0302, 0.0392),
    "IG-CVXH": (0.0709, 0.1266, 0.1286),
    "BRAX-LOCC": (0.0077, 0.0218, 0.0338),
}


def build(name: str, envs: int):
    if name == "bowl":
        return [scenes.bowl_shake(seed=s) for s in range(envs)]
    return [scenes.cube_stack(count=10)] * envs


def time_ours(name: str, envs: int, dt: float, warm: int, steps: int, fixed: int | None = None) -> dict:
    sim = Stepper(build(name, envs), dt=dt, on_failure="ignore", fixed_iterations=fixed)
    for _ in range(warm):
        sim.step()
    iterations, contacts = 0, 0
    start = time.perf_counter()
    for _ in range(steps):
        info = sim.step()
        assert bool((info.min_distance > 0).all()), "penetration"
        iterations += info.iterations
        contacts += float(info.contacts.double().mean())
    elapsed = time.perf_counter() - start
    sim.validate()  # fixed mode: no candidate overflow, nothing non-finite
    return {"env_steps_per_s": envs * steps / elapsed, "newton_iterations": iterations / steps,
            "contacts": contacts / steps}


def time_mujoco(name: str, envs: int, dt: float, warm: int, steps: int) -> dict | None:
    try:
        from contactnet.sim.mujoco_export import MujocoScene
    except ImportError:
        return None
    sims = [MujocoScene(s, dt=dt) for s in build(name, envs)]
    for _ in range(warm):
        for m in sims:
            m.step()
    start = time.perf_counter()
    for _ in range(steps):
        for m in sims:
            m.step()
    elapsed = time.perf_counter() - start
    return {"env_steps_per_s": envs * steps / elapsed,
            "contacts": float(np.mean([m.data.ncon for m in sims]))}


def stats(samples) -> dict:
    d = np.sort(np.abs(np.asarray(samples)))[::-1]
    top = d[: max(1, len(d) // 10)]
    return {"samples": int(len(d)), "average": float(d.mean()), "top10_average": float(top.mean()),
            "maximum": float(d.max())}


def fidelity(envs: int, dt: float, wanted: int, max_steps: int) -> dict:
    """min-|sd| at contacts on the bowl scene, ours and MuJoCo's, until `wanted` samples each."""
    scene_list = build("bowl", envs)
    ours = Stepper(scene_list, dt=dt, on_failure="ignore")
    samples = []
    for _ in range(max_steps):
        ours.step()
        env, _, _, d = ours.contact_pair_distances()
        if env.numel():
            per_env = torch.full((envs,), float("inf"), dtype=d.dtype).scatter_reduce(0, env, d, "amin")
            samples += per_env[torch.isfinite(per_env)].tolist()
        if len(samples) >= wanted:
            break
    result = {"ours": stats(samples[:wanted])}
    try:
        from contactnet.sim.mujoco_export import MujocoScene
    except ImportError:
        return result
    sims = [MujocoScene(s, dt=dt) for s in scene_list]
    libs = [MeshLibrary([b.mesh for b in s.bodies], dtype=torch.float64) for s in scene_list]
    samples, floats = [], []
    for _ in range(max_steps):
        for m, lib in zip(sims, libs):
            m.step()
            touching = {tuple(sorted((int(m.model.geom_bodyid[c.geom1]) - 1, int(m.model.geom_bodyid[c.geom2]) - 1)))
                        for c in m.data.contact[: m.data.ncon]}
            if touching:
                a, b = map(list, zip(*touching))
                p = m.poses
                res = mesh_distance(lib, a, b, p[a], p[b])
                samples.append(float(res.distance.min()))
        if len(samples) >= wanted:
            break
    # how far MuJoCo's objects float above the bowl at the end (exact distance object–bowl)
    for m, lib in zip(sims, libs):
        p = m.poses
        res = mesh_distance(lib, [0, 0], [1, 2], p[[0, 0]], p[[1, 2]])
        floats += res.distance.tolist()
    end = ours.poses
    ours_gap = []
    for e in range(envs):
        res = mesh_distance(ours.library, ours.mesh_id[e, [0, 0]], ours.mesh_id[e, [1, 2]], end[e, [0, 0]], end[e, [1, 2]])
        ours_gap += res.distance.tolist()
    result["mujoco"] = stats(samples[:wanted])
    result["object_bowl_gap_at_end"] = {"ours_mean": float(np.mean(ours_gap)), "ours_max": float(np.max(ours_gap)),
                                        "mujoco_mean": float(np.mean(floats)), "mujoco_max": float(np.max(floats))}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1 and 4 environments, 10 steps, 200 contacts")
    parser.add_argument("--envs", type=int, nargs="+", default=[1, 4, 16, 64])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--dt", type=float, default=0.01)
    parser.add_argument("--scenes", nargs="+", default=["bowl", "stack"], choices=["bowl", "stack"])
    parser.add_argument("--fidelity-envs", type=int, default=4, help="environments for the Table II run")
    parser.add_argument("--contacts", type=int, default=600)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--out", default=None)
    parser.add_argument("--fixed-iterations", type=int, default=None,
                        help="also time the fixed-iteration (host-sync-free) mode with N Newton iterations")
    parser.add_argument("--no-fidelity", action="store_true", help="skip the Table II fidelity run")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.quick:
        args.envs, args.steps, args.contacts = [1, 4], 10, 200
    rows = []
    for name, warm in (("bowl", 40), ("stack", 50)):
        if name not in args.scenes:
            continue
        for envs in args.envs:
            row = {"scene": name, "envs": envs, **time_ours(name, envs, args.dt, warm, args.steps)}
            if args.fixed_iterations:
                fixed = time_ours(name, envs, args.dt, warm, args.steps, args.fixed_iterations)
                row["fixed_env_steps_per_s"] = fixed["env_steps_per_s"]
                row["fixed_vs_adaptive"] = fixed["env_steps_per_s"] / row["env_steps_per_s"]
            mj = time_mujoco(name, envs, args.dt, warm, args.steps)
            if mj:
                row["mujoco_env_steps_per_s"] = mj["env_steps_per_s"]
                row["mujoco_contacts"] = mj["contacts"]
                row["ratio_vs_mujoco"] = row["env_steps_per_s"] / mj["env_steps_per_s"]
            rows.append(row)
            print_table([row], list(row))
            print()
    print_table(rows, ["scene", "envs", "env_steps_per_s", "newton_iterations", "contacts",
                       "mujoco_env_steps_per_s", "ratio_vs_mujoco"]
                + (["fixed_env_steps_per_s", "fixed_vs_adaptive"] if args.fixed_iterations else []))
    if args.no_fidelity:
        path = write_json("stepper", {"args": vars(args), "rows": rows}, args.out)
        print(f"\nwrote {path}")
        return
    fid = fidelity(args.fidelity_envs, args.dt, args.contacts, max_steps=400)
    print("\nmin-|sd| at contacts on the bowl scene (metres; LOCC Table II):")
    table = [{"simulator": k, "average": v[0], "top10_average": v[1], "maximum": v[2], "samples": 600}
             for k, v in PAPER_TABLE_II.items()]
    for k in ("ours", "mujoco"):
        if k in fid:
            table.append({"simulator": k, **fid[k]})
    print_table(table, ["simulator", "average", "top10_average", "maximum", "samples"])
    if "object_bowl_gap_at_end" in fid:
        print("object–bowl gap at the end (m):", fid["object_bowl_gap_at_end"])
    path = write_json("stepper", {"args": vars(args), "rows": rows, "fidelity": fid, "paper_table_ii": PAPER_TABLE_II},
                      args.out)
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()

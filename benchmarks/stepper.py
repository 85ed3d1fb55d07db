"""The batched stepper against MuJoCo: environment-steps/s for 1 … N environments on the bowl
scene (LOCC §IV-B: a kinematic bowl shaken along x with two procedural objects dropped in) and
Hauser's 10-cube stack, with Newton iterations and contacts per step. Fidelity (LOCC Table II,
min-|sd| at contacts next to MuJoCo) is its own command: `python -m benchmarks.paper_table2`.

    python -m benchmarks.stepper [--quick] [--envs 1 4 16 64] [--steps 20] [--scenes bowl stack]
                                 [--threads N] [--out FILE] [--fixed-iterations N]

--fixed-iterations N also times the fixed-iteration mode (N Newton iterations per step, no host
syncs; the CUDA-graph-capturable flow) on the same scenes in the same run, next to the adaptive one.

Timing: each environment count is warmed up (the objects land in the bowl, the stack settles),
then `--steps` steps are timed. MuJoCo steps the same scenes (meshes collide as convex hulls),
one MjData per environment in a loop, in the same run.
"""

import argparse
import time

import numpy as np
import torch

from benchmarks.common import print_table, write_json
from contactnet.sim import Stepper, scenes

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1 and 4 environments, 10 steps")
    parser.add_argument("--envs", type=int, nargs="+", default=[1, 4, 16, 64])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--dt", type=float, default=0.01)
    parser.add_argument("--scenes", nargs="+", default=["bowl", "stack"], choices=["bowl", "stack"])
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--out", default=None)
    parser.add_argument("--fixed-iterations", type=int, default=None,
                        help="also time the fixed-iteration (host-sync-free) mode with N Newton iterations")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.quick:
        args.envs, args.steps = [1, 4], 10
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
    path = write_json("stepper", {"args": vars(args), "rows": rows}, args.out)
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()

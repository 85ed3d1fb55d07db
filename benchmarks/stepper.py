"""The batched stepper against MuJoCo: environment-steps/s for 1 … N environments on the bowl
scene (LOCC §IV-B: a kinematic bowl shaken along x with two procedural objects dropped in) and
Hauser's 10-cube stack, with Newton iterations and contacts per step. Fidelity (LOCC Table II,
min-|sd| at contacts next to MuJoCo) is its own command: `python -m benchmarks.paper_table2`.

    python -m benchmarks.stepper [--quick] [--envs 1 4 16 64] [--steps 20] [--scenes bowl stack]
                                 [--threads N] [--out FILE] [--fixed-iterations N] [--device cuda]

--fixed-iterations N also times the fixed-iteration mode (N Newton iterations per step, no host
syncs; the CUDA-graph-capturable flow) on the same scenes in the same run, next to the adaptive one.

Timing: each environment count is warmed up (the objects land in the bowl, the stack settles),
then ours and MuJoCo (the same scenes, meshes colliding as convex hulls, one MjData per
environment in a loop) each time `--steps` steps in turn, `--rounds` times: figures are medians
over the rounds and the ratio is the median of the rounds' ratios (its range in the JSON), so a
machine whose speed drifts during the run shifts both sides of a round alike.

--device cuda times ours on the GPU (the issue's GPU target: env-steps/s on the bowl at 4096
environments), with no MuJoCo rows (it runs on the CPU, one environment at a time): the adaptive
step, the fixed-iteration step (N = --fixed-iterations, 4 unless given) and that step captured once
in a CUDA graph and replayed. Bowl environments beyond 64 reuse the first 64 seeds' objects
(building thousands of procedural objects would take longer than the timing). `--quick` there
is a smoke run that fits a lent GPU's minutes (`make gpu-check`): 64 environments, 5 timed steps
after the full warm-up. A shorter warm-up would time the objects landing in the bowl (steps 7-20,
up to 100 Newton iterations a step against about 30 once they rest), not the shaking.

--modes picks which of the three steps a device run times (each warms up its own scenes):

    python -m benchmarks.stepper --device cuda --scenes bowl --envs 4096 --steps 5 --rounds 1 \
        --modes fixed graph --profile 3

--profile N (with --device cuda) profiles N eager fixed-iteration steps after each row's timing and
puts the ops that took the most device time (CPU time on the CPU) in the row and the printout:
where a GPU step's time goes, which the graph's small gain over the eager step leaves open.
"""

import argparse
import operator
import time

import numpy as np
import torch

from benchmarks.common import print_table, write_json
from contactnet.sim import Stepper, scenes

GPU_DISTINCT_BOWLS = 64
DEVICE_MODES = ("adaptive", "fixed", "graph")  # --device cuda: the steps timed (graph needs CUDA)


def build(name: str, envs: int, distinct: int | None = None):
    """The scenes of `envs` environments; bowls from `distinct` seeds (all different if None)."""
    if name == "bowl":
        seeds = range(envs if distinct is None else min(envs, distinct))
        bowls = [scenes.bowl_shake(seed=s) for s in seeds]
        return [bowls[e % len(bowls)] for e in range(envs)]
    return [scenes.cube_stack(count=10)] * envs


class Ours:
    """The stepper on a scene, warmed up; `run(steps)` times the next steps."""

    def __init__(self, name: str, envs: int, dt: float, warm: int, fixed: int | None = None, device: str = "cpu"):
        self.envs = envs
        distinct = GPU_DISTINCT_BOWLS if device != "cpu" else None
        self.sim = Stepper(build(name, envs, distinct), dt=dt, on_failure="ignore", fixed_iterations=fixed,
                           device=device)
        for _ in range(warm):
            self.sim.step()

    def run(self, steps: int) -> dict:
        iterations, contacts = 0, 0
        synchronize(self.sim.q.device)
        start = time.perf_counter()
        for _ in range(steps):
            info = self.sim.step()
            assert bool((info.min_distance > 0).all()), "penetration"
            iterations += info.iterations
            contacts += float(info.contacts.double().mean())
        synchronize(self.sim.q.device)
        elapsed = time.perf_counter() - start
        self.sim.validate()  # fixed mode: no candidate overflow, nothing non-finite
        return figures(self.envs, steps, elapsed, iterations / steps, contacts / steps)


class Graphed(Ours):
    """The fixed-iteration step captured once in a CUDA graph; `run(steps)` times its replays."""

    def __init__(self, name: str, envs: int, dt: float, warm: int, fixed: int):
        super().__init__(name, envs, dt, warm, fixed, "cuda")
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):  # library handles are made outside the capture
            self.sim.step()
        torch.cuda.current_stream().wait_stream(stream)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.info = self.sim.step()  # its tensors are rewritten by every replay

    def run(self, steps: int) -> dict:
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(steps):
            self.graph.replay()
        torch.cuda.synchronize()
        elapsed = time.perf_counter() - start
        assert bool((self.info.min_distance > 0).all()), "penetration"
        self.sim.validate()
        return figures(self.envs, steps, elapsed, float(self.info.iterations), float(self.info.contacts.double().mean()))


def figures(envs: int, steps: int, elapsed: float, iterations: float, contacts: float) -> dict:
    """A timed run's row: env-steps/s, and Newton iterations and contacts per step."""
    return {"env_steps_per_s": envs * steps / elapsed, "newton_iterations": iterations, "contacts": contacts}


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class Mujoco:
    """MuJoCo on the same scene (meshes as convex hulls), one MjData per environment in a loop."""

    def __init__(self, name: str, envs: int, dt: float, warm: int):
        from contactnet.sim.mujoco_export import MujocoScene

        self.sims = [MujocoScene(s, dt=dt) for s in build(name, envs)]
        for _ in range(warm):
            for m in self.sims:
                m.step()

    def run(self, steps: int) -> dict:
        start = time.perf_counter()
        for _ in range(steps):
            for m in self.sims:
                m.step()
        elapsed = time.perf_counter() - start
        return {"env_steps_per_s": len(self.sims) * steps / elapsed,
                "contacts": float(np.mean([m.data.ncon for m in self.sims]))}


def mujoco_or_none(name: str, envs: int, dt: float, warm: int) -> Mujoco | None:
    try:
        return Mujoco(name, envs, dt, warm)
    except ImportError:
        return None


def interleaved(runners: dict, steps: int, rounds: int) -> dict[str, list[dict]]:
    """Each runner times `steps` steps in turn, `rounds` times (A B A B …): a machine whose speed
    drifts slows both sides of a round alike, so per-round ratios hold where single runs do not."""
    out = {k: [] for k in runners}
    for _ in range(rounds):
        for k, r in runners.items():
            out[k].append(r.run(steps))
    return out


def median(values) -> float:
    return float(np.median(np.asarray(values, dtype=float)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1 and 4 environments, 10 steps")
    parser.add_argument("--envs", type=int, nargs="+", default=[1, 4, 16, 64])
    parser.add_argument("--steps", type=int, default=20, help="steps per timed round")
    parser.add_argument("--rounds", type=int, default=3,
                        help="rounds of ours / MuJoCo in turn; figures are medians over rounds, the ratio "
                             "the median of the rounds' ratios")
    parser.add_argument("--dt", type=float, default=0.01)
    parser.add_argument("--scenes", nargs="+", default=["bowl", "stack"], choices=["bowl", "stack"])
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--out", default=None)
    parser.add_argument("--fixed-iterations", type=int, default=None,
                        help="also time the fixed-iteration (host-sync-free) mode with N Newton iterations")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                        help="cuda: ours on the GPU (adaptive, fixed-iteration and CUDA-graph rows), no MuJoCo")
    parser.add_argument("--modes", nargs="+", default=list(DEVICE_MODES), choices=DEVICE_MODES,
                        help="with --device cuda: which steps to time (e.g. `fixed graph` skips the adaptive "
                             "step's warm-up at 4096 environments)")
    parser.add_argument("--profile", type=int, default=0,
                        help="with --device cuda: profile this many eager fixed-iteration steps per row (needs the fixed mode)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.device == "cuda":
        return gpu_main(args)
    if args.quick:
        args.envs, args.steps, args.rounds = [1, 4], 10, 2
    rows = []
    for name, warm in (("bowl", 40), ("stack", 50)):
        if name not in args.scenes:
            continue
        for envs in args.envs:
            runners = {"ours": Ours(name, envs, args.dt, warm)}
            if args.fixed_iterations:
                runners["fixed"] = Ours(name, envs, args.dt, warm, args.fixed_iterations)
            mj = mujoco_or_none(name, envs, args.dt, warm)
            if mj:
                runners["mujoco"] = mj
            res = interleaved(runners, args.steps, args.rounds)
            ours = res["ours"]
            row = {"scene": name, "envs": envs, "env_steps_per_s": median([r["env_steps_per_s"] for r in ours]),
                   "newton_iterations": median([r["newton_iterations"] for r in ours]),
                   "contacts": median([r["contacts"] for r in ours])}
            if "fixed" in res:
                row["fixed_env_steps_per_s"] = median([r["env_steps_per_s"] for r in res["fixed"]])
                row["fixed_vs_adaptive"] = median([f["env_steps_per_s"] / o["env_steps_per_s"]
                                                   for f, o in zip(res["fixed"], ours)])
            if "mujoco" in res:
                row["mujoco_env_steps_per_s"] = median([r["env_steps_per_s"] for r in res["mujoco"]])
                row["mujoco_contacts"] = median([r["contacts"] for r in res["mujoco"]])
                ratios = [o["env_steps_per_s"] / m["env_steps_per_s"] for o, m in zip(ours, res["mujoco"])]
                row["ratio_vs_mujoco"] = median(ratios)
                row["ratio_range"] = [min(ratios), max(ratios)]
            rows.append(row)
            print_table([row], list(row))
            print()
    print_table(rows, ["scene", "envs", "env_steps_per_s", "newton_iterations", "contacts",
                       "mujoco_env_steps_per_s", "ratio_vs_mujoco"]
                + (["fixed_env_steps_per_s", "fixed_vs_adaptive"] if args.fixed_iterations else []))
    path = write_json("stepper", {"args": vars(args), "rows": rows}, args.out)
    print(f"\nwrote {path}")


def gpu_main(args, device: str = "cuda") -> None:
    """Ours on the GPU, the modes in turn each round; a mode that fails (say, out of memory) is
    reported in its row with its error and the others still run."""
    if device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch sees no CUDA device")
    warm_steps = {"bowl": 40, "stack": 50}
    if args.quick:
        args.envs, args.steps, args.rounds = [64], 5, 1
    fixed = args.fixed_iterations or 4
    modes = {"adaptive": lambda n, e, w: Ours(n, e, args.dt, w, None, device),
             "fixed": lambda n, e, w: Ours(n, e, args.dt, w, fixed, device)}
    if device == "cuda":
        modes["graph"] = lambda n, e, w: Graphed(n, e, args.dt, w, fixed)
    modes = {name: make for name, make in modes.items() if name in args.modes}
    rows = []
    for name, warm in warm_steps.items():
        if name not in args.scenes:
            continue
        for envs in args.envs:
            row = {"scene": name, "envs": envs, "fixed_iterations": fixed}
            runners, results = {}, {}
            for mode, make in modes.items():
                start = time.perf_counter()
                runners[mode] = attempt(row, mode, lambda: make(name, envs, warm))
                row[f"{mode}_setup_s"] = round(time.perf_counter() - start, 1)
            for _ in range(args.rounds):
                for mode, runner in runners.items():
                    if runner is not None and f"{mode}_error" not in row:
                        results.setdefault(mode, []).append(attempt(row, mode, lambda: runner.run(args.steps)))
            for mode, done in results.items():
                done = [r for r in done if r is not None]
                if done:
                    row[f"{mode}_env_steps_per_s"] = median([r["env_steps_per_s"] for r in done])
                    row[f"{mode}_newton_iterations"] = median([r["newton_iterations"] for r in done])
                    row["contacts"] = median([r["contacts"] for r in done])
            if args.profile and runners.get("fixed") is not None:
                profile = attempt(row, "profile", lambda: profile_steps(runners["fixed"].sim, args.profile))
                if profile is not None:
                    row["profile"] = profile
                    print_table(profile, list(profile[0]))
            del runners
            if device == "cuda":
                torch.cuda.empty_cache()
            rows.append(row)
            print_table([row], [k for k in row if k != "profile"])
            print(flush=True)
    print_table(rows, ["scene", "envs", "adaptive_env_steps_per_s", "fixed_env_steps_per_s",
                       "graph_env_steps_per_s", "adaptive_newton_iterations", "contacts"])
    name = torch.cuda.get_device_name() if device == "cuda" else device
    path = write_json("stepper", {"args": vars(args), "device": name, "rows": rows}, args.out)
    print(f"\nwrote {path}")


def profile_steps(sim: Stepper, steps: int, top: int = 15) -> list[dict]:
    """The `top` ops by self time over `steps` steps of `sim` (device time on a GPU, else CPU time),
    per step, with their share of the total."""
    from torch.profiler import ProfilerActivity, profile

    cuda = sim.q.device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        for _ in range(steps):
            sim.step()
        synchronize(sim.q.device)
    self_time = operator.attrgetter("self_device_time_total" if cuda else "self_cpu_time_total")
    events = prof.key_averages()
    total = sum(self_time(e) for e in events) or 1.0
    ranked = sorted(events, key=self_time, reverse=True)[:top]
    return [{"op": e.key, "calls_per_step": e.count / steps, "self_ms_per_step": self_time(e) / 1e3 / steps,
             "share": self_time(e) / total} for e in ranked]


def attempt(row: dict, mode: str, fn):
    """fn(), or None with the error recorded in the row as f"{mode}_error"."""
    try:
        return fn()
    except Exception as error:  # noqa: BLE001 - reported in the row; the other modes still run
        row[f"{mode}_error"] = f"{type(error).__name__}: {str(error)[:300]}"
        return None


if __name__ == "__main__":
    main()

"""Everything that needs a GPU, in one command (`make gpu-check`), for a machine that has one:

  build        the extension with its CUDA kernels (FORCE_CUDA=1, for this GPU's architecture), then
               a check that the ops have CUDA kernels registered (the CPU-only ones are listed);
  agreement    the CPU-vs-CUDA agreement tests (tests/ops/test_cuda_matches_cpu.py);
  cuda_tests   every other test marked `cuda` (`pytest -m cuda`);
  <benchmark>  each benchmark's GPU rows, briefly (`python -m benchmarks.<name> --quick`, with
               `--device cuda` where the benchmark also has CPU rows and peers).

It writes outputs/gpu_check/gpu_check.json (each step's status, time, pytest summary, and the
benchmarks' results) and gpu_check.log (everything the steps printed). Nothing is installed: a
test module or benchmark that needs a package this machine lacks (a peer such as python-fcl, or
hydra) is skipped with a note naming it, never failed. Without CUDA the whole check is skipped with
a message and exit status 0; `--dry-run` prints the steps without running them.

    python -m benchmarks.gpu_check [--dry-run] [--steps build,agreement,...] [--out outputs/gpu_check]

`--steps` runs a part (a lent machine limits each command's time: the build in one call, the rest
in the next, keeps the built extension in between).

It is also a pytest plugin (`-p benchmarks.gpu_check`): the hook below turns a collection error
caused by a missing third-party package into a skip.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
AGREEMENT = "tests/ops/test_cuda_matches_cpu.py"
OURS = ("contactnet", "tests", "benchmarks")  # a missing module of these is a failure, not a skip
# (step, arguments): the GPU rows of every benchmark that has some, each run as
# `python -m benchmarks.<module>` (the step's name up to a ':'). `--device cuda` leaves out CPU rows
# and peers; inference runs on the GPU whenever there is one. Last, the stepper issue's GPU target
# row (the bowl at 4,096 environments), which may need all of a step's time.
BENCHMARKS = [
    ("triangle_distance", ["--quick", "--device", "cuda"]),
    ("ipc_barrier", ["--quick", "--device", "cuda"]),
    ("data_generation", ["--quick", "--device", "cuda"]),
    ("inference", ["--quick"]),
    ("planning", ["--quick", "--device", "cuda"]),
    ("stepper", ["--quick", "--device", "cuda", "--scenes", "bowl", "--profile", "3"]),
    ("stepper:4096", ["--device", "cuda", "--scenes", "bowl", "--envs", "4096", "--steps", "5", "--rounds", "1",
                      "--modes", "fixed", "graph", "--profile", "3"]),
]
NO_GPU_ROWS = {
    "mesh_contacts": "CPU against CPU peers (Klampt, python-fcl) only; no GPU rows yet",
}
STEPS = ["build", "agreement", "cuda_tests", *(name for name, _ in BENCHMARKS)]


def missing_module(text: str) -> str | None:
    """The third-party package an error output says is not installed (None: none, or ours)."""
    names = re.findall(r"ModuleNotFoundError: No module named '([\w.]+)'", text)
    return next((n for n in names if n.split(".")[0] not in OURS), None)


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector):
    """A test module (or conftest) that imports a missing package: skipped."""
    report = yield
    missing = missing_module(str(report.longrepr)) if report.failed else None
    if missing:
        report.outcome = "skipped"
        report.longrepr = (str(collector.path), 0, f"Skipped: needs {missing!r}, not installed here")
    return report


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """A test (or its fixture) that imports a missing package when it runs: skipped."""
    report = yield
    error = call.excinfo.value if report.failed and call.excinfo is not None else None
    while error is not None and not isinstance(error, ModuleNotFoundError):
        error = error.__cause__  # our ImportError that names the extra, raised from the missing module
    if error is not None and error.name and error.name.split(".")[0] not in OURS:
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0, f"Skipped: needs {error.name!r}, not installed here")
    return report


def cuda_status() -> tuple[bool, str]:
    """(usable, why): torch must see a CUDA device and nvcc must be there to build for it."""
    import torch

    nvcc = shutil.which("nvcc") or (Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "bin" / "nvcc")
    found = "found" if Path(nvcc).exists() else "not found"
    facts = f"torch {torch.__version__}, torch CUDA {torch.version.cuda}, nvcc {found}"
    if torch.version.cuda is None or not torch.cuda.is_available():
        return False, f"torch sees no CUDA device ({facts})"
    if not Path(nvcc).exists():
        return False, f"no nvcc to build the CUDA kernels with ({facts})"
    return True, f"{torch.cuda.get_device_name()} ({facts})"


def result_file(step: str) -> str:
    """The JSON a benchmark step writes (a name safe on any file system)."""
    return step.replace(":", "_") + ".json"


def commands(out: Path) -> dict[str, tuple[list[str], dict]]:
    """Each step's command line and extra environment."""
    py = sys.executable
    pytest_args = [py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "benchmarks.gpu_check",
                   "--continue-on-collection-errors"]
    steps = {
        "build": ([py, "setup.py", "-q", "build_ext", "--inplace"],
                  {"FORCE_CUDA": "1", "MAX_JOBS": str(os.cpu_count() or 1)}),
        "agreement": ([*pytest_args, AGREEMENT], {}),
        "cuda_tests": ([*pytest_args, "-m", "cuda", "--ignore", AGREEMENT, "tests"], {}),
    }
    for name, args in BENCHMARKS:
        module = name.partition(":")[0]
        steps[name] = ([py, "-m", f"benchmarks.{module}", *args, "--out", str(out / result_file(name))], {})
    return steps


def kernels_by_device() -> dict[str, list[str]]:
    """The built extension's contactnet ops with a CUDA kernel, and those with a CPU one only
    (some are CPU-only by design, e.g. the BVH build; the `_device_form` ops, the GPU's form run
    on the CPU for its tests, are left out)."""
    code = ("import torch, contactnet, json; has = torch._C._dispatch_has_kernel_for_dispatch_key; "
            "names = sorted(n for n in torch._C._dispatch_get_all_op_names() if n.startswith('contactnet::')); "
            "print(json.dumps({'cuda': [n for n in names if has(n, 'CUDA')], "
            "'cpu_only': [n for n in names if has(n, 'CPU') and not has(n, 'CUDA') "
            "and not n.endswith('_device_form')]}))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=_env({}), capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(done.stderr[-2000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def _env(extra: dict) -> dict:
    env = {**os.environ, **extra, "PYTHONUNBUFFERED": "1"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    if "FORCE_CUDA" in extra and "TORCH_CUDA_ARCH_LIST" not in os.environ:
        import torch

        major, minor = torch.cuda.get_device_capability()
        env["TORCH_CUDA_ARCH_LIST"] = f"{major}.{minor}"  # this GPU only: a shorter build
    return env


def closing_line(output: str) -> str | None:
    """pytest's closing line, e.g. '12 passed, 3 skipped in 4.1s'."""
    closing = re.compile(r"\b(passed|failed|skipped|error|no tests ran)\b")
    lines = [line.strip("= ") for line in output.splitlines() if closing.search(line)]
    return lines[-1] if lines else None


def run_step(name: str, command: list[str], extra: dict, log, timeout: float) -> dict:
    record = {"step": name, "command": " ".join(command)}
    if name == "agreement" and not (ROOT / AGREEMENT).exists():
        return {**record, "status": "skipped", "note": f"{AGREEMENT} is not in this checkout"}
    log.write(f"\n===== {name}: {record['command']}\n")
    log.flush()
    start = time.perf_counter()
    try:
        done = subprocess.run(command, cwd=ROOT, env=_env(extra), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, timeout=timeout)
        output, code = done.stdout, done.returncode
    except subprocess.TimeoutExpired as error:
        output = error.stdout.decode() if isinstance(error.stdout, bytes) else (error.stdout or "")
        code = None
    record["seconds"] = round(time.perf_counter() - start, 1)
    log.write(output)
    log.flush()
    if code is None:
        return {**record, "status": "failed", "note": f"timed out after {timeout:.0f} s"}
    record["returncode"] = code
    if name in ("agreement", "cuda_tests"):
        record["summary"] = closing_line(output)
        if code == 5:  # pytest: no test selected
            return {**record, "status": "skipped", "note": "no test selected"}
    missing = missing_module(output) if code else None
    if missing and name not in ("agreement", "cuda_tests", "build"):
        return {**record, "status": "skipped", "note": f"needs {missing!r}, not installed here"}
    if code == 0 and name == "build":
        record["kernels"] = kernels = kernels_by_device()
        record["note"] = f"{len(kernels['cuda'])} ops with CUDA kernels, CPU only: {kernels['cpu_only']}"
        if not kernels["cuda"]:
            return {**record, "status": "failed", "note": "built without CUDA kernels"}
    return {**record, "status": "passed" if code == 0 else "failed"}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="print the steps, run nothing")
    parser.add_argument("--steps", default=",".join(STEPS), help=f"comma-separated subset of {STEPS}")
    parser.add_argument("--out", default=str(ROOT / "outputs" / "gpu_check"), help="folder for the JSON and log")
    parser.add_argument("--timeout", type=float, default=900, help="seconds allowed to each step")
    args = parser.parse_args(argv)
    chosen = [s for s in args.steps.split(",") if s]
    unknown = sorted(set(chosen) - set(STEPS))
    if unknown:
        parser.error(f"--steps: unknown {unknown}; expected names from {STEPS}")
    out = Path(args.out)
    plan = {name: step for name, step in commands(out).items() if name in chosen}
    usable, why = cuda_status()
    if args.dry_run or not usable:
        print(f"gpu-check: {'dry run' if args.dry_run else 'skipped: ' + why}; on a CUDA machine it runs, from {ROOT}:")
        for name, (command, extra) in plan.items():
            env = " ".join(f"{k}={v}" for k, v in extra.items())
            print(f"  {name:18s} {env + ' ' if env else ''}{' '.join(command)}")
        for name, note in NO_GPU_ROWS.items():
            print(f"  {name:18s} not run: {note}")
        return 0
    out.mkdir(parents=True, exist_ok=True)
    print(f"gpu-check on {why}; log: {out / 'gpu_check.log'}", flush=True)
    records = []
    with open(out / "gpu_check.log", "w") as log:
        for name, (command, extra) in plan.items():
            record = run_step(name, command, extra, log, args.timeout)
            result = out / result_file(name)
            if name in dict(BENCHMARKS) and record["status"] == "passed" and result.exists():
                record["result"] = json.loads(result.read_text())
            records.append(record)
            detail = record.get("note") or record.get("summary") or ""
            print(f"  {name:18s} {record['status']:8s} {record.get('seconds', 0):7.1f} s  {detail}", flush=True)
            if name == "build" and record["status"] == "failed":
                break  # nothing else can run on a failed build
    records += [{"step": name, "status": "skipped", "note": note} for name, note in NO_GPU_ROWS.items()]
    failed = [r["step"] for r in records if r["status"] == "failed"]
    payload = {"device": why, "passed": not failed, "failed": failed, "steps": records}
    (out / "gpu_check.json").write_text(json.dumps(payload, indent=2))
    print(f"gpu-check: {'passed' if not failed else 'FAILED: ' + ', '.join(failed)}; wrote {out / 'gpu_check.json'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

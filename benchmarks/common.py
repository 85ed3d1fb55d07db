"""Shared benchmark plumbing: best-of-k timing, a printed table, and a JSON record."""

import argparse
import json
import os
import platform
import time
from collections.abc import Callable
from pathlib import Path

import torch

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def best_time(fn: Callable[[], object], repeats: int = 3, warmup: int = 1) -> float:
    """Smallest wall time of `repeats` calls (after `warmup` calls), in seconds."""
    for _ in range(warmup):
        fn()
    return min(wall_time(fn) for _ in range(repeats))


def interleaved_times(ours: Callable[[], object], peer: Callable[[], object], rounds: int = 15,
                      warmup: int = 1) -> tuple[float, float, float]:
    """(median seconds of `ours`, of `peer`, median of the per-round ratios peer / ours), the two
    called alternately `rounds` times after `warmup` calls each: on a shared machine both see the
    same load, so the ratio is steadier than either time."""
    for _ in range(warmup):
        ours()
        peer()
    t_ours, t_peer = [], []
    for _ in range(rounds):
        t_ours.append(wall_time(ours))
        t_peer.append(wall_time(peer))
    ratios = sorted(p / o for o, p in zip(t_ours, t_peer))
    return sorted(t_ours)[rounds // 2], sorted(t_peer)[rounds // 2], ratios[rounds // 2]


def wall_time(fn: Callable[[], object]) -> float:
    """Seconds one call of `fn` takes, with the GPU synchronised before and after."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter() - start


def add_device_option(parser: argparse.ArgumentParser) -> None:
    """`--device cuda`: only the benchmark's CUDA rows (no CPU rows, no peers), as `make gpu-check`
    runs them; `all` (the default): every row, the CUDA ones too when torch sees a GPU."""
    parser.add_argument("--device", choices=("all", "cuda"), default="all",
                        help="cuda: only the CUDA rows, no CPU rows or peers (default: all rows)")


def cuda_only(args: argparse.Namespace) -> bool:
    """Whether `args.device` asks for the CUDA rows alone; a clear exit if no GPU is there."""
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch sees no CUDA device here")
    return args.device == "cuda"


def machine_info() -> dict:
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cpu": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "cuda": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
    }


def print_table(rows: list[dict], columns: list[str]) -> None:
    def fmt(v):
        if isinstance(v, float):
            return f"{v:.3g}"
        return "" if v is None else str(v)

    cells = [[fmt(r.get(c)) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths)))
    print("  ".join("-" * w for w in widths))
    for row in cells:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths)))


def write_json(name: str, payload: dict, out: str | None = None) -> Path:
    """Write atomically to `out` or benchmarks/results/<name>.json; returns the path."""
    path = Path(out) if out else RESULTS_DIR / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps({"benchmark": name, "machine": machine_info(), **payload}, indent=2))
    os.replace(tmp, path)
    return path

"""LOCC Fig. 6: balanced accuracy against collision checks per second for trained networks (LOCC,
Global-OCN), UCF-GJK (swept over CoACD threshold, piece cap and GJK rounds), the same pieces checked
as a CPU library does (PieceGjk, per threshold and piece cap), IS-CD (swept over query points) and
exact `mesh_collide`, on the same pairs and the same device, per test split.

    python -m benchmarks.paper_fig6 --data-root data/procedural_medium \
        --ckpt locc=outputs/.../best.ckpt --ckpt global_ocn=outputs/.../best.ckpt
    python -m benchmarks.paper_fig6 --data-root data/robosuite_real --ckpt locc=... --out-dir outputs/paper/fig6_real
    python -m benchmarks.paper_fig6 --quick --ckpt locc=...        # a smoke run: a few objects and pairs

Writes results.json (every row: method, split, collision_report, checks/s), results.png and
results.md into --out-dir (default outputs/paper/fig6/<data set name>). Rerunning skips the rows
already there (delete results.json to redo them). CoACD decompositions are cached in --cache-dir
(slow the first time: seconds to a minute per object and setting).
"""

import argparse
from pathlib import Path

import torch

from benchmarks.paper_common import (
    CheckerFactory,
    Record,
    add_method_options,
    load_split_pairs,
    method_grid,
    plot_accuracy_speed,
    score,
    write_table,
)
from contactnet.data.dataset import finished_test_splits
from contactnet.data.objects import load_object_set

# The paper's splits first (uniform poses), then this project's near-contact ones.
DEFAULT_SPLITS = ("test_known", "test_unknown", "boundary_known", "boundary_unknown")


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-root", default="data/procedural_medium")
    parser.add_argument("--splits", nargs="*", default=None,
                        help=f"test splits (default: those of {DEFAULT_SPLITS} present)")
    parser.add_argument("--max-pairs", type=int, default=20_000, help="pairs per split (a seeded random subset)")
    parser.add_argument("--max-objects", type=int, default=None, help="only pairs among a split's first K objects")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out-dir", default=None)
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: 3 objects, 48 pairs per split, 2 settings per baseline, 1 timed call")
    add_method_options(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.max_objects, args.max_pairs, args.repeats = args.max_objects or 3, min(args.max_pairs, 48), 1
        args.gjk_thresholds, args.gjk_pieces, args.gjk_iterations = [0.2], [4], [2, 8]
        args.iscd_points = [8, 64]
    return args


def main(argv=None) -> Path:
    args = parse_args(argv)
    root = Path(args.data_root)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    present = finished_test_splits(root)
    splits = args.splits or [s for s in DEFAULT_SPLITS if s in present]
    if not splits:
        raise SystemExit(f"--data-root: {root} has none of the splits {DEFAULT_SPLITS}")
    out_dir = Path(args.out_dir or f"outputs/paper/fig6{'_quick' if args.quick else ''}/{root.name}")
    record = Record(out_dir, {k: v for k, v in vars(args).items()} | {"device": device, "splits": splits})
    objects = load_object_set(root / "objects")
    factory = CheckerFactory(objects, args, device)
    for split in splits:
        pairs = load_split_pairs(root, split, args.max_pairs, args.max_objects, args.seed)
        ids = pairs.object_ids()
        for method in method_grid(args):
            key = f"{split} | {method.label}"
            if key in record.done:
                continue
            row = score(factory.build(method, ids), pairs, device, args.repeats, args.timed_batch)
            record.add(key, {"split": split, "method": method.label, "family": method.family,
                             "params": dict(method.params), "device": device, **row})
            print(f"{split:18s} {method.label:40s} bal.acc {row['balanced_acc']:.3f}  "
                  f"{row['checks_per_second']:10.3g} checks/s  (n {row['n']})", flush=True)
    title = f"Fig. 6: accuracy vs speed on {root.name} ({device})"
    print(f"wrote {write_table(record, 'split', title)}, {plot_accuracy_speed(record, 'split', title)}")
    return out_dir


if __name__ == "__main__":
    main()

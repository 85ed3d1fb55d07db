"""Scale generalisation (LOCC §IV): the unknown objects scaled 0.7 / 1.0 / 1.5 / 2.0×, fresh pairs
labelled exactly at each scale, balanced accuracy (and checks/s) per method and scale.

    python -m benchmarks.paper_scale --data-root data/procedural_medium --ckpt locc=outputs/.../best.ckpt
    python -m benchmarks.paper_scale --quick --ckpt locc=...        # a smoke run

At each scale the unknown objects (those of the `test_unknown` split) are scaled about their
frame origins, and pairs are drawn with the split's own pair spec and the same generator state at
every scale: uniform placement scales B's offset with the objects, so each scale sees the same
configurations, scaled, and the same collision labels (`label_pairs`: exact collision, signed
distance), and its rows differ only by what the scale does to each method. Networks see the scaled point clouds and boxes;
UCF-GJK's pieces are decomposed once at scale 1 and scaled; IS-CD and exact use the scaled meshes.
With --mixed only object B of each pair is scaled: objects of different sizes meet (A at 1×, B
at the scale), which a net cannot pass by normalising a pair's overall size; pairs are drawn per
scale (B's size changes the placement), labelled exactly as above.
Writes results.json / .png / .md into --out-dir (default outputs/paper/scale/<data set name>);
a rerun skips finished rows (pairs are a pure function of the seed, the scale and the object set).
"""

import argparse
from pathlib import Path

import torch

from benchmarks.paper_common import (
    CheckerFactory,
    Pairs,
    joined_object_sets,
    Record,
    add_method_options,
    method_grid,
    plot_accuracy_speed,
    scaled_object_set,
    score,
    write_table,
)
from contactnet.data.dataset import load_manifest
from contactnet.data.objects import load_object_set
from contactnet.data.pairs import PairSpec, label_pairs, sample_pairs
from contactnet.data.seeds import derive_seed

PAPER_SCALES = (0.7, 1.0, 1.5, 2.0)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-root", default="data/procedural_medium")
    parser.add_argument("--split", default="test_unknown", help="the split whose objects and pair spec are used")
    parser.add_argument("--scales", type=float, nargs="*", default=list(PAPER_SCALES))
    parser.add_argument("--max-pairs", type=int, default=10_000, help="pairs per scale")
    parser.add_argument("--max-objects", type=int, default=None, help="only the split's first K objects")
    parser.add_argument("--poses-per-pair", type=int, default=100, help="poses per drawn object pair")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mixed", action="store_true", help="scale object B only (A stays at 1x)")
    parser.add_argument("--out-dir", default=None)
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: scales 0.7 and 2, 3 objects, 48 pairs, 2 settings per baseline")
    add_method_options(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.scales, args.max_objects, args.max_pairs, args.repeats = [0.7, 2.0], args.max_objects or 3, 48, 1
        args.poses_per_pair = 16
        args.gjk_thresholds, args.gjk_pieces, args.gjk_iterations = [0.2], [4], [2, 8]
        args.iscd_points = [8, 64]
    return args


def scaled_pairs(factory: CheckerFactory, object_ids: list[int], pair_spec: PairSpec, count: int,
                 seed: int, b_offset: int = 0) -> Pairs:
    """`count` pairs among `object_ids` of the factory's (scaled) set, labelled exactly: the same
    configurations, scaled, at every scale (the generator's seed does not depend on it). B's id is
    shifted by b_offset (--mixed: B from the scaled copies after the originals)."""
    lib = factory.library()
    g = torch.Generator().manual_seed(derive_seed(seed, "scale"))
    per = pair_spec.poses_per_pair
    objects = torch.tensor(object_ids)
    picks = objects[torch.randint(len(objects), (-(-count // per), 2), generator=g)]
    ids_a, ids_b = (picks[:, k].repeat_interleave(per)[:count] for k in (0, 1))
    ids_b = ids_b + b_offset
    pa, pb, direction, gap = sample_pairs(lib, ids_a, ids_b, pair_spec, g)
    labels = label_pairs(lib, ids_a, ids_b, pa, pb, direction, pair_spec, gap)
    return Pairs(ids_a, ids_b, pa.float().cpu(), pb.float().cpu(), labels["label"].cpu(),
                 labels["signed_distance"].float().cpu())


def main(argv=None) -> Path:
    args = parse_args(argv)
    root = Path(args.data_root)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    spec = load_manifest(root / args.split)["spec"]
    object_ids = sorted(spec["object_ids"])[: args.max_objects or None]
    pair_spec = PairSpec(**{**spec["pairs"], "poses_per_pair": args.poses_per_pair})
    if pair_spec.placement != "uniform":
        raise SystemExit(f"--split: {args.split} places pairs by {pair_spec.placement!r}; pick a uniform test split")
    kind = "scale_mixed" if args.mixed else "scale"
    out_dir = Path(args.out_dir or f"outputs/paper/{kind}{'_quick' if args.quick else ''}/{root.name}")
    record = Record(out_dir, dict(vars(args)) | {"device": device, "object_ids": object_ids})
    objects = load_object_set(root / "objects")
    methods = method_grid(args)
    for scale in args.scales:
        todo = [m for m in methods if f"scale {scale} | {m.label}" not in record.done]
        if not todo:
            continue
        if args.mixed:  # the originals, then their copies at this scale: B is drawn from the copies
            factory = CheckerFactory(joined_object_sets(objects, scaled_object_set(objects, scale)), args, device)
            pairs = scaled_pairs(factory, object_ids, pair_spec, args.max_pairs, args.seed, b_offset=len(objects))
        else:
            factory = CheckerFactory(objects, args, device, scale=scale)
            pairs = scaled_pairs(factory, object_ids, pair_spec, args.max_pairs, args.seed)
        ids = pairs.object_ids()
        for method in todo:
            row = score(factory.build(method, ids), pairs, device, args.repeats, args.timed_batch)
            record.add(f"scale {scale} | {method.label}", {"scale": scale, "method": method.label,
                                                           "family": method.family, "params": dict(method.params),
                                                           "device": device, **row})
            print(f"scale {scale:4.2f}  {method.label:40s} bal.acc {row['balanced_acc']:.3f}  "
                  f"{row['checks_per_second']:10.3g} checks/s  (n {row['n']}, positive rate "
                  f"{row['positive_rate']:.2f})", flush=True)
    what = "B scaled, A at 1x" if args.mixed else "scaled"
    title = f"Scale generalisation: {args.split} objects of {root.name}, {what} ({device})"
    print(f"wrote {write_table(record, 'scale', title)}, {plot_accuracy_speed(record, 'scale', title)}")
    return out_dir


if __name__ == "__main__":
    main()

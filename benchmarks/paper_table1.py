"""LOCC Table I (data efficiency): LOCC and Global-OCN trained on the pairs of 5 / 20 / 50 / 100
training objects, tested on unknown objects; balanced accuracy on the uniform (the paper's) and the
boundary (within 1 cm of contact) unknown splits, the paper's figures beside.

    python -m benchmarks.paper_table1                     # paper scale (GPU): 0.1 M training samples per row
    python -m benchmarks.paper_table1 --cpu               # CPU scale: 192 pairs x 200 poses per row, 6 epochs
    python -m benchmarks.paper_table1 --quick             # smoke run: procedural_tiny, 2 / 4 objects, 1 epoch

Every row has the same number of training samples (object pairs x poses): only the number of
objects they are drawn among changes, as in the paper ("for each number of objects, we collect
0.1 million object pairs and poses"). A row's objects are spread over the known families (a
seeded order taken family by family: 5 objects come from 5 families; the rows' sets are nested,
5 within 20 within 50 ...), and its train / val / test_known pairs are drawn among them with the
data config's own pair settings (placement, sigma, nested fraction) and labelled exactly. The
unknown test splits are the base data set's (the same pairs in every row). The base data set
(`--data`, under `--data-dir`) gets its objects and those splits generated if missing.

Each cell is `python train.py +experiment=data_efficiency model=<m> datamodule.root=<row data>`
(composed and run in this process, one cell at a time; the command is printed), trained for
`--epochs` on the row's data, tested on every split of the row; its metrics.json is collected into
results.json, results.md and results.png in --out-dir (default outputs/paper/table1[_cpu|_quick]/<data>).
Rerunning skips finished cells; a record made with other training data or epochs is refused.
"""

import argparse
import math
import os
import statistics
from dataclasses import replace
from pathlib import Path

from benchmarks.paper_common import Record

REPO = Path(__file__).resolve().parents[1]
CONF = REPO / "conf"

PAPER_COUNTS = (5, 20, 50, 100)
# LOCC Table I: accuracy (mean, std) on the unknown objects per number of training objects.
PAPER_TABLE_I = {
    "global_ocn": {5: (0.67, 0.02), 20: (0.83, 0.03), 50: (0.92, 0.02), 100: (0.93, 0.01)},
    "locc": {5: (0.77, 0.02), 20: (0.90, 0.02), 50: (0.93, 0.01), 100: (0.93, 0.01)},
}
# The two unknown-object test splits every row is scored on (column name, split).
EVAL_SPLITS = (("uniform", "test_unknown"), ("boundary", "boundary_unknown"))
KNOWN_SPLIT = "test_known"
PAIRS_PER_SHARD = 64

# Per mode: data config, object counts, training object pairs x poses per row, epochs, pairs in
# the row's val and test_known splits, extra train.py overrides.
MODES = {
    "paper": dict(data="procedural_medium", counts=PAPER_COUNTS, train_pairs=1000, poses_per_pair=100, epochs=20,
                  eval_pairs=64, overrides=()),
    "cpu": dict(data="procedural_medium", counts=PAPER_COUNTS, train_pairs=192, poses_per_pair=200, epochs=6,
                eval_pairs=16, overrides=()),
    "quick": dict(data="procedural_tiny", counts=(2, 4), train_pairs=8, poses_per_pair=16, epochs=1, eval_pairs=2,
                  overrides=("model.net.encoder.hidden=16", "model.net.encoder.features=8",
                             "model.net.encoder.channels=8", "model.net.head_hidden=16",
                             "datamodule.groups_per_batch=2")),
}


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--cpu", action="store_true", help="CPU scale: fewer training pairs than the paper")
    mode.add_argument("--quick", action="store_true", help="smoke run on procedural_tiny (a couple of minutes)")
    parser.add_argument("--data", default=None, help="the data config (conf/data) of the objects and unknown tests")
    parser.add_argument("--data-dir", default="data", help="where the base data set lives (or is generated)")
    parser.add_argument("--models", nargs="+", default=["locc", "global_ocn"], help="model configs (conf/model)")
    parser.add_argument("--counts", type=int, nargs="+", default=None, help="numbers of training objects")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0],
                        help="one row data set and training run per seed; cells report mean ± std over them")
    parser.add_argument("--train-pairs", type=int, default=None, help="training object pairs per row")
    parser.add_argument("--poses-per-pair", type=int, default=None, help="training poses per object pair")
    parser.add_argument("--eval-pairs", type=int, default=None, help="object pairs of a row's val and test_known")
    parser.add_argument("--epochs", type=int, default=None)
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="extra train.py override for every cell (repeatable), e.g. trainer=gpu")
    parser.add_argument("--out-dir", default=None)
    args = parser.parse_args(argv)
    args.mode = "quick" if args.quick else "cpu" if args.cpu else "paper"
    for key, value in MODES[args.mode].items():
        if getattr(args, key, None) is None:
            setattr(args, key, value)
    args.overrides = [*MODES[args.mode]["overrides"], *args.override]
    for name in ("train_pairs", "poses_per_pair", "eval_pairs", "epochs"):
        if getattr(args, name) <= 0:
            raise SystemExit(f"--{name.replace('_', '-')}: expected a positive count, got {getattr(args, name)}")
    if any(n <= 0 for n in args.counts):
        raise SystemExit(f"--counts: expected positive numbers of objects, got {args.counts}")
    return args


# ---- a row's data set --------------------------------------------------------------------------


def pick_objects(known: list[int], families: list[str], count: int, seed: int) -> list[int]:
    """`count` of the `known` object ids spread over their families: each family's objects and the
    families themselves in a seeded order, taken one per family in turn. The picks of a seed are
    prefixes of one sequence, so smaller rows' objects are among larger rows'."""
    import numpy as np

    if not 0 < count <= len(known):
        raise ValueError(f"count: expected 1..{len(known)} (known objects), got {count}")
    rng = np.random.default_rng(seed)
    by_family: dict[str, list[int]] = {}
    for i in known:
        by_family.setdefault(families[i], []).append(i)
    queues = [list(rng.permutation(by_family[f])) for f in rng.permutation(sorted(by_family))]
    order = [int(q[k]) for k in range(max(map(len, queues))) for q in queues if k < len(q)]
    return order[:count]


def compose_data(name: str):
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose("train", overrides=[f"data={name}"]).data


def prepare_base(data_cfg, base: Path) -> None:
    """The base data set's objects and unknown test splits (generated, or resumed, if missing)."""
    from contactnet.data.generate import generate

    for _, split in EVAL_SPLITS:
        if not (base / split / "manifest.json").exists():
            generate(data_cfg, base, split=split, progress=False)


def row_dataset(data_cfg, base: Path, objects, ids: dict, lib, count: int, seed: int, args, root: Path) -> Path:
    """The data set of one row in `root`: links to the base objects and unknown test splits, and
    train / val / test_known pairs among `count` known objects (`pick_objects`) drawn with the data
    config's settings for those splits; training pairs rounded up to whole shards of 64."""
    from contactnet.data.dataset import generate_shards, write_manifest
    from contactnet.data.generate import split_spec
    from contactnet.data.seeds import derive_seed

    chosen = pick_objects(ids["known"], objects.families, count, seed)
    picked = set(chosen)
    inner = [i for i, o in enumerate(objects.inner_of or []) if o in picked]
    row_ids = {**ids, "known": chosen, "known_inner": inner}
    root.mkdir(parents=True, exist_ok=True)
    for name in ("objects", *(split for _, split in EVAL_SPLITS)):
        link = root / name
        if not link.exists():
            os.symlink((base / name).resolve(), link, target_is_directory=True)
    table = {"root": str((base / "objects").resolve()), "names": objects.names, "families": objects.families,
             "known": chosen, "unknown": ids["unknown"]}
    for split, pairs, poses in (("train", args.train_pairs, args.poses_per_pair),
                                ("val", args.eval_pairs, None), (KNOWN_SPLIT, args.eval_pairs, None)):
        spec = split_spec(data_cfg, split, row_ids)
        per_shard = min(pairs, PAIRS_PER_SHARD)
        spec = replace(spec, pairs_per_shard=per_shard, num_shards=math.ceil(pairs / per_shard),
                       seed=derive_seed(spec.seed, "table1", count, seed),
                       pairs=replace(spec.pairs, poses_per_pair=poses or spec.pairs.poses_per_pair))
        generate_shards(lib, spec, root / split, progress=False)  # refuses a folder of another spec
        if not (root / split / "manifest.json").exists():
            write_manifest(root / split, spec, table)
    return root


# ---- a cell: one training run --------------------------------------------------------------------


def cell_overrides(model: str, row_root: Path, seed: int, args) -> list[str]:
    """train.py's overrides for one cell (paths quoted for Hydra's grammar)."""
    if "'" in str(row_root):
        raise SystemExit(f"--out-dir: {row_root} contains a quote, which Hydra overrides cannot carry")
    return ["+experiment=data_efficiency", f"model={model}", f"datamodule.root='{row_root}'", f"seed={seed}",
            f"trainer.max_epochs={args.epochs}", *args.overrides]


def train_cell(overrides: list[str], run_dir: Path) -> None:
    """`python train.py <overrides>` with its outputs in `run_dir`, run in this process."""
    from hydra import compose, initialize_config_dir
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import open_dict

    from contactnet.training.train import train

    if "'" in str(run_dir):
        raise SystemExit(f"--out-dir: {run_dir} contains a quote, which Hydra overrides cannot carry")
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("train", return_hydra_config=True,
                      overrides=[*overrides, f"paths.output_dir='{run_dir}'", f"paths.root_dir='{REPO}'"])
    HydraConfig().set_config(cfg)  # what @hydra.main does: ${hydra:...} resolves
    with open_dict(cfg):
        del cfg.hydra
    train(cfg)


def cell_row(run_dir: Path) -> dict:
    """A finished run's scores from its metrics.json: per test split (the unknown ones and the
    row's known split) balanced accuracy, accuracy, TPR, TNR and the number of pairs."""
    import json

    path = run_dir / "metrics.json"
    if not path.exists():
        raise FileNotFoundError(f"run_dir: {run_dir} has no metrics.json (the run did not finish)")
    reports = json.loads(path.read_text())["reports"]
    splits = [split for _, split in EVAL_SPLITS] + [KNOWN_SPLIT]
    missing = [s for s in splits if s not in reports]
    if missing:
        raise ValueError(f"run_dir: {path} has no test report for {missing}")
    return {s: {k: reports[s][k] for k in ("balanced_acc", "acc", "tpr", "tnr", "n")} for s in splits}


# ---- the table ----------------------------------------------------------------------------------


def summarize(rows: list[dict]) -> list[dict]:
    """One entry per (model, objects): mean and std over seeds of every split's balanced accuracy
    and accuracy (std 0 for one seed)."""
    cells: dict[tuple[str, int], list[dict]] = {}
    for r in rows:
        cells.setdefault((r["model"], r["objects"]), []).append(r)
    out = []
    for (model, count), runs in sorted(cells.items()):
        entry = {"model": model, "objects": count, "seeds": sorted(r["seed"] for r in runs)}
        for split in [s for _, s in EVAL_SPLITS] + [KNOWN_SPLIT]:
            for metric in ("balanced_acc", "acc"):
                values = [r[split][metric] for r in runs]
                entry[f"{split}/{metric}"] = (statistics.fmean(values),
                                              statistics.stdev(values) if len(values) > 1 else 0.0)
        out.append(entry)
    return out


def _cell(mean_std) -> str:
    if mean_std is None:
        return "–"
    mean, std = mean_std
    return f"{mean:.3f} ± {std:.3f}" if std else f"{mean:.3f}"


def write_table(record: Record, title: str) -> Path:
    """results.md: balanced accuracy on the unknown splits (and accuracy on the uniform one, the
    paper's metric) per model and number of objects, the paper's rows beside."""
    summary = {(s["model"], s["objects"]): s for s in summarize(record.data["rows"])}
    counts = sorted({n for _, n in summary} | set(PAPER_COUNTS))
    models = list(dict.fromkeys(m for m, _ in summary))
    head = "| | " + " | ".join(f"{n} objects" for n in counts) + " |"
    rule = "| --- |" + " ---: |" * len(counts)
    config = record.data["config"]
    lines = [f"# {title}", "", f"machine: {record.data['machine']}", "",
             f"Training data per row: {config['train_pairs']} object pairs x {config['poses_per_pair']} poses, "
             f"{config['epochs']} epochs; seeds {config['seeds']}.", ""]
    sections = [(f"{column} unknown ({split}), balanced accuracy", f"{split}/balanced_acc")
                for column, split in EVAL_SPLITS]
    sections.append(("uniform unknown, accuracy (the paper's metric), with the paper's Table I",
                     f"{EVAL_SPLITS[0][1]}/acc"))
    for heading, key in sections:
        lines += [f"## {heading}", "", head, rule]
        for m in models:
            lines.append(f"| {m} | " + " | ".join(_cell(summary.get((m, n), {}).get(key)) for n in counts) + " |")
        if key.endswith("/acc"):
            for m, paper in PAPER_TABLE_I.items():
                lines.append(f"| paper: {m} | " + " | ".join(_cell(paper.get(n)) for n in counts) + " |")
        lines.append("")
    path = record.out_dir / "results.md"
    path.write_text("\n".join(lines))
    return path


def plot(record: Record, title: str) -> Path:
    """results.png: accuracy against the number of training objects per model; balanced accuracy
    on the uniform (solid) and boundary (dashed) unknown splits, the paper's accuracy dotted."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary = summarize(record.data["rows"])
    fig, ax = plt.subplots(figsize=(5.5, 4))
    for i, model in enumerate(dict.fromkeys(s["model"] for s in summary)):
        mine = [s for s in summary if s["model"] == model]
        colour = f"C{i}"
        for (column, split), style in zip(EVAL_SPLITS, ("o-", "s--")):
            means, stds = zip(*(s[f"{split}/balanced_acc"] for s in mine))
            ax.errorbar([s["objects"] for s in mine], means, yerr=stds, fmt=style, color=colour, capsize=3,
                        label=f"{model}, {column}")
        if model in PAPER_TABLE_I:
            counts = sorted(PAPER_TABLE_I[model])
            ax.errorbar(counts, [PAPER_TABLE_I[model][n][0] for n in counts],
                        yerr=[PAPER_TABLE_I[model][n][1] for n in counts], fmt="^:", color=colour, alpha=0.6,
                        capsize=3, label=f"{model}, paper (accuracy)")
    ax.set_xscale("log")
    ax.set_xlabel("training objects")
    ax.set_ylabel("balanced accuracy on unknown objects")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path = record.out_dir / "results.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main(argv=None) -> Path:
    args = parse_args(argv)
    from contactnet.data.generate import object_library, resolve_device, split_objects
    from contactnet.data.objects import load_object_set

    base = Path(args.data_dir) / args.data
    out_dir = Path(args.out_dir or f"outputs/paper/table1{'' if args.mode == 'paper' else '_' + args.mode}/{args.data}")
    config = {k: getattr(args, k) for k in ("mode", "data", "models", "counts", "seeds", "train_pairs",
                                            "poses_per_pair", "eval_pairs", "epochs", "overrides")}
    config["data_root"] = str(base.resolve())
    record = Record(out_dir, config)
    record.data["paper"] = {m: {str(n): list(v) for n, v in cells.items()} for m, cells in PAPER_TABLE_I.items()}
    record.save()
    cells = [(seed, n, m) for seed in args.seeds for n in args.counts for m in args.models
             if f"{m} | {n} | {seed}" not in record.done]
    run_dir = {cell: out_dir.resolve() / "runs" / f"{cell[2]}_n{cell[1]}_s{cell[0]}" for cell in cells}
    if any(not (run_dir[cell] / "metrics.json").exists() for cell in cells):  # some cell still to train
        data_cfg = compose_data(args.data)
        prepare_base(data_cfg, base)
        objects = load_object_set(base / "objects")
        ids = split_objects(objects, data_cfg.unknown_families)
        lib = object_library(objects, resolve_device("auto"))  # labels on the GPU when there is one
    for cell in cells:
        seed, count, model = cell
        if not (run_dir[cell] / "metrics.json").exists():
            row_root = row_dataset(data_cfg, base, objects, ids, lib, count, seed, args,
                                   out_dir.resolve() / "data" / f"s{seed}_n{count}")
            overrides = cell_overrides(model, row_root, seed, args)
            print(f"python train.py {' '.join(overrides)} hydra.run.dir='{run_dir[cell]}'", flush=True)
            train_cell(overrides, run_dir[cell])
        row = cell_row(run_dir[cell])
        record.add(f"{model} | {count} | {seed}", {"model": model, "objects": count, "seed": seed,
                                                   "run_dir": str(run_dir[cell]), **row})
        print(f"{model:12s} {count:4d} objects  seed {seed}  " + "  ".join(
            f"{column} {row[split]['balanced_acc']:.3f}" for column, split in EVAL_SPLITS), flush=True)
    title = f"Table I: data efficiency on {args.data} ({args.mode} mode)"
    print(f"wrote {write_table(record, title)}, {plot(record, title)}")
    print((out_dir / "results.md").read_text())
    return out_dir


if __name__ == "__main__":
    main()

"""The data-efficiency table (LOCC paper, Table I) from a Hydra multirun of train.py: one row per
model, one column per number of training objects, known / unknown test accuracy in each cell."""

import csv
import json
from pathlib import Path

import yaml
from hydra.experimental.callback import Callback

from contactnet.data.datamodule import UNIFORM_TEST_SPLITS


def collect(sweep_dir: Path) -> list[dict]:
    known, unknown = UNIFORM_TEST_SPLITS
    rows = []
    for job in sorted(p for p in sweep_dir.iterdir() if (p / "metrics.json").exists()):
        overrides = dict(o.split("=", 1) for o in yaml.safe_load((job / ".hydra" / "overrides.yaml").read_text()))
        metrics = json.loads((job / "metrics.json").read_text())["metrics"]
        rows.append({"model": overrides.get("model", "locc"), "train_objects": int(overrides.get("train_objects", 0)),
                     "known_acc": metrics.get(f"{known}/acc"), "unknown_acc": metrics.get(f"{unknown}/acc")})
    return rows


def write_table(sweep_dir: Path, rows: list[dict]) -> str:
    counts = sorted({r["train_objects"] for r in rows})
    models = sorted({r["model"] for r in rows})
    cell = {(r["model"], r["train_objects"]): r for r in rows}
    lines = ["| model | " + " | ".join(f"{n} objects (known / unknown)" for n in counts) + " |",
             "|---|" + "---|" * len(counts)]
    for m in models:
        values = [cell.get((m, n)) for n in counts]
        lines.append(f"| {m} | " + " | ".join(
            "—" if v is None else f"{100 * v['known_acc']:.1f}% / {100 * v['unknown_acc']:.1f}%" for v in values) + " |")
    table = "\n".join(lines) + "\n"
    (sweep_dir / "table.md").write_text(table)
    with open(sweep_dir / "table.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, ["model", "train_objects", "known_acc", "unknown_acc"])
        writer.writeheader()
        writer.writerows(rows)
    return table


class DataEfficiencyTable(Callback):
    def on_multirun_end(self, config, **kwargs) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        print(write_table(sweep_dir, collect(sweep_dir)))

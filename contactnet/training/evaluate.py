"""Score a trained network on generated test sets (the work of `python eval.py`)."""

import json
from pathlib import Path

import torch

from contactnet.data.datamodule import PairGroups
from contactnet.data.objects import load_object_set
from contactnet.models import load_model
from contactnet.training.module import collision_metrics, group_logits


@torch.no_grad()
def evaluate(ckpt_path: str, data_root: str, splits=("test_known", "test_unknown"), groups_per_batch: int = 16,
             device: str | None = None, clouds: str = "full") -> dict[str, dict[str, float]]:
    """Collision metrics of the checkpoint per split. clouds: "full" surface samples, or
    "single_view": each object as one cached depth view sees it (the same views for every model;
    built once in `<data_root>/objects/partial/` if missing), to compare both on the same pairs."""
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    net = load_model(ckpt_path, map_location=device)
    objects = load_object_set(Path(data_root) / "objects")
    results = {}
    for split in splits:
        metrics = collision_metrics().to(device)
        groups = PairGroups(Path(data_root) / split, objects, clouds=clouds)
        loader = torch.utils.data.DataLoader(groups, batch_size=groups_per_batch)
        for batch in loader:
            batch = {k: v.to(device) for k, v in batch.items()}
            logits, _ = group_logits(net, batch)
            metrics.update(torch.sigmoid(logits).flatten(), batch["label"].flatten().long())
        results[split] = {k: float(v) for k, v in metrics.compute().items()}
    return results


def write_results(results: dict, out: str | Path) -> None:
    Path(out).write_text(json.dumps(results, indent=2))

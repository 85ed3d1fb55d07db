"""`train(cfg)`: the body of `python train.py`, callable from tests and notebooks.

Generates the dataset if it is missing, fits the model (checkpoints: best by val AP, and last),
tests the best checkpoint on every test split (uniform poses, boundary and nested placements,
known and unknown objects), and prints per split the balanced accuracy, accuracy, TPR, TNR, AP,
ECE and the accuracy per band of true signed distance, next to two trivial baselines (majority
class; "bounding boxes overlap"); all of it also goes to `metrics.json`. Last, it chooses the
certified hybrid's thresholds on the validation split and stores them in the best checkpoint
(`calibrate_checkpoint`).
"""

from pathlib import Path

import hydra
import lightning as L
import torch
from omegaconf import DictConfig, OmegaConf

from contactnet.data.generate import generate
from contactnet.data.storage import write_json_atomic
from contactnet.geometry.boxes import boxes_overlap
from contactnet.training.evaluate import calibrate_checkpoint
from contactnet.training.metrics import collision_report, format_reports


def baseline_reports(datamodule) -> dict[str, dict]:
    """Per test split: the best constant answer ("majority": its accuracy; balanced accuracy 0.5
    by definition) and `collision_report` of "colliding iff the oriented bounding boxes overlap"."""
    out = {}
    for name, loader in zip(datamodule.test_splits, datamodule.test_dataloader()):
        labels, boxes, distances = [], [], []
        for batch in loader:
            labels.append(batch["label"].flatten().bool())
            boxes.append(boxes_overlap(batch["aabb_a"][:, None], batch["aabb_b"][:, None], batch["poses_a"],
                                       batch["poses_b"]).flatten())
            distances.append(batch["signed_distance"].flatten())
        label = torch.cat(labels)
        rate = label.double().mean().item()
        out[name] = {"majority": {"acc": max(rate, 1 - rate), "balanced_acc": 0.5},
                     "boxes_overlap": collision_report(torch.cat(boxes).double(), label, torch.cat(distances))}
    return out


def train(cfg: DictConfig) -> dict:
    L.seed_everything(cfg.seed, workers=True)
    if cfg.generate_data:
        generate(cfg.data, cfg.datamodule.root, workers=cfg.get("generate_workers", 1))
    datamodule = hydra.utils.instantiate(cfg.datamodule)
    model = hydra.utils.instantiate(cfg.model)
    # Set after instantiation: passed through instantiate, this `_target_` dict would be built.
    model.net_config = OmegaConf.to_container(cfg.model.net, resolve=True)
    callbacks = [hydra.utils.instantiate(c) for c in (cfg.get("callbacks") or {}).values()]
    loggers = [hydra.utils.instantiate(c) for c in (cfg.get("logger") or {}).values()]
    trainer = hydra.utils.instantiate(cfg.trainer, callbacks=callbacks, logger=loggers or False)
    # weights_only=True: Lightning reads `ckpt_path` with the restricted torch.load that
    # contactnet.models.load_model uses, so resuming from a crafted file cannot run code. Explicit,
    # because torch's default yields to the TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD environment variable.
    trainer.fit(model, datamodule, ckpt_path=cfg.ckpt_path, weights_only=True)
    # The checkpoint callback that keeps the best epoch (the other one keeps the latest, last.ckpt).
    checkpoint = next((c for c in callbacks if isinstance(c, L.pytorch.callbacks.ModelCheckpoint) and c.monitor), None)
    best = checkpoint.best_model_path if checkpoint is not None and checkpoint.best_model_path else None
    tested = trainer.test(model, datamodule, ckpt_path=best, verbose=False, weights_only=True)
    metrics = {k: float(v) for result in tested for k, v in result.items()}
    results = {"metrics": metrics, "reports": model.test_reports, "baselines": baseline_reports(datamodule),
               "best_checkpoint": best}
    if trainer.is_global_zero:
        print("\n" + format_reports(results["reports"], results["baselines"]))
        print(f"best checkpoint: {best}")
        if best and (Path(cfg.datamodule.root) / "val").is_dir():
            results["hybrid_tau"] = calibrate_checkpoint(best, cfg.datamodule.root,
                                                         device=str(trainer.strategy.root_device))
            print("hybrid thresholds stored in it (validation split; CollisionChecker.from_checkpoint(path, world, "
                  "backend='hybrid') reads them): " + "; ".join(
                      f"frames {e['frames']}, max_error {e['max_error']}: tau {e['tau']:.3g}, defers "
                      f"{e['deferred']:.0%}" for e in results["hybrid_tau"]))
        out = Path(cfg.paths.output_dir)
        out.mkdir(parents=True, exist_ok=True)
        write_json_atomic(out / "metrics.json", results)
    return results

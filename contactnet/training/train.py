"""`train(cfg)`: the body of `python train.py`, callable from tests and notebooks.

Generates the dataset if it is missing, fits the model (checkpoints: best by val AP, and last),
tests the best checkpoint on the known- and unknown-object test sets, and prints the accuracies
next to two trivial baselines (majority class; "bounding boxes overlap").
"""

import json
from pathlib import Path

import hydra
import lightning as L
import torch
from omegaconf import DictConfig, OmegaConf

from contactnet.data.generate import generate
from contactnet.geometry.boxes import boxes_overlap
from contactnet.training.module import TEST_SETS


def baseline_accuracies(datamodule) -> dict[str, dict[str, float]]:
    """Per test set: the best constant answer ("majority class" of that set) and "colliding iff
    the oriented bounding boxes overlap"."""
    out = {}
    for name, loader in zip(TEST_SETS, datamodule.test_dataloader()):
        positives = hits_boxes = total = 0
        for batch in loader:
            label = batch["label"].bool()
            boxes = boxes_overlap(batch["aabb_a"][:, None], batch["aabb_b"][:, None], batch["poses_a"], batch["poses_b"])
            positives += int(label.sum())
            hits_boxes += int((label == boxes).sum())
            total += label.numel()
        out[name] = {"majority": max(positives, total - positives) / total, "boxes_overlap": hits_boxes / total}
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
    trainer.fit(model, datamodule, ckpt_path=cfg.ckpt_path)
    checkpoint = next((c for c in callbacks if isinstance(c, L.pytorch.callbacks.ModelCheckpoint)), None)
    best = checkpoint.best_model_path if checkpoint is not None and checkpoint.best_model_path else None
    tested = trainer.test(model, datamodule, ckpt_path=best, verbose=False)
    metrics = {k: float(v) for result in tested for k, v in result.items()}
    results = {"metrics": metrics, "baselines": baseline_accuracies(datamodule), "best_checkpoint": best}
    if trainer.is_global_zero:
        _report(results)
        out = Path(cfg.paths.output_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / "metrics.json").write_text(json.dumps(results, indent=2))
    return results


def _report(results: dict) -> None:
    print("\ntest accuracy      model   majority  boxes-overlap")
    for name in TEST_SETS:
        b = results["baselines"][name]
        print(f"  {name:15s}  {results['metrics'].get(f'{name}/acc', float('nan')):.3f}   "
              f"{b['majority']:.3f}     {b['boxes_overlap']:.3f}")
    print(f"best checkpoint: {results['best_checkpoint']}")

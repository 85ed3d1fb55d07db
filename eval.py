"""Score any checkpoint on any generated test set:

    python eval.py ckpt_path=outputs/quickstart/<run>/checkpoints/best.ckpt
    python eval.py ckpt_path=... data=procedural_medium splits=[test_unknown] out=scores.json
    python eval.py ckpt_path=... clouds=single_view    # each object as one depth view sees it
"""

import hydra
from omegaconf import DictConfig

from contactnet.training.evaluate import evaluate, write_results


@hydra.main(version_base="1.3", config_path="conf", config_name="eval")
def main(cfg: DictConfig) -> None:
    results = evaluate(cfg.ckpt_path, cfg.data_root, splits=list(cfg.splits), groups_per_batch=cfg.groups_per_batch,
                       clouds=cfg.clouds)
    for split, metrics in results.items():
        print(split, "  ".join(f"{k}={v:.4f}" for k, v in sorted(metrics.items())))
    if cfg.out:
        write_results(results, cfg.out)


if __name__ == "__main__":
    main()

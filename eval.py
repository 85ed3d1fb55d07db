"""Score any checkpoint on any generated test set:

    python eval.py ckpt_path=outputs/quickstart/<run>/checkpoints/best.ckpt        # every test split
    python eval.py ckpt_path=... data=procedural_medium splits=[boundary_unknown] out=scores.json
    python eval.py ckpt_path=... hybrid_max_error=0.001      # + the certified hybrid, tau from val
    python eval.py ckpt_path=... clouds=single_view          # each object as one depth view sees it
    python eval.py ckpt_path=... clouds=two_views            # two depth views of each object, fused
    python eval.py ckpt_path=... clouds=single_view completion=outputs/completion/net.pt  # views completed
    python eval.py ckpt_path=... frames=4                    # logits averaged over 4 frames per object
    python eval.py ckpt_path=... containment=true            # the containment test on a net trained without it

Prints per split the balanced accuracy, accuracy, TPR, TNR, AP, ECE and the accuracy per band of
true signed distance; `out` writes the same as JSON.
"""

import hydra
from omegaconf import DictConfig

from contactnet.training.evaluate import evaluate, write_results
from contactnet.training.metrics import format_reports


@hydra.main(version_base="1.3", config_path="conf", config_name="eval")
def main(cfg: DictConfig) -> None:
    results = evaluate(cfg.ckpt_path, cfg.data_root, splits=cfg.splits, groups_per_batch=cfg.groups_per_batch,
                       hybrid_max_error=cfg.hybrid_max_error, tau_root=cfg.tau_root, clouds=cfg.clouds,
                       frames=cfg.frames, completion=cfg.completion, containment=cfg.containment)
    print(format_reports(results))
    if cfg.out:
        write_results(results, cfg.out)


if __name__ == "__main__":
    main()

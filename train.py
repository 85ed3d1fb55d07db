"""Train a collision network (LOCC or Global-OCN):

    python train.py +experiment=quickstart
    python train.py +experiment=locc_paper trainer=gpu
    python train.py model=global_ocn logger=wandb

Configuration lives in conf/ (Hydra); the work is contactnet.training.train.train(cfg).
"""

import hydra
from omegaconf import DictConfig

from contactnet.training.train import train


@hydra.main(version_base="1.3", config_path="conf", config_name="train")
def main(cfg: DictConfig) -> None:
    train(cfg)


if __name__ == "__main__":
    main()

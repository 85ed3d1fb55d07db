"""Composed real configs forced onto CPU (the tiny dataset is tests/conftest.py's `tiny_data`)."""

from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.core.hydra_config import HydraConfig
from omegaconf import open_dict

ROOT = Path(__file__).resolve().parents[2]
CONF = str(ROOT / "conf")
EXPERIMENTS = sorted(p.stem for p in (ROOT / "conf" / "experiment").glob("*.yaml"))


def compose_train(tmp_path: Path, data_dir: Path, overrides=()):
    """The real train config with paths in tmp, CPU trainer, tiny data and a tiny network."""
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        cfg = compose("train", return_hydra_config=True, overrides=[
            *overrides, "data=procedural_tiny", "trainer=cpu", "logger=csv",
            f"paths.data_dir={data_dir}", f"paths.output_dir={tmp_path}", f"paths.root_dir={tmp_path}",
            "model.net.encoder.hidden=16", "model.net.encoder.features=8", "model.net.encoder.channels=8",
            "model.net.head_hidden=16", "datamodule.groups_per_batch=2",
        ])
    HydraConfig().set_config(cfg)
    with open_dict(cfg):
        del cfg.hydra
    return cfg

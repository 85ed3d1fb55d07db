"""The progress report: TQDM's bar on a terminal, one plain line per epoch in a log file."""

import io
import sys

import hydra
import lightning as L
import pytest
import torch
from hydra import compose, initialize_config_dir
from lightning.pytorch.callbacks import TQDMProgressBar
from torch.utils.data import DataLoader, TensorDataset

from contactnet.training.callbacks import EpochLines, progress_bar
from tests.training.conftest import CONF


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class _Regression(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(2, 1)

    def _loss(self, batch):
        x, y = batch
        return torch.nn.functional.mse_loss(self.layer(x).squeeze(1), y)

    def training_step(self, batch, batch_idx):
        loss = self._loss(batch)
        self.log("train/loss", loss, prog_bar=True)
        return loss

    def validation_step(self, batch, batch_idx):
        self.log("val/loss", self._loss(batch))

    def test_step(self, batch, batch_idx):
        self.log("test/loss", self._loss(batch))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def _loader():
    x = torch.randn(64, 2, generator=torch.Generator().manual_seed(0))
    return DataLoader(TensorDataset(x, x.sum(1)), batch_size=4)  # 16 batches an epoch


def test_a_terminal_gets_the_bar_and_a_log_file_plain_lines():
    assert isinstance(progress_bar(stream=_Terminal()), TQDMProgressBar)
    assert isinstance(progress_bar(stream=io.StringIO()), EpochLines)
    with pytest.raises(ValueError, match="refresh_rate: expected a count >= 0"):
        progress_bar(refresh_rate=-1)


def test_one_line_per_epoch_and_per_test_run_without_carriage_returns():
    log = io.StringIO()
    trainer = L.Trainer(max_epochs=3, accelerator="cpu", logger=False, enable_checkpointing=False,
                        enable_model_summary=False, callbacks=[progress_bar(stream=log)])
    model = _Regression()
    trainer.fit(model, _loader(), _loader())
    trainer.test(model, _loader(), verbose=False)
    lines = log.getvalue().splitlines()
    assert "\r" not in log.getvalue() and len(lines) == 4, log.getvalue()
    for epoch, line in enumerate(lines[:3], 1):
        assert line.startswith(f"epoch {epoch}/3  step {16 * epoch}  train/loss ") and "  val/loss " in line
        assert line.endswith(" s")
    assert lines[3].startswith("test  16 batches  ")


def test_validation_within_an_epoch_gets_its_own_line():
    """A long epoch validated every few steps (cpu_hour: val_check_interval, a quarter epoch) reports each
    of those validations; the epoch's last one stays part of the epoch line."""
    log = io.StringIO()
    trainer = L.Trainer(max_epochs=1, accelerator="cpu", logger=False, enable_checkpointing=False,
                        enable_model_summary=False, val_check_interval=4, callbacks=[progress_bar(stream=log)])
    trainer.fit(_Regression(), _loader(), _loader())
    lines = log.getvalue().splitlines()
    assert [line.split("  val/loss")[0] for line in lines[:3]] == [f"epoch 1/1  step {s}/16" for s in (4, 8, 12)]
    assert len(lines) == 4 and lines[3].startswith("epoch 1/1  step 16  train/loss ") and "val/loss" in lines[3]


def test_refresh_rate_zero_writes_nothing():
    log = io.StringIO()
    trainer = L.Trainer(max_epochs=1, accelerator="cpu", logger=False, enable_checkpointing=False,
                        enable_model_summary=False, callbacks=[progress_bar(refresh_rate=0, stream=log)])
    trainer.fit(_Regression(), _loader())
    assert log.getvalue() == ""


def test_the_train_config_uses_it(monkeypatch):
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        cfg = compose("train", overrides=["trainer=cpu"])
    monkeypatch.setattr(sys, "stdout", io.StringIO())  # as under nohup: stdout is a file
    assert isinstance(hydra.utils.instantiate(cfg.callbacks.progress_bar), EpochLines)

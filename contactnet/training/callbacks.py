"""Training callbacks.

`progress_bar` picks how training reports progress. On a terminal it is Lightning's TQDM bar. In a
log file (CI, `nohup`, SLURM output) that bar is thousands of carriage-return frames, so there it
is `EpochLines`: one plain line per training epoch, one per validation within an epoch
(`val_check_interval`), and one per validation or test run.
"""

import sys
import time
from typing import TextIO

import lightning as L
from lightning.pytorch.callbacks import ProgressBar, TQDMProgressBar


def progress_bar(refresh_rate: int = 5, stream: TextIO | None = None) -> ProgressBar:
    """TQDM's bar when `stream` (default: stdout, where Lightning's bars write) is a terminal, else
    `EpochLines`. refresh_rate: batches between bar updates; 0 turns either off."""
    stream = sys.stdout if stream is None else stream
    if refresh_rate < 0:
        raise ValueError(f"refresh_rate: expected a count >= 0 (0: off), got {refresh_rate}")
    if stream.isatty():
        return TQDMProgressBar(refresh_rate=refresh_rate)
    return EpochLines(stream, enabled=refresh_rate > 0)


def _format(value) -> str:
    value = value.item() if hasattr(value, "item") else value
    return f"{value:.4g}" if isinstance(value, float) else str(value)


class EpochLines(ProgressBar):
    """One line per epoch, e.g. `epoch 3/20  step 120  train/loss 0.412  val/loss 0.388  val/ap 0.91  4.2 s`:
    the progress-bar metrics (those logged with `prog_bar=True`), `val/loss` and `val/ap` when
    logged, and the epoch's wall time. Only the global-zero process writes."""

    SHOWN = ("val/loss", "val/ap")  # besides the progress-bar metrics

    def __init__(self, stream: TextIO | None = None, enabled: bool = True):
        super().__init__()
        self.stream = stream
        self._wanted, self._enabled = enabled, True  # as TQDM's bar: enable() cannot undo refresh_rate=0
        self._started = 0.0

    def disable(self) -> None:
        self._enabled = False

    def enable(self) -> None:
        self._enabled = True

    @property
    def is_enabled(self) -> bool:
        return self._wanted and self._enabled

    def print(self, *args, **kwargs) -> None:
        print(*args, file=self.stream or sys.stdout, flush=True, **kwargs)

    def _line(self, head: str, metrics: dict) -> None:
        if self.is_enabled:
            parts = [head, *(f"{k} {_format(v)}" for k, v in metrics.items()),
                     f"{time.perf_counter() - self._started:.1f} s"]
            self.print("  ".join(parts))

    def _start(self, *_) -> None:
        self._started = time.perf_counter()

    on_train_epoch_start = on_validation_start = on_test_start = _start

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # Lightning validates before this hook, so the epoch's validation metrics are in.
        metrics = {k: v for k, v in self.get_metrics(trainer, pl_module).items() if k != "v_num"}
        metrics.update(self._shown(trainer))
        self._line(f"epoch {trainer.current_epoch + 1}/{_epochs(trainer)}  step {trainer.global_step}", metrics)

    def _shown(self, trainer: L.Trainer) -> dict:
        return {k: trainer.callback_metrics[k] for k in self.SHOWN if k in trainer.callback_metrics}

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        if trainer.state.fn == "validate":
            self._line(f"validation  {_batches(self.total_val_batches)} batches", {})
        elif not trainer.fit_loop.epoch_loop.batch_progress.is_last_batch:
            # Validation within an epoch (val_check_interval): a line of its own, so a long epoch
            # shows progress; the epoch's last validation is part of the epoch line.
            self._line(f"epoch {trainer.current_epoch + 1}/{_epochs(trainer)}  step {trainer.global_step}/"
                       f"{_batches(self.total_train_batches)}", self._shown(trainer))

    def on_test_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._line(f"test  {_batches(sum(trainer.num_test_batches))} batches", {})


def _epochs(trainer: L.Trainer) -> str:
    return "?" if trainer.max_epochs in (None, -1) else str(trainer.max_epochs)


def _batches(count) -> str:
    return str(int(count)) if count != float("inf") else "?"

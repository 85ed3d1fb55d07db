"""Every config group instantiates, and every experiment runs one fast_dev_run step on CPU."""

import csv
import json
import math
import pickle
import subprocess
import sys
from pathlib import Path

import hydra
import pytest
import torch

from contactnet.models import load_model
from contactnet.models import checkpoint as checkpoint_module
from contactnet.models.checkpoint import build_net, stored_tau
from contactnet.training.evaluate import evaluate
from contactnet.training.module import group_logits
from contactnet.training.train import train
from tests.training.conftest import EXPERIMENTS, ROOT, compose_train


@pytest.mark.parametrize("model", ["locc", "global_ocn"])
@pytest.mark.parametrize("logger", ["csv", "wandb", "none"])
def test_groups_instantiate(tmp_path, tiny_data, model, logger, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    cfg = compose_train(tmp_path, tiny_data, [f"model={model}"])
    cfg.logger = compose_train(tmp_path, tiny_data, [f"logger={logger}"]).logger if logger != "csv" else cfg.logger
    assert hydra.utils.instantiate(cfg.model).net is not None
    for node in (cfg.get("logger") or {}).values():
        hydra.utils.instantiate(node)
    for node in cfg.callbacks.values():
        hydra.utils.instantiate(node)
    hydra.utils.instantiate(cfg.trainer)
    hydra.utils.instantiate(cfg.datamodule).setup()


@pytest.mark.parametrize("experiment", [e for e in EXPERIMENTS if e != "data_efficiency"])
def test_experiment_fast_dev_run(tmp_path, tiny_data, experiment):
    cfg = compose_train(tmp_path, tiny_data, [f"+experiment={experiment}", "+trainer.fast_dev_run=true",
                                              "datamodule.num_workers=0"])
    results = train(cfg)
    assert {"test_known/acc", "test_unknown/acc"} <= set(results["metrics"])
    assert (tmp_path / "metrics.json").exists()


def test_data_efficiency_cell_trains_both_models(tmp_path, tiny_data):
    """The preset benchmarks.paper_table1 runs for each Table I cell, for both networks."""
    for model in ("locc", "global_ocn"):
        cfg = compose_train(tmp_path / model, tiny_data, ["+experiment=data_efficiency", f"model={model}",
                                                          "+trainer.fast_dev_run=true", "datamodule.num_workers=0"])
        assert {"test_known/acc", "test_unknown/acc"} <= set(train(cfg)["metrics"])


def _validated_epochs(run: Path) -> set[int]:
    """The epochs whose validation metrics the CSV logger wrote in a run's folder."""
    with open(run / "csv" / "version_0" / "metrics.csv") as f:
        return {int(row["epoch"]) for row in csv.DictReader(f) if row["val/loss"]}


def test_checkpoint_round_trip_and_resume(tmp_path, tiny_data):
    cfg = compose_train(tmp_path, tiny_data, ["trainer.max_epochs=2"])
    results = train(cfg)
    net = load_model(results["best_checkpoint"])
    assert not net.training
    # The hybrid's thresholds, chosen on the validation split, are stored in the best checkpoint.
    chosen = {(e["frames"], e["max_error"]): e["tau"] for e in results["hybrid_tau"]}
    assert set(chosen) == {(1, 0.0), (1, 0.001), (4, 0.0), (4, 0.001)}
    for (frames, error), tau in chosen.items():
        assert stored_tau(results["best_checkpoint"], error, frames) == max(tau, 1e-6)
    # load_model builds the net from the stored plain config (not from Hydra): it predicts what the
    # training config's network with the checkpoint's weights predicts, on a real batch.
    module = hydra.utils.instantiate(cfg.model)
    module.load_state_dict(torch.load(results["best_checkpoint"], weights_only=True)["state_dict"])
    datamodule = hydra.utils.instantiate(cfg.datamodule)
    datamodule.setup()
    batch = next(iter(datamodule.test_dataloader()[0]))
    with torch.no_grad():
        torch.testing.assert_close(group_logits(net, batch)[0], group_logits(module.net.eval(), batch)[0],
                                   rtol=0, atol=0)
    # eval.py's scoring of the best checkpoint reproduces the test accuracy of training.
    scores = evaluate(results["best_checkpoint"], str(tiny_data / "procedural_tiny"))
    for split in ("test_known", "test_unknown"):
        assert scores[split]["acc"] == pytest.approx(results["metrics"][f"{split}/acc"], abs=1e-6)
    # last.ckpt is the final epoch's state, whether or not that epoch improved val AP.
    steps = len(datamodule.train_dataloader())
    first = torch.load(tmp_path / "checkpoints" / "last.ckpt", weights_only=True)
    assert (first["epoch"], first["global_step"]) == (1, 2 * steps)
    # Resumed from it for one more epoch, the run continues where the first one stopped (a fresh
    # three-epoch run would end at the same epoch and step, but would validate epochs 0 and 1 again).
    resumed_dir = tmp_path / "resumed"
    cfg2 = compose_train(resumed_dir, tiny_data, ["trainer.max_epochs=3",
                                                 f"ckpt_path={tmp_path / 'checkpoints' / 'last.ckpt'}"])
    resumed_results = train(cfg2)
    resumed = torch.load(resumed_dir / "checkpoints" / "last.ckpt", weights_only=True)
    assert (resumed["epoch"], resumed["global_step"]) == (2, 3 * steps)
    assert any(not torch.equal(resumed["state_dict"][k], v) for k, v in first["state_dict"].items())
    assert _validated_epochs(tmp_path) == {0, 1} and _validated_epochs(resumed_dir) == {2}
    written = json.loads((resumed_dir / "metrics.json").read_text())
    assert written["metrics"] == resumed_results["metrics"] and "test_unknown/acc" in written["metrics"]


class _WritesFile:
    """Unpickling this object runs `exec`, which writes `path`: a live exploit to be refused."""

    def __init__(self, path: Path):
        self.path = str(path)

    def __reduce__(self):
        return exec, (f"open({self.path!r}, 'w').write('pwned')",)


def _malicious_checkpoint(tmp_path: Path) -> tuple[Path, Path]:
    """A checkpoint-shaped file whose unpickling writes the returned marker file (checked live)."""
    marker, ckpt = tmp_path / "pwned", tmp_path / "evil.ckpt"
    torch.save({"contactnet_net_config": {"_target_": "contactnet.models.LOCC"}, "state_dict": {}, "epoch": 0,
                "global_step": 0, "payload": _WritesFile(marker)}, ckpt)
    torch.load(ckpt, weights_only=False)  # an unrestricted load runs the payload ...
    assert marker.read_text() == "pwned"
    marker.unlink()  # ... so the loaders under test must not
    return ckpt, marker


# TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD turns torch.load's default into a full unpickling: only a loader
# that asks for weights_only=True explicitly stays safe under it.
def test_load_model_refuses_a_malicious_pickle_and_runs_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    ckpt, marker = _malicious_checkpoint(tmp_path)
    with pytest.raises(ValueError, match="refusing to unpickle"):
        load_model(ckpt)
    assert not marker.exists()


def test_resume_refuses_a_malicious_checkpoint_and_runs_nothing(tmp_path, tiny_data, monkeypatch):
    """`ckpt_path` goes to Lightning, which must read it with the same restricted torch.load."""
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    ckpt, marker = _malicious_checkpoint(tmp_path)
    cfg = compose_train(tmp_path / "run", tiny_data, ["trainer.max_epochs=1", f"ckpt_path={ckpt}"])
    with pytest.raises(pickle.UnpicklingError, match="Weights only load failed"):
        train(cfg)
    assert not marker.exists()


@pytest.mark.parametrize("where", ["top", "nested"])
def test_load_model_refuses_classes_outside_the_allow_list(tmp_path, where):
    marker = tmp_path / "ran"
    evil = {"_target_": "os.system", "command": f"touch {marker}"}
    config = evil if where == "top" else {"_target_": "contactnet.models.LOCC", "encoder": evil}
    torch.save({"contactnet_net_config": config, "state_dict": {}}, tmp_path / "evil.ckpt")
    with pytest.raises(ValueError, match="'os.system' is not one of"):
        load_model(tmp_path / "evil.ckpt")
    assert not marker.exists()


def test_ddp_two_cpu_processes(tmp_path, tiny_data):
    """DDP through Lightning, 2 CPU processes, via the real entry point."""
    cmd = [sys.executable, "train.py", "trainer=ddp", "trainer.accelerator=cpu", "trainer.devices=2",
           "trainer.max_epochs=1", "data=procedural_tiny", f"paths.data_dir={tiny_data}",
           f"hydra.run.dir={tmp_path}", "model.net.encoder.hidden=16", "model.net.encoder.features=8",
           "model.net.encoder.channels=8", "model.net.head_hidden=16", "datamodule.groups_per_batch=2"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "test_unknown" in proc.stdout and (tmp_path / "metrics.json").exists()


def test_distance_head_trains_jointly(tmp_path, tiny_data):
    """A LOCC with the distance head: its loss term is in the training loss (the head's second
    output gets gradients) and a fast run goes through fit and test."""
    cfg = compose_train(tmp_path, tiny_data, ["model.net.distance_head=true", "+trainer.fast_dev_run=true"])
    module = hydra.utils.instantiate(cfg.model)
    datamodule = hydra.utils.instantiate(cfg.datamodule)
    datamodule.setup()
    batch = next(iter(datamodule.train_dataloader()))
    logits, penalty, distance = module.forward_batch(batch)
    module._loss(logits, batch, penalty, distance).backward()
    assert module.net.head[-1].weight.grad[1].abs().sum() > 0  # the distance output's row
    assert {"test_known/balanced_acc", "boundary_unknown/acc"} <= set(train(cfg)["metrics"])


@pytest.mark.parametrize("interval", ["step", "epoch"])
def test_scheduler_steps_per_optimiser_step_or_per_epoch(tmp_path, tiny_data, interval):
    """scheduler_interval=step anneals a cosine over the optimiser steps of a run (as cpu_hour does)
    to 0; the epoch interval has stepped it once by then."""
    cosine = "{_target_: torch.optim.lr_scheduler.CosineAnnealingLR, _partial_: true, T_max: 4}"
    cfg = compose_train(tmp_path, tiny_data, ["trainer.max_epochs=1", f"model.scheduler_interval={interval}",
                                              f"model.scheduler={cosine}", "+trainer.limit_train_batches=4"])
    module = hydra.utils.instantiate(cfg.model)
    trainer = hydra.utils.instantiate(cfg.trainer, logger=False, enable_checkpointing=False)
    trainer.fit(module, hydra.utils.instantiate(cfg.datamodule))
    lr = trainer.optimizers[0].param_groups[0]["lr"]
    want = 0.0 if interval == "step" else 0.5 * (1 + math.cos(math.pi / 4)) * cfg.model.optimizer.lr
    assert lr == pytest.approx(want, abs=1e-12)


def test_scheduler_interval_is_checked(tmp_path, tiny_data):
    cfg = compose_train(tmp_path, tiny_data, ["model.scheduler_interval=batch"])
    with pytest.raises(Exception, match="scheduler_interval: expected 'epoch' or 'step'"):
        hydra.utils.instantiate(cfg.model)


@pytest.mark.parametrize("device", ["meta", pytest.param("cuda", marks=[pytest.mark.cuda, pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA device")])])
def test_load_model_puts_the_net_on_map_location(tmp_path, monkeypatch, device):
    """The state is copied into a freshly built (CPU) net: the net itself must move too. On a CPU
    machine the state is read to the CPU (a meta tensor holds no data to copy) and the net must
    still end up on the meta device."""
    if device == "meta":
        read = checkpoint_module.read_checkpoint
        monkeypatch.setattr(checkpoint_module, "read_checkpoint", lambda path, _: read(path, "cpu"))
    config = {"_target_": "contactnet.models.LOCC", "encoder": {
        "_target_": "contactnet.models.ShapeEncoder", "grid": 4, "hidden": 16, "features": 8, "channels": 8}}
    net = build_net(config)
    torch.save({"contactnet_net_config": config, "state_dict": {f"net.{k}": v for k, v in net.state_dict().items()}},
               tmp_path / "net.ckpt")
    loaded = load_model(tmp_path / "net.ckpt", map_location=device)
    assert {p.device.type for p in loaded.parameters()} == {device} and not loaded.training

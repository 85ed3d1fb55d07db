"""Every config group instantiates, and every experiment runs one fast_dev_run step on CPU."""

import subprocess
import sys

import hydra
import pytest
import torch

from contactnet.models import load_model
from contactnet.training.evaluate import evaluate
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


def test_data_efficiency_sweep_and_table(tmp_path, tiny_data):
    """The multirun preset's jobs (one run here) and its Table I writer."""
    from contactnet.training.table import collect, write_table

    for model, n in (("locc", 10), ("global_ocn", 12)):
        job = tmp_path / f"{model}_{n}"
        cfg = compose_train(job, tiny_data, ["+experiment=data_efficiency", f"model={model}", f"train_objects={n}",
                                             "+trainer.fast_dev_run=true"])
        train(cfg)
        (job / ".hydra").mkdir()
        (job / ".hydra" / "overrides.yaml").write_text(f"- model={model}\n- train_objects={n}\n")
    rows = collect(tmp_path)
    assert {(r["model"], r["train_objects"]) for r in rows} == {("locc", 10), ("global_ocn", 12)}
    table = write_table(tmp_path, rows)
    assert "| locc |" in table and (tmp_path / "table.csv").exists()


def test_checkpoint_round_trip_and_resume(tmp_path, tiny_data):
    cfg = compose_train(tmp_path, tiny_data, ["trainer.max_epochs=1"])
    results = train(cfg)
    net = load_model(results["best_checkpoint"])
    assert not net.training
    state = torch.load(results["best_checkpoint"], weights_only=True)["state_dict"]
    torch.testing.assert_close(net.encoder.out.weight, state["net.encoder.out.weight"])
    # eval.py's scoring of the best checkpoint reproduces the test accuracy of training.
    scores = evaluate(results["best_checkpoint"], str(tiny_data / "procedural_tiny"))
    for split in ("test_known", "test_unknown"):
        assert scores[split]["acc"] == pytest.approx(results["metrics"][f"{split}/acc"], abs=1e-6)
    # Resume from the last checkpoint for one more epoch.
    cfg2 = compose_train(tmp_path / "resumed", tiny_data, ["trainer.max_epochs=2",
                                                          f"ckpt_path={tmp_path / 'checkpoints' / 'last.ckpt'}"])
    train(cfg2)


def test_load_model_refuses_unknown_classes(tmp_path):
    torch.save({"contactnet_net_config": {"_target_": "os.system", "command": "true"}, "state_dict": {}},
               tmp_path / "evil.ckpt")
    with pytest.raises(ValueError, match="not one of"):
        load_model(tmp_path / "evil.ckpt")


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

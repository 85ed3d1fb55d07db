"""evaluate(): the same pairs scored with full clouds or with one depth view per object."""

import torch
from hydra import compose, initialize_config_dir

from contactnet.models.checkpoint import build_net
from contactnet.training.evaluate import evaluate
from tests.training.conftest import CONF

NET = {"_target_": "contactnet.models.LOCC", "head_hidden": 16,
       "encoder": {"_target_": "contactnet.models.ShapeEncoder", "grid": 2, "hidden": 16, "features": 8, "channels": 8}}


def test_full_and_single_view_scores_on_the_same_pairs(tmp_path, tiny_data):
    torch.manual_seed(0)
    net = build_net(NET)  # untrained: its probabilities still depend on the clouds it reads
    ckpt = tmp_path / "net.ckpt"
    torch.save({"contactnet_net_config": NET, "state_dict": {f"net.{k}": v for k, v in net.state_dict().items()}}, ckpt)
    data = tiny_data / "procedural_tiny"
    full = evaluate(str(ckpt), str(data), device="cpu")
    single = evaluate(str(ckpt), str(data), device="cpu", clouds="single_view")
    assert (data / "objects" / "partial" / "manifest.json").exists()  # built on first use
    assert set(single) == set(full) == {"test_known", "test_unknown"}
    for split in full:
        assert set(single[split]) == set(full[split])
        assert single[split]["ece"] != full[split]["ece"]
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):  # eval.py's option
        assert compose("eval", overrides=["ckpt_path=x"]).clouds == "full"
        assert compose("eval", overrides=["ckpt_path=x", "clouds=single_view"]).clouds == "single_view"

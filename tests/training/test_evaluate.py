"""evaluate(): every test split, the same pairs scored with full clouds or with one depth view per
object, and the certified hybrid with its threshold chosen on the validation split (reported, and
stored in the checkpoint)."""

import pytest
import torch
from hydra import compose, initialize_config_dir

from contactnet.data.dataset import TEST_SPLIT_ORDER
from contactnet.models import load_model
from contactnet.models.checkpoint import build_net, stored_tau
from contactnet.planning.hybrid import choose_tau, defer
from contactnet.training.evaluate import calibrate_checkpoint, evaluate, predict_split
from tests.training.conftest import CONF

SPLITS = set(TEST_SPLIT_ORDER)  # procedural_tiny has every named test split

NET = {"_target_": "contactnet.models.LOCC", "head_hidden": 16,
       "encoder": {"_target_": "contactnet.models.ShapeEncoder", "grid": 2, "hidden": 16, "features": 8, "channels": 8}}


def _checkpoint(tmp_path):
    torch.manual_seed(0)
    net = build_net(NET)  # untrained: its probabilities still depend on the clouds it reads
    ckpt = tmp_path / "net.ckpt"
    torch.save({"contactnet_net_config": NET, "state_dict": {f"net.{k}": v for k, v in net.state_dict().items()}}, ckpt)
    return net, ckpt


def test_full_and_single_view_scores_on_the_same_pairs(tmp_path, tiny_data):
    _, ckpt = _checkpoint(tmp_path)
    data = tiny_data / "procedural_tiny"
    full = evaluate(str(ckpt), str(data), device="cpu")
    single = evaluate(str(ckpt), str(data), device="cpu", clouds="single_view")
    assert (data / "objects" / "partial" / "manifest.json").exists()  # built on first use
    assert set(single) == set(full) == SPLITS
    for split in full:
        assert set(single[split]) == set(full[split]) and single[split]["n"] == full[split]["n"]
        assert single[split]["ece"] != full[split]["ece"]
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):  # eval.py's option
        assert compose("eval", overrides=["ckpt_path=x"]).clouds == "full"
        assert compose("eval", overrides=["ckpt_path=x", "clouds=single_view"]).clouds == "single_view"


def test_hybrid_report_uses_tau_from_the_validation_split(tmp_path, tiny_data):
    net, ckpt = _checkpoint(tmp_path)
    data = tiny_data / "procedural_tiny"
    scores = evaluate(str(ckpt), str(data), splits=["boundary_unknown"], device="cpu", hybrid_max_error=0.05)
    val = predict_split(net.eval(), data, "val")
    hybrid = scores["boundary_unknown"]["hybrid"]
    assert hybrid["tau"] == choose_tau(val["logit"], val["label"], 0.05, val["separated"])
    test = predict_split(net.eval(), data, "boundary_unknown")
    apart = test["separated"]
    assert apart.any() and not (apart & test["label"]).any()  # the certificate holds on the exact labels
    deferred = defer(test["logit"], hybrid["tau"], apart)
    assert hybrid["deferred"] == deferred.double().mean().item()
    assert hybrid["certified"] == apart.double().mean().item()
    learned_right = (test["logit"] > 0) == test["label"]
    assert hybrid["accuracy"] == (learned_right | deferred | apart).double().mean().item()
    assert hybrid["accuracy"] >= scores["boundary_unknown"]["acc"] and hybrid["missed_collisions"] == 0


def test_frame_averaged_scores_are_the_mean_over_fixed_frames(tmp_path, tiny_data):
    """frames=F: each logit is the mean of the logits with every object turned into each of the
    fixed frames (frame 0 as stored); the hybrid's tau comes from val scored the same way."""
    from contactnet.data.datamodule import PairGroups
    from contactnet.data.objects import load_object_set
    from contactnet.geometry.frames import frame_quaternions
    from contactnet.training.module import group_logits

    net, ckpt = _checkpoint(tmp_path)
    net.eval()
    data = tiny_data / "procedural_tiny"
    objects = load_object_set(data / "objects")
    plain = predict_split(net, data, "boundary_unknown")
    framed = predict_split(net, data, "boundary_unknown", frames=3)
    torch.testing.assert_close(framed["label"], plain["label"])
    turned = []
    for q in frame_quaternions(3)[1:]:
        groups = PairGroups(data / "boundary_unknown", objects, frame=q)
        with torch.no_grad():
            turned.append(torch.cat([group_logits(net, b)[0].flatten()
                                     for b in torch.utils.data.DataLoader(groups, batch_size=16)]))
    torch.testing.assert_close(framed["logit"], torch.stack([plain["logit"], *turned]).mean(0))
    scores = evaluate(str(ckpt), str(data), splits=["boundary_unknown"], device="cpu", hybrid_max_error=0.05,
                      frames=3)
    val = predict_split(net, data, "val", frames=3)
    assert scores["boundary_unknown"]["hybrid"]["tau"] == choose_tau(val["logit"], val["label"], 0.05)
    assert scores["boundary_unknown"]["frames"] == 3
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):  # eval.py's option
        assert compose("eval", overrides=["ckpt_path=x"]).frames == 1


def test_calibrated_thresholds_are_stored_in_the_checkpoint_and_read_back(tmp_path, tiny_data):
    net, ckpt = _checkpoint(tmp_path)
    data = tiny_data / "procedural_tiny"
    with pytest.raises(ValueError, match="holds no hybrid threshold"):
        stored_tau(ckpt)
    entries = calibrate_checkpoint(ckpt, data, frames=(1, 2), max_errors=(0.0, 0.05), device="cpu")
    assert [(e["frames"], e["max_error"]) for e in entries] == [(1, 0.0), (1, 0.05), (2, 0.0), (2, 0.05)]
    for frames in (1, 2):
        val = predict_split(net.eval(), data, "val", frames=frames)
        for error in (0.0, 0.05):
            tau = choose_tau(val["logit"], val["label"], error, val["separated"])
            assert stored_tau(ckpt, error, frames) == max(tau, 1e-6) > 0
    assert load_model(ckpt).state_dict().keys() == net.state_dict().keys()  # still a loadable checkpoint
    with pytest.raises(ValueError, match=r"max_error, frames: .*\(max_error=0.001, frames=1\)"):
        stored_tau(ckpt, 0.001)

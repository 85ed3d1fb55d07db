"""The Hydra generation entry point, composed from the real configs."""

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from contactnet.data.dataset import load_manifest, read_shard
from contactnet.data.generate import run

CONF = str(Path(__file__).resolve().parents[2] / "conf")


def _cfg(tmp_path, *overrides):
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        return compose("generate", overrides=["data=procedural_tiny", f"out_dir={tmp_path}", "progress=false", *overrides])


def test_generate_all_splits(tmp_path):
    manifests = run(_cfg(tmp_path))
    assert set(manifests) == {"train", "val", "test_known", "test_unknown"}
    train, unknown = load_manifest(tmp_path / "train"), load_manifest(tmp_path / "test_unknown")
    known_ids, unknown_ids = set(train["objects"]["known"]), set(train["objects"]["unknown"])
    families = train["objects"]["families"]
    assert {families[i] for i in unknown_ids} == {"hook", "gear_prism", "egad_like"}
    # Unknown objects never appear in training, and the unknown test set uses only them.
    for split, allowed in (("train", known_ids), ("test_unknown", unknown_ids)):
        shard = read_shard(tmp_path / split, 0)
        assert set(shard["ids_a"]) | set(shard["ids_b"]) <= allowed
    assert not unknown["spec"]["pairs"]["manipulate"] and train["spec"]["pairs"]["manipulate"]


def test_one_shard_at_a_time_then_merge(tmp_path):
    assert run(_cfg(tmp_path, "split=train", "shard=1"))["train"] is None  # shard 0 still missing
    manifest = run(_cfg(tmp_path, "split=train", "shard=0"))["train"]
    assert manifest["stats"]["shard_counts"] == [64, 64]


def test_bad_split_name(tmp_path):
    with pytest.raises(ValueError, match="split: expected one of"):
        run(_cfg(tmp_path, "split=nope"))

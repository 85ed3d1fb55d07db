"""The Hydra generation entry point, composed from the real configs."""

from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir

from contactnet.data.dataset import load_manifest, read_shard
from contactnet.data.generate import resolve_device, run

CONF = str(Path(__file__).resolve().parents[2] / "conf")


def _cfg(tmp_path, *overrides):
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        return compose("generate", overrides=["data=procedural_tiny", f"out_dir={tmp_path}", "progress=false", *overrides])


def test_generate_all_splits(tmp_path):
    manifests = run(_cfg(tmp_path))
    assert set(manifests) == {"train", "val", "test_known", "test_unknown", "boundary_known", "boundary_unknown",
                              "nested_known", "nested_unknown"}
    train, unknown = load_manifest(tmp_path / "train"), load_manifest(tmp_path / "test_unknown")
    known_ids, unknown_ids = set(train["objects"]["known"]), set(train["objects"]["unknown"])
    families = train["objects"]["families"]
    assert {families[i] for i in unknown_ids} == {"hook", "gear_prism", "egad_like"}
    # Unknown objects never appear in training (B of a nested training pair is an inner copy of a
    # known object), and the unknown test set uses only them.
    known_inner = set(train["spec"]["inner_ids"])
    assert {families[i] for i in known_inner} <= {families[i] for i in known_ids}
    for split, allowed in (("train", known_ids | known_inner), ("test_unknown", unknown_ids)):
        shard = read_shard(tmp_path / split, 0)
        assert set(shard["ids_a"]) | set(shard["ids_b"]) <= allowed
    assert unknown["spec"]["pairs"]["placement"] == "uniform" and train["spec"]["pairs"]["placement"] == "manipulated"
    # Nested splits: A among the split's objects, B among their inner copies (same families).
    for role in ("known", "unknown"):
        nested = load_manifest(tmp_path / f"nested_{role}")
        inner = set(nested["spec"]["inner_ids"])
        shard = read_shard(tmp_path / f"nested_{role}", 0)
        assert set(shard["ids_a"]) <= set(train["objects"][role]) and set(shard["ids_b"]) <= inner
        assert {families[i] for i in inner} <= {families[i] for i in train["objects"][role]}
        boundary = load_manifest(tmp_path / f"boundary_{role}")
        assert boundary["spec"]["pairs"]["placement"] == "boundary"


def test_one_shard_at_a_time_then_merge(tmp_path):
    assert run(_cfg(tmp_path, "split=train", "shard=1"))["train"] is None  # shard 0 still missing
    manifest = run(_cfg(tmp_path, "split=train", "shard=0"))["train"]
    assert manifest["stats"]["shard_counts"] == [64, 64]


def test_bad_split_name(tmp_path):
    with pytest.raises(ValueError, match="split: expected one of"):
        run(_cfg(tmp_path, "split=nope"))


def test_device_choice(tmp_path):
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    assert resolve_device("cpu") == torch.device("cpu")
    for bad in ("gpu", "meta", "mps:x"):
        with pytest.raises(ValueError, match="device: expected 'auto', 'cpu' or 'cuda"):
            resolve_device(bad)
    if torch.cuda.is_available():
        return  # the CPU/CUDA agreement itself: test_dataset.test_shard_on_device_matches_cpu
    with pytest.raises(ValueError, match="device: 'cuda' requested, but torch sees no CUDA device"):
        run(_cfg(tmp_path, "device=cuda"))
    # "auto" is the CPU here: byte for byte the shards of forcing it.
    run(_cfg(tmp_path / "cpu", "split=val", "device=cpu"))
    run(_cfg(tmp_path / "auto", "split=val"))
    a, b = read_shard(tmp_path / "cpu" / "val", 0), read_shard(tmp_path / "auto" / "val", 0)
    assert all(a[name].tobytes() == b[name].tobytes() for name in a)

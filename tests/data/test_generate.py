"""The Hydra generation entry point, composed from the real configs; its safety when a write fails,
when shards are made by worker processes, and when a launcher runs one job per shard."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_dir

from contactnet.data.dataset import load_manifest, read_shard
from contactnet.data.generate import resolve_device, run

ROOT = Path(__file__).resolve().parents[2]
CONF = str(ROOT / "conf")


def _cfg(tmp_path, *overrides):
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        return compose("generate", overrides=["data=procedural_tiny", f"out_dir={tmp_path}", "progress=false", *overrides])


def test_a_family_list_in_the_config_is_taken(tmp_path):
    """`objects.families` given in a data config (a Hydra ListConfig) builds those families."""
    from contactnet.data.objects import load_object_set

    run(_cfg(tmp_path, "data.objects.families=[mug,hook,thin]", "data.unknown_families=[hook]"))
    objects = load_object_set(tmp_path / "objects")
    assert set(objects.families) == {"mug", "hook", "thin"}
    assert objects.manifest["spec"]["families"] == ["mug", "hook", "thin"]


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


def _files(root: Path) -> dict[str, bytes]:
    """Every shard file under `root` (by path relative to it) and its bytes."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("shard_*/*.npy"))}


def _leftovers(root: Path) -> list[str]:
    """Temporary files or folders of interrupted writes (atomic writes use hidden names)."""
    return sorted(str(p.relative_to(root)) for p in root.rglob(".*") if p.name != ".lock")


def test_a_failure_while_writing_a_shard_leaves_nothing_and_a_rerun_is_identical(tmp_path, monkeypatch):
    run(_cfg(tmp_path / "clean", "split=train"))
    save, calls = np.save, []

    def save_then_fail(path, array, *args, **kwargs):  # dies after two of a shard's seven fields
        calls.append(path)
        if len(calls) == 3:
            raise RuntimeError("disk gone")
        save(path, array, *args, **kwargs)

    monkeypatch.setattr(np, "save", save_then_fail)
    with pytest.raises(RuntimeError, match="disk gone"):
        run(_cfg(tmp_path / "crash", "split=train"))
    split = tmp_path / "crash" / "train"
    assert sorted(p.name for p in split.iterdir()) == ["spec.json"]  # no shard, whole or partial
    assert _leftovers(tmp_path / "crash") == []
    monkeypatch.undo()
    run(_cfg(tmp_path / "crash", "split=train"))
    clean = _files(tmp_path / "clean")
    assert len(clean) == 2 * 7 and _files(tmp_path / "crash") == clean


def test_worker_processes_write_the_bytes_of_one_process(tmp_path):
    run(_cfg(tmp_path / "one", "split=train", "workers=1"))
    run(_cfg(tmp_path / "two", "split=train", "workers=2"))
    one = _files(tmp_path / "one")
    assert len(one) == 2 * 7 and _files(tmp_path / "two") == one
    assert load_manifest(tmp_path / "two" / "train")["stats"] == load_manifest(tmp_path / "one" / "train")["stats"]


def test_shard_alone_makes_that_shard_of_every_split_that_has_one(tmp_path):
    manifests = run(_cfg(tmp_path, "shard=1"))  # only train has a second shard
    assert all(manifest is None for manifest in manifests.values())
    assert _files(tmp_path).keys() == {f"train/shard_00001/{name}.npy" for name in
                                       ("ids_a", "ids_b", "poses_a", "poses_b", "label", "signed_distance", "barrier")}
    manifests = run(_cfg(tmp_path, "shard=0"))  # completes every split: each gets its manifest
    assert all(manifest is not None for manifest in manifests.values())
    with pytest.raises(ValueError, match=r"shard: expected an index in \[0, 2\)"):
        run(_cfg(tmp_path, "shard=2"))
    with pytest.raises(ValueError, match=r"shard: expected an index in \[0, 1\)"):
        run(_cfg(tmp_path, "split=val", "shard=1"))


def test_one_job_per_shard_through_the_joblib_launcher(tmp_path):
    """The scale-out command: a Hydra sweep over shard=range(...), two jobs at once starting from an
    empty folder (both want the object set), equals one process byte for byte."""
    pytest.importorskip("hydra_plugins.hydra_joblib_launcher")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "contactnet.data.generate", "-m", "data=procedural_tiny",
               f"out_dir={tmp_path / 'sweep'}", "progress=false", "shard=range(0,2)",
               "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", f"hydra.sweep.dir={tmp_path / 'runs'}"]
    result = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "joblib" in (tmp_path / "runs" / "multirun.yaml").read_text()
    run(_cfg(tmp_path / "one"))
    one = _files(tmp_path / "one")
    assert len(one) == 9 * 7 and _files(tmp_path / "sweep") == one
    for split in ("train", "val", "nested_unknown"):
        stats = load_manifest(tmp_path / "sweep" / split)["stats"]
        assert stats == load_manifest(tmp_path / "one" / split)["stats"]
    assert _leftovers(tmp_path / "sweep") == []


def test_a_complete_split_keeps_its_manifest_until_its_spec_changes(tmp_path):
    """The jobs of a sweep each look at every split: one that finds a split complete with its
    manifest in place leaves the file alone; a grown split gets a new one."""
    run(_cfg(tmp_path, "split=val"))
    manifest = tmp_path / "val" / "manifest.json"
    written = manifest.stat().st_mtime_ns
    assert run(_cfg(tmp_path, "split=val"))["val"] == load_manifest(tmp_path / "val")
    assert manifest.stat().st_mtime_ns == written
    grown = run(_cfg(tmp_path, "split=val", "data.splits.val.num_shards=2"))["val"]
    assert grown["stats"]["shard_counts"] == [32, 32] and load_manifest(tmp_path / "val") == grown

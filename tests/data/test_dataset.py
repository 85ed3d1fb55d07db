"""Sharded datasets: determinism, resume after an interrupted run, separate-process shards,
the class-balance guard."""

import json

import numpy as np
import pytest
import torch

from contactnet.data.dataset import (
    DatasetSpec,
    generate_shards,
    make_shard,
    load_manifest,
    read_shard,
    shard_dir,
    write_manifest,
    write_shard,
)
from contactnet.data.pairs import PairSpec
from contactnet.data.procedural import make_object
from contactnet.geometry import Mesh, MeshLibrary


@pytest.fixture(scope="module")
def lib():
    return MeshLibrary([Mesh(*make_object(f, 1), name=f) for f in ("cup", "ring", "l_bracket")], dtype=torch.float64)


def _spec(**kw):
    base = dict(object_ids=[0, 1, 2], pairs_per_shard=2, num_shards=3, seed=7,
                pairs=PairSpec(poses_per_pair=20), positive_rate_band=(0.1, 0.9))
    base.update(kw)
    return DatasetSpec(**base)


def _bytes(root, i):
    return {p.name: p.read_bytes() for p in sorted(shard_dir(root, i).iterdir())}


def test_generate_resume_and_manifest(lib, tmp_path):
    spec = _spec()
    assert generate_shards(lib, spec, tmp_path, progress=False) == [0, 1, 2]
    manifest = write_manifest(tmp_path, spec)
    assert manifest["stats"]["samples"] == 3 * 2 * 20
    assert load_manifest(tmp_path)["stats"] == manifest["stats"]
    shard = read_shard(tmp_path, 1)
    assert isinstance(shard["poses_a"], np.memmap) and shard["poses_a"].shape == (40, 7)
    # Grouped by object pair: each run of poses_per_pair rows shares one pair.
    ids = np.asarray(shard["ids_a"]).reshape(2, 20)
    assert (ids == ids[:, :1]).all()
    # Interrupted run: shard 1 lost (and a stale temporary folder left behind). Resuming redoes
    # exactly shard 1, byte for byte.
    before = _bytes(tmp_path, 1)
    for p in shard_dir(tmp_path, 1).iterdir():
        p.unlink()
    shard_dir(tmp_path, 1).rmdir()
    (tmp_path / ".shard_00001.stale").mkdir()
    assert generate_shards(lib, spec, tmp_path, progress=False) == [1]
    assert _bytes(tmp_path, 1) == before


def test_resume_refuses_a_changed_config(lib, tmp_path):
    spec = _spec(num_shards=2)
    generate_shards(lib, spec, tmp_path, shards=[0], progress=False)
    changed = _spec(num_shards=2, pairs=PairSpec(poses_per_pair=20, uniform_fraction=0.5))
    with pytest.raises(ValueError, match=r"out_dir: .* different config \(differs in \['pairs'\]\)"):
        generate_shards(lib, changed, tmp_path, progress=False)
    assert generate_shards(lib, spec, tmp_path, progress=False) == [1]  # the same config resumes
    # A folder from before spec.json existed is checked against its manifest; a spec missing the
    # newer fields counts as their defaults.
    write_manifest(tmp_path, spec)
    (tmp_path / "spec.json").unlink()
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    del manifest["spec"]["pairs"]["uniform_fraction"]
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    assert generate_shards(lib, _spec(num_shards=2), tmp_path, progress=False) == []
    with pytest.raises(ValueError, match="different config"):
        generate_shards(lib, _spec(num_shards=2, seed=8), tmp_path, progress=False)


def test_more_shards_extend_a_dataset(lib, tmp_path):
    # Shard i does not depend on num_shards: a grown config keeps the shards on disk, adds the
    # rest, and equals a run made at the larger size from the start.
    generate_shards(lib, _spec(num_shards=2), tmp_path / "grown", progress=False)
    before = _bytes(tmp_path / "grown", 1)
    assert generate_shards(lib, _spec(num_shards=3), tmp_path / "grown", progress=False) == [2]
    assert _bytes(tmp_path / "grown", 1) == before
    assert json.loads((tmp_path / "grown" / "spec.json").read_text())["num_shards"] == 3
    generate_shards(lib, _spec(num_shards=3), tmp_path / "whole", progress=False)
    for i in range(3):
        assert _bytes(tmp_path / "grown", i) == _bytes(tmp_path / "whole", i)
    assert write_manifest(tmp_path / "grown", _spec(num_shards=2))["stats"]["samples"] == 2 * 2 * 20


def test_shards_made_separately_equal_one_run(lib, tmp_path):
    spec = _spec()
    generate_shards(lib, spec, tmp_path / "one", progress=False)
    for i in (2, 0, 1):  # as separate processes or machines would, in any order
        generate_shards(lib, spec, tmp_path / "split", shards=[i], progress=False)
    for i in range(3):
        assert _bytes(tmp_path / "one", i) == _bytes(tmp_path / "split", i)


def test_degenerate_positive_rate_fails_loudly(lib, tmp_path):
    spec = _spec(num_shards=1, positive_rate_band=(0.95, 1.0))
    generate_shards(lib, spec, tmp_path, progress=False)
    with pytest.raises(ValueError, match="positive .colliding. rate .* outside positive_rate_band"):
        write_manifest(tmp_path, spec)


def test_missing_shard_and_bad_specs(lib, tmp_path):
    spec = _spec()
    generate_shards(lib, spec, tmp_path, shards=[0], progress=False)
    with pytest.raises(FileNotFoundError, match="shard 1 of 3 is missing"):
        write_manifest(tmp_path, spec)
    with pytest.raises(ValueError, match="object_ids"):
        _spec(object_ids=[])
    with pytest.raises(ValueError, match="positive_rate_band"):
        _spec(positive_rate_band=(0.9, 0.1))


def test_shard_on_device_matches_cpu(lib, accelerator):
    """The GPU labelling path: the same seeded poses on every device (drawn on the CPU), and the
    device's exact kernels give the CPU's labels and distances."""
    spec = _spec(pairs=PairSpec(poses_per_pair=50))
    cpu = make_shard(lib, spec, 1)
    other = make_shard(lib.to(accelerator), spec, 1)
    assert set(other) == set(cpu)
    for name in ("ids_a", "ids_b", "poses_a", "poses_b", "label"):
        np.testing.assert_array_equal(other[name], cpu[name], err_msg=name)
    np.testing.assert_allclose(other["signed_distance"], cpu["signed_distance"], rtol=1e-5, atol=1e-6)
    finite = np.isfinite(cpu["barrier"])
    np.testing.assert_array_equal(np.isfinite(other["barrier"]), finite)
    np.testing.assert_allclose(other["barrier"][finite], cpu["barrier"][finite], rtol=1e-4, atol=1e-12)


@pytest.fixture(scope="module")
def nested_lib():
    """Three objects (ids 0-2) and their copies at 0.3x (ids 3-5), as an object set lays them out."""
    shapes = [make_object(f, 1) for f in ("cup", "ring", "l_bracket")]
    return MeshLibrary([Mesh(v, f) for v, f in shapes] + [Mesh(v * 0.3, f) for v, f in shapes], dtype=torch.float64)


def test_nested_fraction_mixes_nested_pairs_into_a_shard(nested_lib):
    spec = _spec(pairs_per_shard=4, inner_ids=[3, 4, 5], nested_fraction=0.5)
    shard = make_shard(nested_lib, spec, 0)
    ids_b = shard["ids_b"].reshape(4, 20)[:, 0]
    assert set(ids_b[:2]) <= {3, 4, 5} and set(ids_b[2:]) <= {0, 1, 2}
    assert set(shard["ids_a"]) <= {0, 1, 2}
    # Nested rows sit within 1 cm of A's surface: free ones by the surface gap, colliding ones by
    # their penetration estimate (or contained).
    near = np.abs(shard["signed_distance"].reshape(4, 20)[:2]) <= 0.011
    assert near.mean() > 0.9
    # Without inner copies, nested pairs are a clear error.
    with pytest.raises(ValueError, match="inner_ids"):
        _spec(nested_fraction=0.5)
    with pytest.raises(ValueError, match="nested_fraction"):
        _spec(inner_ids=[3], nested_fraction=1.5)


def test_a_shard_written_twice_at_once_keeps_the_first(tmp_path):
    """Two jobs that make the same shard together: the second rename finds it present, keeps it
    (shards are pure functions of (config, index)) and leaves no temporary folder."""
    first = {"label": np.array([True, False])}
    write_shard(tmp_path, 0, first)
    assert write_shard(tmp_path, 0, {"label": np.array([False, False])}) == shard_dir(tmp_path, 0)
    assert np.load(shard_dir(tmp_path, 0) / "label.npy").tolist() == [True, False]
    assert [p.name for p in tmp_path.iterdir()] == ["shard_00000"]

"""Sharded, memory-mappable datasets of labelled object pairs.

A dataset folder holds a manifest and shards:
    manifest.json            config, seed, objects, per-shard counts, label and distance statistics
    shard_00000/<field>.npy  one .npy per field (np.load(..., mmap_mode="r") maps it)

Shard i is a pure function of (config, i): its object pairs and poses come from a CPU generator
seeded with (seed, i), whatever the device, so shards can be made by separate processes or
machines (`shard=i`) and merged by writing the manifest once all are present. The
labelling kernels run on the library's device (CPU or CUDA, the same header math); the two agree
but for rounding at exact touching. A shard is written to a temporary folder
and renamed into place, so an interrupted run resumes by skipping finished shards, and two jobs
that make the same shard at once keep whichever finished first.

Fields (Q samples per shard, grouped by object pair: `poses_per_pair` consecutive rows share one):
    ids_a, ids_b (Q,) int64; poses_a, poses_b (Q, 7) float32; label (Q,) bool;
    signed_distance (Q,) float32; barrier (Q,) float32 (+inf when colliding)
"""

import json
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
import torch

from contactnet.data.pairs import PairSpec, label_pairs, sample_pairs
from contactnet.data.seeds import derive_seed
from contactnet.data.storage import as_json, write_json_atomic
from contactnet.geometry.mesh import MeshLibrary

# The split names the code relies on, defined here only (a data config's `splits` keys name them;
# any further split in a config is a test split, reported after these).
FIT_SPLITS = ("train", "val")
# Uniform poses on known / unknown objects (LOCC's two test sets): every training dataset has them.
UNIFORM_TEST_SPLITS = ("test_known", "test_unknown")
# Test splits in report order; any other split found on disk follows, by name.
TEST_SPLIT_ORDER = (*UNIFORM_TEST_SPLITS, "boundary_known", "boundary_unknown", "nested_known", "nested_unknown")


def finished_test_splits(root: str | Path) -> list[str]:
    """The test splits of the dataset in `root` (every finished split but train and val), in report order."""
    found = {p.parent.name for p in Path(root).glob("*/manifest.json")} - set(FIT_SPLITS) - {"objects"}
    return [s for s in TEST_SPLIT_ORDER if s in found] + sorted(found - set(TEST_SPLIT_ORDER))


FIELDS = ("ids_a", "ids_b", "poses_a", "poses_b", "label", "signed_distance", "barrier")


@dataclass
class DatasetSpec:
    object_ids: list[int]  # ids (into the object set / library) this dataset draws pairs from
    # The inner copies of those objects (the small B of nested pairs); needed by the nested
    # placement and by nested_fraction > 0.
    inner_ids: list[int] | None = None
    # With another placement: this fraction of the object pairs is nested instead (B an inner
    # copy, nested placement): containment and hollows, which other placements rarely reach.
    nested_fraction: float = 0.0
    pairs_per_shard: int = 4  # object pairs per shard
    num_shards: int = 1
    seed: int = 0
    pairs: PairSpec = field(default_factory=PairSpec)
    # A set whose positive (colliding) rate falls outside this band is an error, not a dataset.
    positive_rate_band: tuple[float, float] = (0.2, 0.8)

    def __post_init__(self):
        if isinstance(self.pairs, dict):
            pairs = dict(self.pairs)
            if "manipulate" in pairs:  # written before placements existed
                pairs["placement"] = "manipulated" if pairs.pop("manipulate") else "uniform"
            self.pairs = PairSpec(**pairs)
        if len(self.object_ids) == 0:
            raise ValueError("object_ids: expected at least one object")
        if not 0 <= self.nested_fraction <= 1:
            raise ValueError(f"nested_fraction: expected a fraction in [0, 1], got {self.nested_fraction}")
        if (self.pairs.placement == "nested" or self.nested_fraction > 0) and not self.inner_ids:
            raise ValueError("inner_ids: nested pairs need the objects' inner copies (objects.inner_scale is null?)")
        if self.pairs_per_shard <= 0 or self.num_shards <= 0:
            raise ValueError("pairs_per_shard and num_shards: expected positive counts")
        lo, hi = self.positive_rate_band
        if not 0 <= lo <= hi <= 1:
            raise ValueError(f"positive_rate_band: expected 0 <= low <= high <= 1, got {self.positive_rate_band}")


def shard_dir(root: Path, index: int) -> Path:
    return Path(root) / f"shard_{index:05d}"


def make_shard(lib: MeshLibrary, spec: DatasetSpec, index: int) -> dict[str, np.ndarray]:
    """The samples of shard `index`: a pure function of (library, spec, index)."""
    generator = torch.Generator().manual_seed(derive_seed(spec.seed, index))
    objects = torch.as_tensor(spec.object_ids, dtype=torch.int64)
    n, per_pair = spec.pairs_per_shard, spec.pairs.poses_per_pair
    nested = n if spec.pairs.placement == "nested" else round(n * spec.nested_fraction)
    picks = torch.randint(len(objects), (n, 2), generator=generator)
    ids_a, ids_b = objects[picks[:, 0]], objects[picks[:, 1]]
    if nested:  # the first `nested` pairs: B is an inner copy, drawn after the shared picks
        inner = torch.as_tensor(spec.inner_ids, dtype=torch.int64)
        ids_b[:nested] = inner[torch.randint(len(inner), (nested,), generator=generator)]
    ids_a, ids_b = ids_a.repeat_interleave(per_pair), ids_b.repeat_interleave(per_pair)
    rows = nested * per_pair
    nested_spec = replace(spec.pairs, placement="nested")
    parts = [sample_pairs(lib, ids_a[part], ids_b[part], pairs, generator)
             for part, pairs in ((slice(0, rows), nested_spec), (slice(rows, None), spec.pairs))
             if len(ids_a[part])]
    poses_a, poses_b, direction, gap = (torch.cat(x) for x in zip(*parts))
    labels = label_pairs(lib, ids_a, ids_b, poses_a, poses_b, direction, spec.pairs, gap)
    return {
        "ids_a": ids_a.numpy(),
        "ids_b": ids_b.numpy(),
        "poses_a": poses_a.float().cpu().numpy(),
        "poses_b": poses_b.float().cpu().numpy(),
        "label": labels["label"].cpu().numpy(),
        "signed_distance": labels["signed_distance"].float().cpu().numpy(),
        "barrier": labels["barrier"].float().cpu().numpy(),
    }


def write_shard(root: Path, index: int, arrays: dict[str, np.ndarray]) -> Path:
    """Write a shard folder atomically: fill a temporary folder, then rename it into place. If
    another process renamed the same shard first, keep that one (a shard is a pure function of
    (config, index): the two are the same) and drop this copy."""
    final = shard_dir(root, index)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".{final.name}."))
    try:
        for name, array in arrays.items():
            np.save(tmp / f"{name}.npy", array)
        try:
            os.rename(tmp, final)  # a folder cannot be renamed onto a non-empty one: create-if-absent
        except OSError:
            if not final.is_dir():
                raise
            shutil.rmtree(tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def read_shard(root: Path, index: int, mmap: bool = True) -> dict[str, np.ndarray]:
    folder = shard_dir(root, index)
    return {name: np.load(folder / f"{name}.npy", mmap_mode="r" if mmap else None) for name in FIELDS}


def generate_shards(lib: MeshLibrary, spec: DatasetSpec, root: str | Path, shards=None,
                    progress: bool = True) -> list[int]:
    """Make the shards in `shards` (default: all) that are not on disk yet; returns those made."""
    from tqdm import tqdm

    root = Path(root)
    check_spec(root, spec)
    todo = [i for i in (range(spec.num_shards) if shards is None else shards)
            if not shard_dir(root, i).exists()]
    for index in tqdm(todo, desc="shards", disable=not progress):
        write_shard(root, index, make_shard(lib, spec, index))
    return todo


def check_spec(root: Path, spec: DatasetSpec) -> None:
    """Resuming must not mix shards of two configs: the spec a folder was started with is kept in
    spec.json (or its manifest, for folders written before spec.json existed) and must match.
    `num_shards` alone may change: shard i does not depend on it, so a dataset grows (or is read
    shorter) without redoing the shards it has."""
    path = root / "spec.json"
    current = as_json(asdict(spec))
    stored = (json.loads(path.read_text()) if path.exists()
              else load_manifest(root)["spec"] if (root / "manifest.json").exists() else None)  # fmt: skip
    if stored is not None:
        stored = as_json(asdict(DatasetSpec(**stored)))  # newer fields: defaults
        changed = sorted(k for k in current if k != "num_shards" and stored.get(k) != current[k])
        if changed:
            raise ValueError(f"out_dir: {root} holds shards of a different config (differs in {changed}); "
                             "delete the folder or give the data config another name")
    if stored != current:
        write_json_atomic(path, current)


def summarize(root: str | Path, spec: DatasetSpec) -> dict:
    """Class balance and signed-distance distribution over all shards (all must exist)."""
    labels, distances, counts = [], [], []
    for i in range(spec.num_shards):
        if not shard_dir(root, i).exists():
            raise FileNotFoundError(f"shard {i} of {spec.num_shards} is missing under {root}")
        shard = read_shard(Path(root), i)
        labels.append(np.asarray(shard["label"]))
        distances.append(np.asarray(shard["signed_distance"]))
        counts.append(len(shard["label"]))
    label = np.concatenate(labels)
    sd = np.concatenate(distances)
    edges = np.array([-np.inf, -0.05, -0.02, -0.01, -0.005, 0, 0.005, 0.01, 0.02, 0.05, np.inf])
    hist, _ = np.histogram(sd, bins=edges)
    return {
        "samples": int(len(label)),
        "shard_counts": counts,
        "positive_rate": float(label.mean()),
        "signed_distance_quantiles": {str(q): float(np.quantile(sd, q)) for q in (0.01, 0.1, 0.5, 0.9, 0.99)},
        "signed_distance_histogram": {"edges_m": [float(e) for e in edges], "counts": hist.tolist()},
    }


def write_manifest(root: str | Path, spec: DatasetSpec, object_set: dict | None = None) -> dict:
    """Summarise every shard, check the class balance, and write manifest.json atomically."""
    stats = summarize(root, spec)
    lo, hi = spec.positive_rate_band
    if not lo <= stats["positive_rate"] <= hi:
        raise ValueError(
            f"dataset {root}: positive (colliding) rate {stats['positive_rate']:.3f} is outside "
            f"positive_rate_band {spec.positive_rate_band}; the sampling is degenerate for these objects"
        )
    manifest = {
        "format": "contactnet.pairs/1",
        "spec": asdict(spec),
        "fields": list(FIELDS),
        "objects": object_set,
        "stats": stats,
        "versions": {"torch": torch.__version__, "numpy": np.__version__},
    }
    write_json_atomic(Path(root) / "manifest.json", manifest)
    return manifest


def load_manifest(root: str | Path) -> dict:
    path = Path(root) / "manifest.json"
    if not path.exists():
        raise FileNotFoundError(f"root: {root} has no manifest.json (generation not finished?)")
    return json.loads(path.read_text())

"""Generate a labelled pair dataset from a Hydra config:

    python -m contactnet.data.generate data=procedural_small
    python -m contactnet.data.generate data=procedural_small split=train shard=3   # one shard
    python -m contactnet.data.generate -m data=procedural_small shard='range(0,8)' \
        hydra/launcher=joblib hydra.launcher.n_jobs=4                            # one job per shard

Builds (or finishes) the object set, splits objects into known and unknown families, then makes
every split's shards (resuming: finished shards are skipped) and, once a split has all of them,
its manifest. Writes under `${paths.data_dir}/<data.name>/`.

Scale-out: `shard=i` alone makes shard i of every split that has one, so a sweep over
`shard=range(0, N)` (N: the largest `num_shards`) through a Hydra launcher (joblib on one machine,
submitit on SLURM; `pip install -e .[scale]`) makes the whole dataset. The jobs may start together:
the object set is built by one of them while the others wait (a lock in its folder), shards are
renamed into place only if absent, and a split's manifest is written by the job that finds its
last shard present (the README's Data section has the SLURM command).

`device=auto` (the default) labels on the GPU when torch sees one (the CUDA kernels), else on the
CPU with `workers` processes; `device=cpu` / `device=cuda` force one. Poses are drawn on the CPU
either way, so a seed gives the same pairs on any machine.
"""

from dataclasses import asdict
from pathlib import Path

import hydra
import torch
from omegaconf import DictConfig, OmegaConf

from contactnet.data.dataset import DatasetSpec, generate_shards, load_manifest, shard_dir, write_manifest
from contactnet.data.objects import ObjectSet, build_object_set, load_object_set
from contactnet.data.pairs import PLACEMENTS, PairSpec
from contactnet.data.seeds import derive_seed
from contactnet.data.storage import as_json
from contactnet.geometry.mesh import Mesh, MeshLibrary


def resolve_device(device: str | torch.device) -> torch.device:
    """The labelling device: "auto" is CUDA when torch sees one, else CPU; an explicit CUDA
    device must be usable here."""
    if str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(device)
    except RuntimeError as error:
        raise ValueError(f"device: expected 'auto', 'cpu' or 'cuda[:i]', got {device!r}") from error
    if device.type not in ("cpu", "cuda"):
        raise ValueError(f"device: expected 'auto', 'cpu' or 'cuda[:i]', got {str(device)!r}")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device: {str(device)!r} requested, but torch sees no CUDA device here")
    return device


def object_library(objects: ObjectSet, device: str | torch.device = "cpu") -> MeshLibrary:
    """Exact labels are computed in float64."""
    meshes = [Mesh(v, f, name=n) for v, f, n in zip(objects.vertices, objects.faces, objects.names)]
    return MeshLibrary(meshes, dtype=torch.float64, device=device)


def split_objects(objects: ObjectSet, unknown_families, used=("known", "unknown")) -> dict[str, list[int]]:
    """Object ids by role: "known" / "unknown" (by family; never the inner copies) and
    "known_inner" / "unknown_inner" (the inner copies of those objects). `unknown_families`: a
    list of families, or "all" (an evaluation-only set such as robosuite_real); `used`: the groups
    some split draws from, each of which must be non-empty."""
    unknown = set(objects.families) if unknown_families == "all" else set(unknown_families)
    missing = unknown - set(objects.families)
    if missing:
        raise ValueError(f"unknown_families: {sorted(missing)} are not in the object set")
    inner_of = objects.inner_of or [None] * len(objects)
    ids = {"known": [i for i, f in enumerate(objects.families) if f not in unknown and inner_of[i] is None],
           "unknown": [i for i, f in enumerate(objects.families) if f in unknown and inner_of[i] is None]}
    empty = sorted(group for group in set(used) if not ids[group])
    if empty:
        raise ValueError(f"unknown_families: the {' and '.join(empty)} object set(s) that splits use would be empty")
    for role in ("known", "unknown"):
        originals = set(ids[role])
        ids[f"{role}_inner"] = [i for i, o in enumerate(inner_of) if o in originals]
    return ids


def split_spec(data: DictConfig, name: str, ids: dict[str, list[int]]) -> DatasetSpec:
    """The DatasetSpec of split `name`: its objects ("known" / "unknown"), its placement (one of
    PLACEMENTS; `manipulate: true / false` in older configs) and the positive-rate band of that
    placement (`positive_rate_band.<placement>`, else the uniform one)."""
    split = data.splits[name]
    placement = split.get("placement", None) or ("manipulated" if split.get("manipulate", True) else "uniform")
    if placement not in PLACEMENTS:
        raise ValueError(f"splits.{name}.placement: expected one of {PLACEMENTS}, got {placement!r}")
    band = data.positive_rate_band.get(placement, data.positive_rate_band.uniform)
    pairs = PairSpec(poses_per_pair=split.poses_per_pair, placement=placement,
                     uniform_fraction=split.get("uniform_fraction", 0.0), **data.pairs)
    return DatasetSpec(object_ids=ids[split.objects], inner_ids=ids[f"{split.objects}_inner"] or None,
                       nested_fraction=split.get("nested_fraction", 0.0), pairs_per_shard=split.pairs_per_shard,
                       num_shards=split.num_shards, seed=derive_seed(data.seed, name), pairs=pairs,
                       positive_rate_band=tuple(band))


def _generate_in_worker(job: tuple[dict, str, str, int]) -> None:
    data, out_dir, split, shard = job
    torch.set_num_threads(1)
    generate(OmegaConf.create(data), out_dir, split=split, shard=shard, progress=False, device="cpu")


def _generate_in_parallel(data: DictConfig, out: Path, names, workers: int, progress: bool) -> None:
    """Missing shards of `names`, one process each (spawned: no forked OpenMP state)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from tqdm import tqdm

    config = OmegaConf.to_container(data, resolve=True)
    jobs = [(config, str(out), name, i) for name in names for i in range(data.splits[name].num_shards)
            if not shard_dir(out / name, i).exists()]
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        list(tqdm(pool.map(_generate_in_worker, jobs), total=len(jobs), desc="shards", disable=not progress))


def generate(data: DictConfig, out_dir: str | Path, split: str | None = None, shard: int | None = None,
             workers: int = 1, progress: bool = True, device: str | torch.device = "auto") -> dict[str, dict | None]:
    """Generate the dataset of the data config `data` under `out_dir` (only `split` / `shard` if
    given); returns each split's manifest (None while some of its shards are missing). `workers`
    CPU processes label shards in parallel; on a GPU (`device`) one process labels them all."""
    out = Path(out_dir)
    device = resolve_device(device)
    # Plain lists, not ListConfigs: the spec is written to the set's JSON manifest.
    object_spec = hydra.utils.instantiate(data.objects, _convert_="all")
    build_object_set(object_spec, out / "objects", progress=progress)
    objects = load_object_set(out / "objects")
    lib = object_library(objects, device)
    ids = split_objects(objects, data.unknown_families, used={entry.objects for entry in data.splits.values()})
    object_table = {"root": str(out / "objects"), "names": objects.names, "families": objects.families,
                    "known": ids["known"], "unknown": ids["unknown"]}
    names = list(data.splits) if split is None else [split]
    for name in names:
        if name not in data.splits:
            raise ValueError(f"split: expected one of {list(data.splits)}, got {name!r}")
    _check_shard(data, names, shard)
    if workers > 1 and shard is None and device.type == "cpu":
        _generate_in_parallel(data, out, names, workers, progress)
    manifests = {}
    for name in names:
        spec = split_spec(data, name, ids)
        if shard is None or int(shard) < spec.num_shards:
            generate_shards(lib, spec, out / name, shards=None if shard is None else [int(shard)], progress=progress)
        manifests[name] = _finish_split(out / name, spec, object_table)
    return manifests


def _check_shard(data: DictConfig, names: list[str], shard: int | None) -> None:
    """`shard` must exist in some split of `names` (a sweep runs to the largest `num_shards`;
    splits with fewer shards skip the higher indices)."""
    if shard is None:
        return
    most = max(data.splits[name].num_shards for name in names)
    if not 0 <= int(shard) < most:
        raise ValueError(f"shard: expected an index in [0, {most}) (the largest num_shards of {names}), got {shard}")


def _finish_split(root: Path, spec: DatasetSpec, object_table: dict) -> dict | None:
    """The split's manifest once all its shards exist (None before). Written only when missing or
    stale (another spec), so the jobs of a sweep do not each rewrite the manifests of splits that
    are already complete; whichever job renames a split's last shard sees every shard present."""
    if not all(shard_dir(root, i).exists() for i in range(spec.num_shards)):
        return None
    stored = load_manifest(root) if (root / "manifest.json").exists() else None
    current = as_json(asdict(spec))
    if stored is None or stored["spec"] != current or stored["objects"] != object_table:
        write_manifest(root, spec, object_table)
        stored = load_manifest(root)  # as a later job reads it (lists, not tuples)
    stats = stored["stats"]
    print(f"{root.name}: {stats['samples']} samples, positive rate {stats['positive_rate']:.3f}")
    return stored


def run(cfg: DictConfig) -> dict[str, dict | None]:
    """The entry point's work on a composed `generate` config."""
    return generate(cfg.data, cfg.out_dir, split=cfg.split, shard=cfg.shard, workers=cfg.workers,
                    progress=cfg.progress, device=cfg.get("device", "auto"))


@hydra.main(version_base="1.3", config_path="../../conf", config_name="generate")
def main(cfg: DictConfig) -> None:
    print(OmegaConf.to_yaml(cfg.data))
    run(cfg)


if __name__ == "__main__":
    main()

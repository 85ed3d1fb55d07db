"""LightningDataModule over generated pair datasets.

An item is one object-pair group: the two objects' point clouds (K points with normals) and the
group's G poses and labels, so a model encodes each cloud once per group and reuses it for all G
queries. A batch stacks B groups:

    points_a, normals_a, points_b, normals_b   (B, K, 3) float32, object frames
    aabb_a, aabb_b                             (B, 2, 3) min/max corners of the object's mesh
    ids_a, ids_b                               (B,) int64 object ids
    poses_a, poses_b                           (B, G, 7) [x, y, z, qw, qx, qy, qz]
    label                                      (B, G) float32, 1 = colliding
    signed_distance, barrier                   (B, G) float32

Training groups get rotation augmentation: each object's shape is rotated by its own random R
(points, normals and mesh box) and re-centred on its new AABB centre, and the inverse transform
is composed into its poses, so the occupied space — and the exact label — is unchanged.
`augment` picks R: "so3" (uniform over all rotations, the paper's choice), "cube" (one of the 24
rotations that map the box's axes onto axes: the embedding grid stays as tight as at test time,
where objects keep their own frames; a general R loosens it) or "none".

Partial clouds (what one depth camera sees; cached views from `contactnet.data.partial_views`,
built once on first use when missing): `clouds="single_view"` replaces each object's cloud by one
of its views, chosen by (group, side) alone so every model is scored on the same views;
`clouds="two_views"` by two distinct ones fused (K of their 2K points, drawn at random: a second
camera, or the same one moved); `partial_prob` replaces each cloud of a training group by a
random single view with that probability, or with `partial_max_views` N > 1 by 1 to N distinct
random views fused (as many views equally likely).
A partial cloud's box is its visible points' bounds (all a user with a depth image knows), while
the poses stay in the object's frame; rotation augmentation turns it like the full cloud.
`completion` (a `ViewCompletion` checkpoint, `contactnet.training.completion`) completes every
single view before use: the visible points plus the predicted unseen side, boxed by their bounds.
"""

import itertools
from collections.abc import Iterator
from pathlib import Path

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from contactnet.data.dataset import FIT_SPLITS, UNIFORM_TEST_SPLITS, finished_test_splits, load_manifest, read_shard
from contactnet.data.objects import load_object_set
from contactnet.data.seeds import derive_rng, derive_seed
from contactnet.geometry.frames import reframe_object
from contactnet.geometry.poses import compose_poses, matrix_to_quaternion

AUGMENTATIONS = ("so3", "cube", "none")
CLOUDS = ("full", "single_view", "two_views")


def _cube_rotations() -> torch.Tensor:
    """(24, 4) quaternions of the rotations that permute the coordinate axes (with signs)."""
    mats = [torch.diag(torch.tensor(signs, dtype=torch.float32))[list(perm)]
            for perm in itertools.permutations(range(3)) for signs in itertools.product((1.0, -1.0), repeat=3)]
    return matrix_to_quaternion(torch.stack([m for m in mats if torch.det(m) > 0]))


def _check_clouds(clouds: str, partial_prob: float, completion=None, partial_max_views: int = 1) -> None:
    if clouds not in CLOUDS:
        raise ValueError(f"clouds: expected one of {CLOUDS}, got {clouds!r}")
    if not 0 <= partial_prob <= 1:
        raise ValueError(f"partial_prob: expected a probability in [0, 1], got {partial_prob}")
    if isinstance(partial_max_views, bool) or not isinstance(partial_max_views, int) or partial_max_views < 1:
        raise ValueError(f"partial_max_views: expected a whole number of views, at least 1, got {partial_max_views!r}")
    if completion is not None and clouds == "full" and partial_prob == 0:
        raise ValueError(f"completion: {completion} completes single views, but no cloud is one here "
                         "(clouds='full', partial_prob=0)")
    if completion is not None and (clouds == "two_views" or (partial_prob > 0 and partial_max_views > 1)):
        raise ValueError(f"completion: {completion} completes single views, not fused ones "
                         f"(clouds={clouds!r}, partial_max_views={partial_max_views})")


def _bounds(points: torch.Tensor) -> torch.Tensor:
    return torch.stack([points.amin(0), points.amax(0)])


def _augmentation(augment: bool | str) -> str:
    if isinstance(augment, bool):
        return "so3" if augment else "none"
    if augment not in AUGMENTATIONS:
        raise ValueError(f"augment: expected one of {AUGMENTATIONS} (or a bool), got {augment!r}")
    return augment


class PairGroups(Dataset):
    """The object-pair groups of one split (memory-mapped shards)."""

    def __init__(self, root: str | Path, objects, augment: bool | str = False, seed: int = 0,
                 allowed_objects: set[int] | None = None, clouds: str = "full", partial_prob: float = 0.0,
                 frame: torch.Tensor | None = None, completion: str | Path | None = None,
                 partial_max_views: int = 1):
        """clouds, partial_prob, partial_max_views, completion: see the module docstring. frame (4,)
        quaternion: every object given in that fixed frame (`reframe_object`; test-time frame
        averaging) instead of `augment`'s random ones."""
        _check_clouds(clouds, partial_prob, completion, partial_max_views)
        if frame is not None and (not isinstance(frame, torch.Tensor) or frame.shape != (4,)):
            raise ValueError(f"frame: expected a (4,) quaternion tensor [qw, qx, qy, qz], got "
                             f"{getattr(frame, 'shape', type(frame).__name__)}")
        self.frame = None if frame is None else frame.float() / frame.float().norm()
        self.manifest = load_manifest(root)
        spec = self.manifest["spec"]
        self.group = spec["pairs"]["poses_per_pair"]
        self.groups_per_shard = spec["pairs_per_shard"]
        self.shards = [read_shard(Path(root), i) for i in range(spec["num_shards"])]
        # (shard, group) of every kept group; with allowed_objects only groups of those objects.
        self.index = [(s, g) for s, shard in enumerate(self.shards) for g in range(self.groups_per_shard)
                      if allowed_objects is None
                      or {int(shard["ids_a"][g * self.group]), int(shard["ids_b"][g * self.group])} <= allowed_objects]
        self.objects = objects
        self.vertices = [torch.as_tensor(v, dtype=torch.float32) for v in objects.vertices]
        mode = _augmentation(augment)
        self.augment = mode != "none"
        self.rotations = _cube_rotations() if mode == "cube" else None  # None: any rotation
        self.seed = seed
        self.epoch = 0  # used for plain integer indices; EpochSampler's (index, epoch) items override it
        self.clouds, self.partial_prob, self.partial_max_views = clouds, partial_prob, partial_max_views
        self.views = None
        if clouds != "full" or partial_prob > 0:
            self.views = objects.partial_views() if completion is None else objects.completed_views(completion)
            if self.views.points.shape[2] != objects.points.shape[1]:
                raise ValueError(f"clouds: the cached views hold {self.views.points.shape[2]} points, the full clouds "
                                 f"{objects.points.shape[1]}; rebuild {objects.root / 'partial'} with the set's K")
            needed = max(2 if clouds == "two_views" else 1, partial_max_views if partial_prob > 0 else 1)
            if self.views.views_per_object < needed:
                raise ValueError(f"clouds, partial_max_views: {needed} distinct views per object needed; "
                                 f"{objects.root / 'partial'} holds {self.views.views_per_object}")

    def __len__(self) -> int:
        return len(self.index)

    def _shape(self, obj: int, view: tuple[int, ...] | None = None):
        """Full cloud and mesh box, or (views given) those cached views fused and their points' bounds."""
        if view is not None:
            points, normals = self.views.points[obj, list(view)], self.views.normals[obj, list(view)]
            k = points.shape[1]
            points, normals = points.reshape(-1, 3), normals.reshape(-1, 3)
            if len(view) > 1:  # K points as every cloud has, the same ones for every model scored
                keep = derive_rng(0, "fused views", obj, *view).permutation(len(points))[:k]
                points, normals = points[keep], normals[keep]
            points = torch.as_tensor(points, dtype=torch.float32)
            return points, torch.as_tensor(normals, dtype=torch.float32), _bounds(points)
        points = torch.as_tensor(self.objects.points[obj], dtype=torch.float32)
        normals = torch.as_tensor(self.objects.normals[obj], dtype=torch.float32)
        aabb = torch.as_tensor(self.objects.aabb[obj], dtype=torch.float32)
        return points, normals, aabb

    def _views(self, index: int, epoch: int) -> list[tuple[int, ...] | None]:
        """The cached views each side uses (None: the full cloud)."""
        s, g = self.index[index]
        views = [None, None]
        count = self.views.views_per_object if self.views is not None else 0
        if self.clouds != "full":  # keyed by the group's place in its split, not by a filtered index
            key = s * self.groups_per_shard + g
            views = [(derive_seed(0, key, side) % count,) for side in (0, 1)]
            if self.clouds == "two_views":  # a second view, another than the first
                views = [(v, (v + 1 + derive_seed(1, key, side) % (count - 1)) % count)
                         for side, (v,) in enumerate(views)]
        if self.partial_prob > 0:  # its own stream: the rotations drawn do not depend on partial_prob
            rng = self.item_rng("partial", index, epoch)
            for side in (0, 1):
                if rng.random() < self.partial_prob:
                    if self.partial_max_views == 1:  # one draw: the stream single views always had
                        views[side] = (int(rng.integers(count)),)
                    else:
                        n = int(rng.integers(1, self.partial_max_views + 1))
                        views[side] = tuple(int(v) for v in rng.choice(count, n, replace=False))
        return views

    def item_rng(self, stream: str, index: int, epoch: int) -> np.random.Generator:
        """The draws of item `index` in `epoch` for `stream` ("rotation" or "partial"): keyed by
        (seed, stream, epoch, index) in full, so no two (epoch, index) pairs share their draws."""
        return derive_rng(self.seed, stream, epoch, index)

    def _rotation(self, rng: np.random.Generator) -> torch.Tensor:
        """A training rotation (4,) drawn from `rng`: uniform over SO(3), or one of the cube's."""
        if self.rotations is not None:
            return self.rotations[int(rng.integers(len(self.rotations)))]
        q = torch.from_numpy(rng.standard_normal(4)).float()
        return q / q.norm()

    def _turn(self, obj: int, poses: torch.Tensor, q: torch.Tensor, view: tuple[int, ...] | None = None):
        """Object `obj` (its full cloud or cached `view`) turned by q and re-centred on its mesh's
        new AABB (`reframe_object`), the inverse composed into `poses`."""
        points, normals, _ = self._shape(obj, view)
        points, normals, aabb, inverse = reframe_object(points, normals, self.vertices[obj], q.float(),
                                                        box_from_points=view is not None)
        return points, normals, aabb, compose_poses(poses, inverse.expand_as(poses))

    def __getitem__(self, item: int | tuple[int, int]) -> dict[str, torch.Tensor]:
        """item: a group index, or (index, epoch) as `EpochSampler` yields it: the epoch travels
        with the index, so worker processes (which hold copies of this dataset) see it too."""
        index, epoch = item if isinstance(item, tuple) else (item, self.epoch)
        s, g = self.index[index]
        shard = self.shards[s]
        rows = slice(g * self.group, (g + 1) * self.group)
        ids_a, ids_b = int(shard["ids_a"][rows.start]), int(shard["ids_b"][rows.start])
        poses_a = torch.from_numpy(np.array(shard["poses_a"][rows]))
        poses_b = torch.from_numpy(np.array(shard["poses_b"][rows]))
        view_a, view_b = self._views(index, epoch)
        if self.frame is not None:
            pa, na, aabb_a, poses_a = self._turn(ids_a, poses_a, self.frame, view_a)
            pb, nb, aabb_b, poses_b = self._turn(ids_b, poses_b, self.frame, view_b)
        elif self.augment:
            rng = self.item_rng("rotation", index, epoch)
            pa, na, aabb_a, poses_a = self._turn(ids_a, poses_a, self._rotation(rng), view_a)
            pb, nb, aabb_b, poses_b = self._turn(ids_b, poses_b, self._rotation(rng), view_b)
        else:
            (pa, na, aabb_a), (pb, nb, aabb_b) = self._shape(ids_a, view_a), self._shape(ids_b, view_b)
        return {
            "points_a": pa, "normals_a": na, "aabb_a": aabb_a, "ids_a": torch.tensor(ids_a),
            "points_b": pb, "normals_b": nb, "aabb_b": aabb_b, "ids_b": torch.tensor(ids_b),
            "poses_a": poses_a, "poses_b": poses_b,
            "label": torch.from_numpy(np.array(shard["label"][rows], dtype=np.float32)),
            "signed_distance": torch.from_numpy(np.array(shard["signed_distance"][rows])),
            "barrier": torch.from_numpy(np.array(shard["barrier"][rows])),
        }


class EpochSampler(Sampler):
    """Group indices in a seeded order that changes every epoch, each paired with the epoch.

    Lightning calls `set_epoch` at the start of every training epoch (on any sampler that has it),
    while it builds the train loader only once; the epoch therefore reaches `PairGroups` through
    the indices, in the main process and in worker processes alike, and epoch e of a resumed run
    draws the same order and rotations as epoch e of an uninterrupted one.
    """

    def __init__(self, size: int, seed: int = 0, shuffle: bool = True):
        self.size, self.seed, self.shuffle, self.epoch = size, seed, shuffle, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def __len__(self) -> int:
        return self.size

    def __iter__(self) -> Iterator[tuple[int, int]]:
        if self.shuffle:
            order = torch.randperm(self.size, generator=torch.Generator().manual_seed(self.seed * 1_000_003 + self.epoch))
        else:
            order = torch.arange(self.size)
        return ((int(i), self.epoch) for i in order)


class PairDataModule(L.LightningDataModule):
    """Train / val / test_known / test_unknown loaders over a generated dataset folder."""

    def __init__(self, root: str, groups_per_batch: int = 8, num_workers: int = 0, augment: bool | str = "cube",
                 seed: int = 0, train_objects: int | None = None, clouds: str = "full", partial_prob: float = 0.0,
                 completion: str | None = None, partial_max_views: int = 1):
        """augment: the training rotations, "so3", "cube" or "none" (True / False mean "so3" / "none").
        train_objects: train only on pairs among the first N known objects (data efficiency).
        clouds: "full", "single_view" or "two_views" clouds in every split; partial_prob: probability that a
        training cloud is replaced by a random single view (partial_max_views > 1: by 1 to that many
        views fused); completion: a ViewCompletion checkpoint that completes those views (see the
        module docstring)."""
        super().__init__()
        _check_clouds(clouds, partial_prob, completion, partial_max_views)
        self.clouds, self.partial_prob, self.completion = clouds, partial_prob, completion
        self.partial_max_views = partial_max_views
        self.train_objects = train_objects
        self.root = Path(root)
        self.groups_per_batch = groups_per_batch
        self.num_workers = num_workers
        self.augment = _augmentation(augment)
        self.seed = seed
        self.datasets: dict[str, PairGroups] = {}

    @property
    def test_splits(self) -> list[str]:
        """The test splits of this dataset (`finished_test_splits`)."""
        return finished_test_splits(self.root)

    def setup(self, stage: str | None = None) -> None:
        if self.datasets:
            return
        missing = [s for s in (*FIT_SPLITS, *UNIFORM_TEST_SPLITS) if not (self.root / s / "manifest.json").exists()]
        if missing:
            raise FileNotFoundError(f"root: {self.root} lacks the splits {missing}; generate them with "
                                    "`python -m contactnet.data.generate`")
        objects = load_object_set(self.root / "objects")
        allowed = None
        if self.train_objects is not None:
            known = load_manifest(self.root / "train")["objects"]["known"]
            if not 0 < self.train_objects <= len(known):
                raise ValueError(f"train_objects: expected 1..{len(known)} (known objects), got {self.train_objects}")
            allowed = set(known[: self.train_objects])
        for split in (*FIT_SPLITS, *self.test_splits):
            self.datasets[split] = PairGroups(self.root / split, objects, augment=self.augment if split == "train" else "none",
                                              seed=self.seed, allowed_objects=allowed if split == "train" else None,
                                              clouds=self.clouds, partial_prob=self.partial_prob if split == "train" else 0.0,
                                              partial_max_views=self.partial_max_views,
                                              completion=self.completion if self.clouds != "full" or split == "train"
                                              else None)
        if len(self.datasets["train"]) == 0:
            raise ValueError(f"train_objects: no training pair uses only the first {self.train_objects} objects")

    def _loader(self, split: str, shuffle: bool) -> DataLoader:
        sampler = EpochSampler(len(self.datasets[split]), self.seed, shuffle)
        return DataLoader(self.datasets[split], batch_size=self.groups_per_batch, sampler=sampler,
                          num_workers=self.num_workers, pin_memory=torch.cuda.is_available(),
                          persistent_workers=self.num_workers > 0)

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader("val", shuffle=False)

    def test_dataloader(self) -> list[DataLoader]:
        """One loader per test split, in the order of `test_splits`."""
        return [self._loader(split, shuffle=False) for split in self.test_splits]

"""The DataModule: group batches, rotation augmentation that preserves the occupied space (and
so the exact label), reproducibility, clear errors."""

import lightning as L
import numpy as np
import pytest
import torch

from contactnet.data.datamodule import EpochSampler, PairDataModule
from contactnet.data.objects import load_object_set
from contactnet.geometry import Mesh, MeshLibrary
from contactnet.geometry.poses import transform_points
from contactnet.ops import mesh_collide


@pytest.fixture(scope="module")
def dataset(tiny_data):
    return tiny_data / "procedural_tiny"


def _batch(dm, split="train"):
    loader = dm.train_dataloader() if split == "train" else dm.val_dataloader()
    return next(iter(loader))


def test_batches_group_poses_by_object_pair(dataset):
    dm = PairDataModule(str(dataset), groups_per_batch=3, augment=False)
    dm.setup()
    batch = _batch(dm)
    assert batch["points_a"].shape == (3, 256, 3) and batch["poses_a"].shape == (3, 16, 7)
    assert batch["label"].shape == (3, 16) and batch["label"].dtype == torch.float32
    assert dm.test_splits == ["test_known", "test_unknown", "boundary_known", "boundary_unknown", "nested_known",
                             "nested_unknown"]
    assert len(dm.test_dataloader()) == 6


@pytest.mark.parametrize("augment", [True, "cube"])
def test_augmentation_keeps_world_geometry_and_labels(dataset, augment):
    plain = PairDataModule(str(dataset), augment=False)
    aug = PairDataModule(str(dataset), augment=augment, seed=3)
    plain.setup()
    aug.setup()
    objects = load_object_set(dataset / "objects")
    for index in range(4):
        x, y = plain.datasets["train"][index], aug.datasets["train"][index]
        for side in ("a", "b"):
            # Points moved by the new poses land where the old poses put the old points.
            world_old = transform_points(x[f"poses_{side}"][:, None].double(), x[f"points_{side}"].double())
            world_new = transform_points(y[f"poses_{side}"][:, None].double(), y[f"points_{side}"].double())
            torch.testing.assert_close(world_new, world_old, atol=1e-5, rtol=0)
            # The augmented frame keeps the convention: origin at the centre of the mesh's AABB.
            torch.testing.assert_close(y[f"aabb_{side}"].sum(0), torch.zeros(3), atol=1e-5, rtol=0)
            extent_old = (x[f"aabb_{side}"][1] - x[f"aabb_{side}"][0]).sort().values
            extent_new = (y[f"aabb_{side}"][1] - y[f"aabb_{side}"][0]).sort().values
            if augment == "cube":  # axes map onto axes: the box is as tight as before
                torch.testing.assert_close(extent_new, extent_old, atol=1e-5, rtol=0)
            else:
                assert not torch.allclose(y[f"points_{side}"], x[f"points_{side}"])
        # The exact label of the augmented query equals the stored one.
        ia, ib = int(x["ids_a"]), int(x["ids_b"])
        lib = MeshLibrary([_moved_mesh(objects, ia, x, y, "a"), _moved_mesh(objects, ib, x, y, "b")], dtype=torch.float64)
        got = mesh_collide(lib, torch.zeros(16, dtype=torch.long), torch.ones(16, dtype=torch.long),
                           y["poses_a"].double(), y["poses_b"].double())
        assert (got.float() == x["label"]).all()



def _moved_mesh(objects, obj, x, y, side):
    """The object's mesh in its augmented frame: old frame -> world (old pose) -> new frame."""
    from contactnet.geometry.poses import invert_poses

    v = torch.as_tensor(objects.vertices[obj])
    world = transform_points(x[f"poses_{side}"][0].double(), v)
    return Mesh(transform_points(invert_poses(y[f"poses_{side}"][0].double()), world), objects.faces[obj])


def test_a_fixed_frame_keeps_world_geometry_and_labels(dataset):
    """PairGroups(frame=q): every object turned by the same q (test-time frames), its poses
    corrected so each query's geometry, and so its stored label, is unchanged."""
    from contactnet.data.datamodule import PairGroups
    from contactnet.geometry.frames import frame_quaternions

    objects = load_object_set(dataset / "objects")
    q = frame_quaternions(2)[1]
    plain = PairGroups(dataset / "test_unknown", objects)
    turned = PairGroups(dataset / "test_unknown", objects, frame=q)
    again = PairGroups(dataset / "test_unknown", objects, frame=q, augment=True)  # the fixed frame wins
    for index in range(len(plain)):
        x, y, z = plain[index], turned[index], again[index]
        for side in ("a", "b"):
            world_old = transform_points(x[f"poses_{side}"][:, None].double(), x[f"points_{side}"].double())
            world_new = transform_points(y[f"poses_{side}"][:, None].double(), y[f"points_{side}"].double())
            torch.testing.assert_close(world_new, world_old, atol=1e-5, rtol=0)
            torch.testing.assert_close(z[f"points_{side}"], y[f"points_{side}"], rtol=0, atol=0)
        ia, ib = int(x["ids_a"]), int(x["ids_b"])
        lib = MeshLibrary([_moved_mesh(objects, ia, x, y, "a"), _moved_mesh(objects, ib, x, y, "b")],
                          dtype=torch.float64)
        n = len(x["label"])
        got = mesh_collide(lib, torch.zeros(n, dtype=torch.long), torch.ones(n, dtype=torch.long),
                           y["poses_a"].double(), y["poses_b"].double())
        assert (got.float() == x["label"]).all()
    with pytest.raises(ValueError, match="frame"):
        PairGroups(dataset / "test_unknown", objects, frame=torch.ones(3))


def test_augmentation_is_reproducible_and_changes_per_epoch(dataset):
    dm = PairDataModule(str(dataset), augment=True, seed=1)
    dm.setup()
    ds = dm.datasets["train"]
    first = ds[0]["points_a"]
    torch.testing.assert_close(ds[0]["points_a"], first)
    assert not torch.allclose(ds[(0, 1)]["points_a"], first)
    # Validation and test sets are never augmented.
    assert not dm.datasets["val"].augment and not dm.datasets["test_unknown"].augment


def test_augmentation_draws_never_repeat_across_epoch_and_index(dataset):
    """Every (epoch, index) has its own draws. The former seed `seed·1000003 + epoch·7919 + index`
    gave (epoch 1, index 0) the rotations of (epoch 0, index 7919), and any 32-bit seed (all that
    torch's CPU generator keeps) repeats about once among these 10⁵ keys."""
    dm = PairDataModule(str(dataset), augment="so3", seed=3)
    dm.setup()
    ds = dm.datasets["train"]
    keys = [(index, epoch) for epoch in range(100) for index in range(1000)] + [(7919, 0)]
    draws = {int(ds.item_rng("rotation", index, epoch).integers(2**63)) for index, epoch in keys}
    assert len(draws) == len(keys)
    # And items are rotated by exactly that stream.
    item = ds[(1, 2)]
    poses = torch.from_numpy(np.array(ds.shards[ds.index[1][0]]["poses_a"][ds.index[1][1] * ds.group:][:ds.group]))
    points, _, _, poses_a = ds._turn(int(item["ids_a"]), poses, ds._rotation(ds.item_rng("rotation", 1, 2)))
    torch.testing.assert_close(item["points_a"], points)
    torch.testing.assert_close(item["poses_a"], poses_a)


class _RecordRotations(L.LightningModule):
    """Records every training batch's augmented box corners per epoch (a fingerprint of the drawn
    rotations: aabb_a is R·box re-centred) and trains nothing."""

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(()))
        self.seen: dict[int, list[tuple]] = {}

    def training_step(self, batch, batch_idx):
        rows = torch.cat([batch["ids_a"][:, None].float(), batch["aabb_a"].flatten(1)], 1)
        self.seen.setdefault(self.current_epoch, []).extend(tuple(r) for r in rows.round(decimals=5).tolist())
        return self.weight * 0

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.0)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_augmentation_changes_every_epoch_through_a_real_trainer(dataset, num_workers):
    """Lightning builds the train loader once: the epoch must still reach the dataset, also in
    worker processes, and each epoch's rotations must be the ones `PairGroups` draws for it."""
    dm = PairDataModule(str(dataset), groups_per_batch=2, augment="so3", seed=5, num_workers=num_workers)
    recorder = _RecordRotations()
    trainer = L.Trainer(max_epochs=2, accelerator="cpu", logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, limit_val_batches=0)
    trainer.fit(recorder, dm)
    assert sorted(recorder.seen) == [0, 1]
    ds = dm.datasets["train"]
    for epoch in (0, 1):
        expected = sorted(tuple(torch.cat([torch.tensor([float(ds[(i, epoch)]["ids_a"])]), ds[(i, epoch)]["aabb_a"].flatten()])
                                .round(decimals=5).tolist()) for i in range(len(ds)))
        assert sorted(recorder.seen[epoch]) == expected
    assert sorted(recorder.seen[0]) != sorted(recorder.seen[1])


def test_epoch_sampler_order_is_seeded_per_epoch():
    sampler = EpochSampler(50, seed=2)
    first = list(sampler)
    assert sorted(i for i, _ in first) == list(range(50)) and {e for _, e in first} == {0}
    assert list(sampler) == first
    sampler.set_epoch(3)
    third = list(sampler)
    assert {e for _, e in third} == {3} and [i for i, _ in third] != [i for i, _ in first]
    assert [i for i, _ in EpochSampler(5, shuffle=False)] == list(range(5))


def test_cube_augmentation_draws_the_24_axis_rotations(dataset):
    from contactnet.data.datamodule import _cube_rotations
    from contactnet.geometry.poses import quaternion_to_matrix

    mats = quaternion_to_matrix(_cube_rotations()).round()
    assert len({tuple(m.flatten().tolist()) for m in mats}) == 24
    assert (mats.abs().sum(-1) == 1).all() and (torch.linalg.det(mats) == 1).all()
    plain = PairDataModule(str(dataset), augment=False)
    cube = PairDataModule(str(dataset), augment="cube", seed=0)
    plain.setup()
    cube.setup()
    seen = set()
    for epoch in range(8):
        for index in range(len(plain.datasets["train"])):
            x, y = plain.datasets["train"][index], cube.datasets["train"][(index, epoch)]
            # normals_new = normals_old R^T: the drawn R, which must be one of the 24.
            r = torch.linalg.lstsq(x["normals_a"].double(), y["normals_a"].double()).solution.T
            assert (r - r.round()).abs().max() < 1e-4
            seen.add(tuple(r.round().flatten().tolist()))
    assert seen <= {tuple(m.flatten().tolist()) for m in mats} and len(seen) > 12


def test_bad_augmentation_is_a_clear_error(dataset):
    with pytest.raises(ValueError, match="augment: expected one of"):
        PairDataModule(str(dataset), augment="random")


def test_missing_dataset_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="lacks the splits"):
        PairDataModule(str(tmp_path)).setup()


def _view_of(views, obj, points):
    """The index of the cached view of `obj` whose points these are (None: none of them)."""
    matches = [v for v in range(views.views_per_object) if torch.equal(torch.as_tensor(views.points[obj, v]), points)]
    return matches[0] if matches else None


def test_single_view_items_use_one_view_with_the_visible_points_box(dataset):
    plain = PairDataModule(str(dataset), augment=False)
    single = PairDataModule(str(dataset), augment="so3", clouds="single_view")
    plain.setup()
    single.setup()
    views = load_object_set(dataset / "objects").partial_views(build_missing=False)
    chosen = set()
    for split in ("val", "test_unknown"):  # never augmented: the view's own object frame
        for index in range(len(single.datasets[split])):
            x, y = plain.datasets[split][index], single.datasets[split][index]
            assert torch.equal(y["poses_a"], x["poses_a"]) and torch.equal(y["label"], x["label"])
            for side in ("a", "b"):
                obj = int(y[f"ids_{side}"])
                assert y[f"points_{side}"].shape == x[f"points_{side}"].shape == (256, 3)
                view = _view_of(views, obj, y[f"points_{side}"])
                assert view is not None and torch.equal(y[f"normals_{side}"], torch.as_tensor(views.normals[obj, view]))
                chosen.add(view)
                points = y[f"points_{side}"]
                torch.testing.assert_close(y[f"aabb_{side}"], torch.stack([points.amin(0), points.amax(0)]))
                # Seen from one side: the visible box is strictly inside the mesh's in some direction.
                assert ((y[f"aabb_{side}"] - x[f"aabb_{side}"]).abs().max() > 1e-3)
            # The same view every time, whatever the epoch.
            torch.testing.assert_close(single.datasets[split][(index, 5)]["points_a"], y["points_a"])
    assert len(chosen) > 1


def _rows_of(cloud: np.ndarray, points: torch.Tensor) -> bool:
    """Whether every row of points is a row of cloud (exactly)."""
    rows = {tuple(r) for r in np.asarray(cloud).tolist()}
    return all(tuple(r) in rows for r in points.tolist())


def test_two_views_fuse_two_distinct_views_and_keep_k_points(dataset):
    single = PairDataModule(str(dataset), clouds="single_view")
    two = PairDataModule(str(dataset), clouds="two_views")
    single.setup()
    two.setup()
    views = load_object_set(dataset / "objects").partial_views(build_missing=False)
    split = "test_unknown"
    for index in range(len(two.datasets[split])):
        x, y = single.datasets[split][index], two.datasets[split][index]
        assert torch.equal(y["label"], x["label"]) and torch.equal(y["poses_b"], x["poses_b"])
        pair = two.datasets[split]._views(index, 0)
        assert pair[0][0] == single.datasets[split]._views(index, 0)[0][0]  # the single view, and one more
        for side, (first, second) in zip("ab", pair):
            obj, points = int(y[f"ids_{side}"]), y[f"points_{side}"]
            assert first != second and points.shape == (256, 3)
            assert _rows_of(np.concatenate([views.points[obj, first], views.points[obj, second]]), points)
            # Both views contribute, and the box is the fused points' bounds.
            assert not _rows_of(views.points[obj, first], points) and not _rows_of(views.points[obj, second], points)
            torch.testing.assert_close(y[f"aabb_{side}"], torch.stack([points.amin(0), points.amax(0)]))
        torch.testing.assert_close(two.datasets[split][(index, 3)]["points_a"], y["points_a"])  # fixed per group


def test_partial_max_views_fuses_one_to_that_many_random_views(dataset):
    fused = PairDataModule(str(dataset), augment="none", partial_prob=1.0, partial_max_views=3)
    fused.setup()
    train = fused.datasets["train"]
    views = load_object_set(dataset / "objects").partial_views(build_missing=False)
    counts = set()
    for index in range(len(train)):
        for epoch in (0, 1):
            chosen = train._views(index, epoch)
            item = train[(index, epoch)]
            for side, picked in zip("ab", chosen):
                assert 1 <= len(picked) <= 3 and len(set(picked)) == len(picked)
                counts.add(len(picked))
                obj = int(item[f"ids_{side}"])
                assert _rows_of(np.concatenate([views.points[obj, v] for v in picked]), item[f"points_{side}"])
    assert counts == {1, 2, 3}
    for bad in (0, 1.5, True):
        with pytest.raises(ValueError, match="partial_max_views"):
            PairDataModule(str(dataset), partial_prob=0.5, partial_max_views=bad)
    with pytest.raises(ValueError, match="completion: .* not fused ones .*partial_max_views=2"):
        PairDataModule(str(dataset), partial_prob=0.5, partial_max_views=2, completion="net.pt")
    too_many = PairDataModule(str(dataset), partial_prob=0.5, partial_max_views=views.views_per_object + 1)
    with pytest.raises(ValueError, match="distinct views per object needed"):
        too_many.setup()


def test_partial_prob_zero_changes_nothing_and_one_always_uses_views(dataset):
    plain = PairDataModule(str(dataset), augment="so3", seed=3)
    zero = PairDataModule(str(dataset), augment="so3", seed=3, partial_prob=0.0)
    always = PairDataModule(str(dataset), augment="none", seed=3, partial_prob=1.0)
    for dm in (plain, zero, always):
        dm.setup()
    assert zero.datasets["train"].views is None  # nothing read or built
    views = load_object_set(dataset / "objects").partial_views(build_missing=False)
    full = load_object_set(dataset / "objects")
    for index in range(len(plain.datasets["train"])):
        x, y = plain.datasets["train"][index], zero.datasets["train"][index]
        assert all(torch.equal(x[k], y[k]) for k in x)
        for epoch in (0, 1):
            z = always.datasets["train"][(index, epoch)]
            for side in ("a", "b"):
                obj = int(z[f"ids_{side}"])
                assert _view_of(views, obj, z[f"points_{side}"]) is not None
                assert not torch.equal(z[f"points_{side}"], torch.as_tensor(full.points[obj]))
    # Augmentation only: validation keeps full clouds.
    assert always.datasets["val"].views is None


@pytest.mark.parametrize("augment", ["so3", "cube"])
def test_rotation_augmentation_keeps_world_geometry_of_partial_clouds(dataset, augment):
    """The views drawn do not depend on the rotations, so an unrotated twin shows the same views."""
    plain = PairDataModule(str(dataset), augment="none", seed=2, partial_prob=0.5)
    aug = PairDataModule(str(dataset), augment=augment, seed=2, partial_prob=0.5)
    plain.setup()
    aug.setup()
    views = load_object_set(dataset / "objects").partial_views(build_missing=False)
    partial = 0
    for index in range(len(plain.datasets["train"])):
        x, y = plain.datasets["train"][(index, 1)], aug.datasets["train"][(index, 1)]
        for side in ("a", "b"):
            world_old = transform_points(x[f"poses_{side}"][:, None].double(), x[f"points_{side}"].double())
            world_new = transform_points(y[f"poses_{side}"][:, None].double(), y[f"points_{side}"].double())
            torch.testing.assert_close(world_new, world_old, atol=1e-5, rtol=0)
            if _view_of(views, int(x[f"ids_{side}"]), x[f"points_{side}"]) is None:
                continue
            partial += 1
            # The rotated partial cloud's box is its own points' bounds, as the unrotated one's.
            points = y[f"points_{side}"]
            torch.testing.assert_close(y[f"aabb_{side}"], torch.stack([points.amin(0), points.amax(0)]))
            if augment == "cube":  # an axis rotation turns the visible box into a box of the same sides
                extent_old = (x[f"aabb_{side}"][1] - x[f"aabb_{side}"][0]).sort().values
                extent_new = (y[f"aabb_{side}"][1] - y[f"aabb_{side}"][0]).sort().values
                torch.testing.assert_close(extent_new, extent_old, atol=1e-5, rtol=0)
    assert 0 < partial < 2 * len(plain.datasets["train"])


def test_bad_clouds_are_a_clear_error(dataset):
    with pytest.raises(ValueError, match="clouds: expected one of"):
        PairDataModule(str(dataset), clouds="three_views")
    with pytest.raises(ValueError, match="completion: .* not fused ones \\(clouds='two_views'"):
        PairDataModule(str(dataset), clouds="two_views", completion="net.pt")
    with pytest.raises(ValueError, match="partial_prob: expected a probability"):
        PairDataModule(str(dataset), partial_prob=1.5)

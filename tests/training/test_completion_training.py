"""Training a ViewCompletion: the known objects only, a checkpoint that loads, a resumed run equal to
an uninterrupted one; and evaluation on completed views."""

import pytest
import torch

import contactnet.training.completion as completion_training
from contactnet.data.dataset import load_manifest
from contactnet.data.objects import load_object_set
from contactnet.models.completion import load_view_completion
from contactnet.training.completion import train_completion, training_views
from contactnet.training.evaluate import evaluate
from tests.training.test_evaluate import _checkpoint


def test_training_views_hold_the_known_objects_and_their_inner_copies(tiny_data):
    data = tiny_data / "procedural_tiny"
    objects = load_object_set(data / "objects")
    known_families = {objects.families[i] for i in load_manifest(data / "train")["objects"]["known"]}
    # Inner copies share their original's family: the known families' objects are exactly these.
    ids = [i for i, family in enumerate(objects.families) if family in known_families]
    (points, normals, full, full_normals), = training_views(data)
    views = objects.partial_views()
    assert any(f not in known_families for f in objects.families)  # the unknown ones are left out
    assert points.shape[0] == len(ids) < len(objects)
    assert torch.equal(points, torch.from_numpy(views.points[ids]))
    assert torch.equal(full, torch.from_numpy(objects.points[ids]).float())
    with pytest.raises(ValueError, match="at least one object set"):
        training_views(None)


def test_a_resumed_run_ends_where_an_uninterrupted_one_does(tmp_path, tiny_data, monkeypatch):
    data = tiny_data / "procedural_tiny"
    settings = dict(data_root=data, steps=4, batch=4, target_points=64, save_every=2, progress=False)
    whole = train_completion(tmp_path / "whole.pt", **settings)
    out = tmp_path / "resumed.pt"
    calls = {"n": 0}
    real = completion_training.completion_loss

    def interrupted(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 4:  # during step 3, after step 2's checkpoint
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(completion_training, "completion_loss", interrupted)
    with pytest.raises(KeyboardInterrupt):
        train_completion(out, **settings)
    assert out.with_name("resumed.pt.partial").exists() and not out.exists()
    monkeypatch.setattr(completion_training, "completion_loss", real)
    with pytest.raises(ValueError, match="steps"):
        train_completion(out, **{**settings, "steps": 6})
    train_completion(out, **settings)
    assert not out.with_name("resumed.pt.partial").exists()
    resumed = load_view_completion(out)
    for a, b in zip(whole.state_dict().values(), resumed.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_a_run_in_two_stages_continues_from_the_first(tmp_path, tiny_data):
    """--init: the second stage starts from the first stage's net (its design and weights), so
    with no steps of its own it writes that net again."""
    data = tiny_data / "procedural_tiny"
    settings = dict(data_root=data, batch=4, target_points=64, progress=False)
    first = train_completion(tmp_path / "first.pt", steps=2, **settings)
    first.keep = 0.25  # a design setting the second stage keeps
    torch.save({**torch.load(tmp_path / "first.pt", weights_only=False), "config": first.config}, tmp_path / "first.pt")
    again = train_completion(tmp_path / "again.pt", steps=0, init=tmp_path / "first.pt", **settings)
    assert again.keep == 0.25
    for a, b in zip(first.state_dict().values(), again.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    more = train_completion(tmp_path / "more.pt", steps=1, init=tmp_path / "first.pt", **settings)
    assert any(not torch.equal(a, b) for a, b in zip(first.state_dict().values(), more.state_dict().values()))


def test_a_back_head_is_trained_on_the_views_ray_exits(tmp_path, tiny_data):
    """--back: the sets carry each view point's ray exit; a back head is added on top of --init's
    net (its other weights kept) and learns with the rest."""
    data = tiny_data / "procedural_tiny"
    (points, _, _, _, exits, exit_normals, valid), = training_views(data, back=True)
    assert exits.shape == exit_normals.shape == points.shape and valid.shape == points.shape[:3]
    assert valid.dtype == torch.bool and valid.float().mean() > 0.95
    assert ((exits - points).norm(dim=-1)[valid] > 1e-3).float().mean() > 0.9  # behind, not on, the seen side
    settings = dict(data_root=data, batch=4, target_points=64, progress=False)
    first = train_completion(tmp_path / "first.pt", steps=1, **settings)
    backed = train_completion(tmp_path / "back.pt", steps=0, init=tmp_path / "first.pt", back=True, **settings)
    assert backed.back and load_view_completion(tmp_path / "back.pt").back
    for name, value in first.state_dict().items():
        assert torch.equal(value, backed.state_dict()[name])
    trained = train_completion(tmp_path / "trained.pt", steps=2, init=tmp_path / "back.pt", **settings)
    assert any(not torch.equal(a, b) for name, a in trained.state_dict().items() if name.startswith("back_head")
               for b in [backed.state_dict()[name]])
    # --image: the view's image is added to the back head, zero at first, so the net is unchanged.
    imaged = train_completion(tmp_path / "image.pt", steps=0, init=tmp_path / "back.pt", image=8, **settings)
    assert imaged.image == 8 and load_view_completion(tmp_path / "image.pt").image == 8
    points, normals = training_views(data)[0][:2]
    with torch.no_grad():
        before = backed(points[:2, 0], normals[:2, 0], torch.Generator().manual_seed(1))
        after = imaged(points[:2, 0], normals[:2, 0], torch.Generator().manual_seed(1))
    for a, b in zip(before, after):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    learnt = train_completion(tmp_path / "learnt.pt", steps=2, init=tmp_path / "image.pt", **settings)
    assert not torch.equal(learnt.image_to_back.weight, imaged.image_to_back.weight)
    with pytest.raises(ValueError, match="image"):
        train_completion(tmp_path / "other.pt", steps=0, init=tmp_path / "image.pt", image=16, **settings)


def test_training_on_a_device_writes_a_net_that_loads_on_the_cpu(tmp_path, tiny_data, device):
    """--device: the object sets stay on the host, the net (back head and image included) trains on
    the device, and the file holds CPU tensors."""
    data = tiny_data / "procedural_tiny"
    net = train_completion(tmp_path / "net.pt", data, steps=2, batch=4, target_points=64, progress=False,
                           back=True, image=8, device=device)
    assert next(net.parameters()).device.type == device
    saved = torch.load(tmp_path / "net.pt", weights_only=True)["state_dict"]  # where it was saved, not mapped
    assert all(value.device.type == "cpu" for value in saved.values())
    loaded = load_view_completion(tmp_path / "net.pt")
    for name, value in loaded.state_dict().items():
        assert torch.isfinite(value).all()
        torch.testing.assert_close(value, net.state_dict()[name].cpu(), rtol=0, atol=0)


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is here: nothing to refuse")
def test_training_on_cuda_without_it_is_a_clear_error(tmp_path, tiny_data):
    with pytest.raises(ValueError, match="device: cuda"):
        train_completion(tmp_path / "net.pt", tiny_data / "procedural_tiny", steps=1, device="cuda", progress=False)


def test_evaluation_reads_completed_views(tmp_path, tiny_data):
    data = tiny_data / "procedural_tiny"
    completion = tmp_path / "completion.pt"
    train_completion(completion, data, steps=1, batch=2, target_points=32, progress=False)
    _, ckpt = _checkpoint(tmp_path)
    single = evaluate(str(ckpt), str(data), splits=["test_unknown"], device="cpu", clouds="single_view")
    completed = evaluate(str(ckpt), str(data), splits=["test_unknown"], device="cpu", clouds="single_view",
                         completion=str(completion))
    assert completed["test_unknown"]["n"] == single["test_unknown"]["n"]
    assert completed["test_unknown"]["ece"] != single["test_unknown"]["ece"]
    objects = load_object_set(data / "objects")
    views, done = objects.partial_views(), objects.completed_views(completion)
    assert done.points.shape == views.points.shape and not (done.points == views.points).all()
    assert objects.completed_views(completion) is done  # computed once per checkpoint
    with pytest.raises(ValueError, match="completion"):
        evaluate(str(ckpt), str(data), splits=["test_unknown"], device="cpu", completion=str(completion))

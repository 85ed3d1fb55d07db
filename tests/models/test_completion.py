"""ViewCompletion: a canonical frame that follows the view, completion that commutes with rigid
motions and scaling, the visible points kept, the Chamfer loss, and its checkpoints."""

import pytest
import torch

from contactnet.models.completion import (
    ViewCompletion,
    ViewImage,
    canonical_frames,
    chamfer,
    from_canonical,
    load_view_completion,
    random_subsets,
)


def _view(batch=3, k=200, seed=0):
    """Points on the camera-facing half of stretched ellipsoids (camera on −z), normals facing it."""
    g = torch.Generator().manual_seed(seed)
    d = torch.nn.functional.normalize(torch.randn(batch, k, 3, generator=g, dtype=torch.float64), dim=-1)
    d[..., 2] = -d[..., 2].abs()
    axes = torch.tensor([0.08, 0.03, 0.05], dtype=torch.float64)
    points = d * axes + torch.randn(batch, 1, 3, generator=g, dtype=torch.float64) * 0.1
    normals = torch.nn.functional.normalize(d / axes, dim=-1)
    return points, normals


def _motion(seed=1):
    g = torch.Generator().manual_seed(seed)
    R, _ = torch.linalg.qr(torch.randn(3, 3, generator=g, dtype=torch.float64))
    R = R * torch.sign(torch.det(R))
    return R, torch.randn(3, generator=g, dtype=torch.float64), 2.5


def test_canonical_coordinates_do_not_depend_on_the_pose_or_scale_of_the_view():
    points, normals = _view()
    R, t, s = _motion()
    moved, moved_normals = s * points @ R.T + t, normals @ R.T
    canon = [((p - o[:, None]) @ Q.transpose(1, 2) / sc[:, None, None])
             for p, (o, Q, sc) in ((points, canonical_frames(points, normals)),
                                   (moved, canonical_frames(moved, moved_normals)))]
    torch.testing.assert_close(canon[0], canon[1], rtol=0, atol=1e-9)
    _, Q, scale = canonical_frames(points, normals)
    torch.testing.assert_close(Q @ Q.transpose(1, 2), torch.eye(3, dtype=torch.float64).expand(3, 3, 3))
    assert torch.allclose(torch.det(Q), torch.ones(3, dtype=torch.float64))
    assert (Q[:, 2, 2] > 0.9).all()  # +z looks from the camera (on −z) into the object
    assert (scale > 0).all()


@pytest.mark.parametrize("back, image", [(False, None), (True, None), (True, 8)])
def test_completion_commutes_with_rigid_motions_and_scaling(back, image):
    torch.manual_seed(0)
    net = ViewCompletion(predicted=64, inputs=50, width=32, back=back, image=image).double().eval()
    if image:
        torch.nn.init.normal_(net.image_to_back.weight)  # zero when made: let the image count
    points, normals = _view()
    R, t, s = _motion(2)
    with torch.no_grad():
        p0, n0 = net(points, normals, torch.Generator().manual_seed(5))
        p1, n1 = net(s * points @ R.T + t, normals @ R.T, torch.Generator().manual_seed(5))
    torch.testing.assert_close(p1, s * p0 @ R.T + t, rtol=0, atol=1e-9)
    torch.testing.assert_close(n1, n0 @ R.T, rtol=0, atol=1e-9)


def test_completion_keeps_visible_points_and_returns_the_view_size():
    net = ViewCompletion(predicted=64, inputs=50, width=32, keep=0.25).double().eval()
    points, normals = _view(k=200)
    with torch.no_grad():
        p, n = net(points, normals)
    assert p.shape == n.shape == points.shape
    kept = round(0.25 * 200)
    # The first `kept` rows are visible points (with their normals); the rest are predicted.
    assert (p[:, :kept, None] == points[:, None]).all(-1).any(-1).all()
    torch.testing.assert_close(n.norm(dim=-1), torch.ones(3, 200, dtype=torch.float64))
    with pytest.raises(ValueError, match="points, normals"):
        net(points, normals[:, :10])
    with pytest.raises(ValueError, match="keep"):
        ViewCompletion(keep=1.5)


def test_one_density_fills_the_unseen_side_and_keeps_the_visible_share():
    """keep=None: the visible points fill the share of the view that the predicted points near
    the encoder's inputs make up (units of the view's RMS radius), the predicted points off the
    seen side fill the rest, so the completed cloud has one density, as a full cloud has."""
    torch.manual_seed(0)
    net = ViewCompletion(predicted=64, inputs=50, width=32).double().eval()
    assert net.keep is None and net.config["near"] == 0.2
    points, normals = _view(k=200)
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        p, n = net(points, normals, g)
        g = torch.Generator().manual_seed(3)
        _, _, _, _, _, local, local_normals, _ = net.canonical_inputs(points, normals, g)
        pred, _ = net.predict_canonical(local, local_normals)
    assert p.shape == n.shape == points.shape
    seen = torch.cdist(pred, local).amin(2) < net.near  # (B, 64)
    visible = (p[:, :, None] == points[:, None]).all(-1).any(-1)  # (B, 200) rows that are view points
    expected = (seen.double().mean(1) * 200).round().clamp(1, 199)
    assert torch.equal(visible.sum(1).double(), expected)
    assert bool(visible[:, : int(expected.min())].all())  # the visible points come first
    # The predicted rows are the unseen side's, mapped back to the view's frame.
    origin, R, scale = canonical_frames(points, normals)
    for b in range(points.shape[0]):
        back = (pred[b][~seen[b]] * scale[b]) @ R[b] + origin[b]
        rows = p[b][~visible[b]]
        assert bool(((rows[:, None] - back[None]).norm(dim=-1).amin(1) < 1e-12).all())
    torch.testing.assert_close(n.norm(dim=-1), torch.ones(3, 200, dtype=torch.float64))
    with pytest.raises(ValueError, match="near"):
        ViewCompletion(near=0.0)


def _net_with_a_back(points, normals):
    """A small back-head net whose back points lie 1.5 RMS radii behind the seen ones (the head's
    expected errors still vary by point), and whose decoder puts half its points on that back
    surface and half far off both, so that every source has a share."""
    torch.manual_seed(0)
    net = ViewCompletion(predicted=64, inputs=50, width=32, back=True, back_trust=None).double().eval()
    with torch.no_grad():
        last = net.back_head[-1]
        last.weight[:6].zero_()
        last.bias[:6] = torch.tensor([0, 0, 1.5, 0, 0, 1], dtype=torch.float64)
        local = net.canonical_frame(points, normals)[3][0, :32]
        decoded = torch.cat([local + torch.tensor([0.01, 0, 1.5], dtype=torch.float64),  # near, not on, the back
                             torch.full((32, 3), 5.0, dtype=torch.float64)])
        net.decoder[-1].weight.zero_()
        net.decoder[-1].bias.copy_(torch.cat([decoded, torch.tensor([0, 0, 1.0]).expand(64, 3)], 1).reshape(-1))
    return net


@torch.no_grad()
def _back_by_hand(net, points, normals):
    """What the back-head net's forward draws with generator seed 3, step by step: the encoder's
    input index, the canonical view, the back points and their expected errors, the back points in
    the view's frame, and the decoder's points."""
    idx = random_subsets(3, 200, 50, torch.Generator().manual_seed(3))[..., None].expand(-1, -1, 3)
    origin, R, scale, local, local_normals = net.canonical_frame(points, normals)
    pooled, h, _ = net.encode(local.gather(1, idx), local_normals.gather(1, idx))
    back, _, expected = net.predict_back(h, net.point_features(local, local_normals, pooled)[1], local, local_normals)
    return idx, local, back, expected, from_canonical(back, origin, R, scale), net.decode(h)[0]


def test_the_back_head_adds_the_surface_behind_the_seen_points_at_one_density():
    """back=True: the cloud holds the visible points, the back points predicted behind them and the
    decoder's points off both, each in the share of the decoder's points nearest to it."""
    points, normals = _view(k=200)
    net = _net_with_a_back(points, normals)
    with torch.no_grad():
        p, n = net(points, normals, torch.Generator().manual_seed(3))
    idx, local, back, expected, mapped, pred = _back_by_hand(net, points, normals)
    assert (expected > 0).all()
    assert p.shape == n.shape == points.shape
    torch.testing.assert_close(n.norm(dim=-1), torch.ones(3, 200, dtype=torch.float64))
    visible = (p[:, :, None] == points[:, None]).all(-1).any(-1)
    behind = (p[:, :, None] - mapped[:, None]).norm(dim=-1).amin(-1) < 1e-12
    assert bool(visible[:, 0].all()) and not bool((visible & behind).any())
    assert (behind.sum(1) > 50).all() and (~visible & ~behind).sum(1).gt(50).all()  # every source has a share
    # Each source's count is its share of the decoder's points (nearest to it, within `near`).
    near_v = torch.cdist(pred, local.gather(1, idx)).amin(2)
    near_b = torch.cdist(pred, back.gather(1, idx)).amin(2)
    for rows, mine, other, least in ((visible, near_v, near_b, 1), (behind, near_b, near_v, 0)):
        share = ((mine < net.near) & ((mine <= other) if least else (mine < other))).double().mean(1) * 200
        assert torch.equal(rows.sum(1).double(), share.round().clamp(least, 199))
    with pytest.raises(ValueError, match="back, keep"):
        ViewCompletion(keep=0.5, back=True)
    with pytest.raises(ValueError, match="back_trust"):
        ViewCompletion(back=True, back_trust=0.0)


def test_only_back_points_within_the_trusted_error_are_used():
    """back_trust: a back point whose expected error is at or above it is left out, and the
    decoder fills its place; a bound above every error gives the same cloud as none."""
    points, normals = _view(k=200)
    net = _net_with_a_back(points, normals)
    _, _, _, expected, mapped, _ = _back_by_hand(net, points, normals)
    with torch.no_grad():
        clouds = {}
        for trust in (None, 1e9, float(expected.median()), 1e-9):
            net.back_trust = trust
            clouds[trust] = net(points, normals, torch.Generator().manual_seed(3))[0]
    assert torch.equal(clouds[None], clouds[1e9])
    median = float(expected.median())
    used = ((clouds[median][:, :, None] - mapped[:, None]).norm(dim=-1) < 1e-12).any(1)  # (B, 200) back points
    assert used.any() and bool((expected[used] < median).all())
    assert not bool(((clouds[1e-9][:, :, None] - mapped[:, None]).norm(dim=-1) < 1e-12).any())


def test_the_view_image_holds_each_cells_mean_depth_normal_and_occupancy():
    image = ViewImage(size=8, extent=2.0)
    points = torch.tensor([[[-1.9, -1.9, 0.5], [-1.6, -1.6, 1.5], [0.1, -1.9, -2.0], [5.0, 0.1, 3.0]]])
    normals = torch.nn.functional.normalize(torch.tensor([[[0, 0, -1.0], [0, 1, -1], [1, 0, 0], [0, 0, 1]]]), dim=-1)
    raster = image.raster(points, normals)  # cells 0.5 wide: [row y, column x]
    assert raster.shape == (1, 5, 8, 8)
    torch.testing.assert_close(raster[0, :, 0, 0], torch.cat([torch.tensor([1.0]), (normals[0, 0] + normals[0, 1]) / 2,
                                                              torch.tensor([1.0])]))
    torch.testing.assert_close(raster[0, :, 0, 4], torch.tensor([-2.0, 1, 0, 0, 1]))
    torch.testing.assert_close(raster[0, :, 4, 7], torch.tensor([3.0, 0, 0, 1, 1]))  # outside: the border cell
    assert raster[0, 4].sum() == 3 and raster[0, :, 3, 3].abs().sum() == 0
    # Sampling reads a cell's value at its centre.
    features = torch.arange(64.0).reshape(1, 1, 8, 8)
    centre = torch.tensor([[[-1.75, -1.75, 0.0], [0.25, -1.25, 9.0]]])
    torch.testing.assert_close(image.sample(features, centre), torch.tensor([[[0.0], [12.0]]]))
    assert image(points, normals).shape == (1, 32, 8, 8)
    for size in (12, 32.0):
        with pytest.raises(ValueError, match="size"):
            ViewImage(size=size)
    with pytest.raises(ValueError, match="image, back"):
        ViewCompletion(image=16)


def test_chamfer_against_a_hand_computed_pair():
    a = torch.tensor([[[0.0, 0, 0], [1.0, 0, 0]]])
    b = torch.tensor([[[0.0, 0, 0], [0.0, 0, 3.0], [1.0, 0, 0]]])
    distance, nearest = chamfer(a, b)
    # a → b: 0, 0; b → a: 0, 3, 0  →  0 + 1.
    torch.testing.assert_close(distance, torch.tensor([1.0]))
    assert nearest.tolist() == [[0, 2]]
    a.requires_grad_(True)
    chamfer(a, b)[0].sum().backward()
    assert torch.isfinite(a.grad).all()


def test_checkpoint_round_trip_and_refusal(tmp_path):
    from contactnet.models.completion import FORMAT

    torch.manual_seed(0)
    net = ViewCompletion(predicted=32, inputs=20, width=16)
    path = tmp_path / "c.pt"
    torch.save({"format": FORMAT, "config": net.config, "state_dict": net.state_dict()}, path)
    loaded = load_view_completion(path)
    assert not loaded.training and loaded.config == net.config
    for a, b in zip(net.state_dict().values(), loaded.state_dict().values()):
        assert torch.equal(a, b)
    torch.save({"state_dict": {}}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match="not a view-completion checkpoint"):
        load_view_completion(tmp_path / "other.pt")

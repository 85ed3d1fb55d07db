"""Collision networks: shapes, world-frame invariance, fixed-shape crops, a tiny overfit, and
torch.compile."""

import itertools

import pytest
import torch

from contactnet.geometry.poses import compose_poses
from contactnet.models import LOCC, GlobalOCN, ShapeEmbedding, ShapeEncoder
from contactnet.models.geometry import cell_centres, cells_near_box, local_crop

# LOCC with the co-occupancy term and the distance head, next to the paper's two nets.
def LOCC_CROSS(encoder, head_hidden):  # noqa: N802 (a class-like factory, as NETS holds classes)
    return LOCC(encoder, head_hidden, cross_features=8, distance_head=True)


def LOCC_TOPK(encoder, head_hidden):  # noqa: N802
    return LOCC(encoder, head_hidden, cross_features=8, cross_cells=16)  # 16 of a 4³ grid's 64 cells


def LOCC_POINTS(encoder, head_hidden):  # noqa: N802
    return LOCC(encoder, head_hidden, cross_features=8, cross_points=32)  # 32 of a cloud's points


def LOCC_BOTH(encoder, head_hidden):  # noqa: N802
    return LOCC(encoder, head_hidden, cross_features=8, cross_cells=16, cross_points=32, cross_sites="both")


def LOCC_CONTAINED(encoder, head_hidden):  # noqa: N802 (the design before the surface depths)
    return LOCC(encoder, head_hidden, cross_features=8, cross_points=32, containment=True)


def LOCC_DEPTH(encoder, head_hidden):  # noqa: N802 (the surface depths beside the co-occupancy term)
    return LOCC(encoder, head_hidden, cross_features=8, cross_points=32, containment=True, surface_depth=True)


def LOCC_DEFAULT(encoder, head_hidden):  # noqa: N802 (conf/model/locc.yaml's design: no co-occupancy term)
    return LOCC(encoder, head_hidden, containment=True, surface_depth=True)


NETS = [LOCC, GlobalOCN, LOCC_CROSS, LOCC_TOPK, LOCC_POINTS, LOCC_BOTH, LOCC_CONTAINED, LOCC_DEPTH, LOCC_DEFAULT]


def _small_net(cls, grid=4):
    return cls(ShapeEncoder(grid=grid, hidden=32, features=16, channels=16), head_hidden=32)


def _clouds(b, k=200, seed=0):
    g = torch.Generator().manual_seed(seed)
    points = (torch.rand(b, k, 3, generator=g) * 2 - 1) * torch.tensor([0.05, 0.03, 0.08])
    normals = torch.nn.functional.normalize(torch.randn(b, k, 3, generator=g), dim=-1)
    return points, normals


def _poses(shape, seed, spread=0.05, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    q = torch.nn.functional.normalize(torch.randn(*shape, 4, generator=g, dtype=torch.float64), dim=-1)
    return torch.cat([torch.randn(*shape, 3, generator=g, dtype=torch.float64) * spread, q], -1).to(dtype)


def _grouped(emb):
    return emb.map(lambda x: x[:, None])


def _rows(emb, ids):
    return emb.map(lambda x: x[ids])


@pytest.mark.parametrize("cls", NETS)
def test_shapes(cls):
    net = _small_net(cls)
    points, normals = _clouds(3)
    emb = net.encode(points, normals)
    assert emb.features.shape == (3, 16, 4, 4, 4) and emb.aabb.shape == (3, 2, 3)
    logits = net.predict(_grouped(emb), _grouped(emb), _poses((3, 5), 1), _poses((3, 5), 2))
    assert logits.shape == (3, 5)
    # Ungrouped queries: one pose per embedding.
    assert net(emb, emb, _poses((3,), 1), _poses((3,), 2)).shape == (3,)


def test_encoder_grid_is_the_per_cell_max_of_point_features():
    """The encoder's scatter-max (a segment reduction over points sorted by cell) equals a loop
    over cells, values and gradients, with empty cells at 0 and points on cell boundaries."""
    encoder = ShapeEncoder(grid=4, hidden=16, features=8, channels=8).double()
    points, normals = (x.double() for x in _clouds(2, k=150, seed=4))
    aabb = torch.tensor([[-0.05, -0.03, -0.08], [0.05, 0.03, 0.08]], dtype=torch.float64).expand(2, 2, 3)
    points[0, :20, 0] = torch.linspace(-0.05, 0.05, 5, dtype=torch.float64).repeat(4)  # on cell faces in x
    points[1, :, 0] = points[1, :, 0].clamp_max(0.0)  # half of object 1's cells left empty
    grids = []
    hook = encoder.enc.register_forward_hook(lambda module, inputs, output: grids.append(inputs[0]))
    points.requires_grad_(True)
    occupancy = encoder(points, normals, aabb).occupancy
    hook.remove()
    grid = grids[0]  # (B, H, M, M, M)

    unit = (points - aabb[:, 0:1]) / (aabb[:, 1:2] - aabb[:, 0:1])
    features = encoder.point_mlp(torch.cat([points, 2 * unit - 1, normals], -1))
    cells = (unit.detach() * 4).long().clamp(0, 3)
    expected = torch.zeros_like(grid)
    for b in range(2):
        for i, j, k in itertools.product(range(4), repeat=3):
            inside = (cells[b] == torch.tensor([i, j, k])).all(-1)
            if inside.any():
                expected[b, :, i, j, k] = features[b, inside].amax(0)
            assert occupancy[b, (i * 4 + j) * 4 + k] == inside.sum()  # points per cell, x-major
    assert (expected[1] == 0).all(0).sum() > 0
    torch.testing.assert_close(grid, expected, rtol=1e-12, atol=1e-12)
    upstream = torch.randn_like(grid)
    (got,) = torch.autograd.grad(grid, points, upstream)
    (want,) = torch.autograd.grad(expected, points, upstream)
    torch.testing.assert_close(got, want)


def test_the_probed_points_come_in_cell_order_and_give_the_logits_of_the_sampling_order():
    """The embedding's points are the cloud's, sorted by the cell they fall in (what keeps a query's
    kept points together in memory); the order is a layout only: the logits of the default design,
    fused and torch, equal those of the points in the order they were sampled."""
    net = _small_net(LOCC_CONTAINED).eval()
    points, normals = _clouds(3, k=300, seed=7)
    emb = net.encode(points, normals)
    cells = ((points - emb.aabb[:, :1]) / (emb.aabb[:, 1:] - emb.aabb[:, :1]) * 4).long().clamp(0, 3)
    flat = (cells[..., 0] * 4 + cells[..., 1]) * 4 + cells[..., 2]
    order = flat.argsort(dim=1, stable=True)
    assert not torch.equal(order, torch.arange(300).expand(3, 300))  # a real reordering
    torch.testing.assert_close(emb.points, points.gather(1, order[..., None].expand(-1, -1, 3)), rtol=0, atol=0)
    sampled = emb._replace(points=points)
    ids_a, ids_b = torch.tensor([0, 1, 2, 0] * 16), torch.tensor([1, 2, 0, 0] * 16)
    pose_a, pose_b = _poses((64,), seed=1, spread=0.03), _poses((64,), seed=2, spread=0.03)
    with torch.no_grad():
        got = net.predict_indexed(emb, ids_a, ids_b, pose_a, pose_b)
        torch.testing.assert_close(got, net.predict_indexed(sampled, ids_a, ids_b, pose_a, pose_b))
        torch.testing.assert_close(net.predict(_rows(emb, ids_a), _rows(emb, ids_b), pose_a, pose_b), got)


@pytest.mark.parametrize("cls", NETS)
def test_indexed_prediction_equals_broadcast_prediction(cls, monkeypatch):
    """predict_indexed over a table of cached embeddings == predict on gathered embeddings (the
    co-occupancy term in slices that do not divide the batch)."""
    monkeypatch.setattr("contactnet.models.collision_nets.CROSS_CHUNK", 7)
    net = _small_net(cls)
    points, normals = _clouds(5)
    table = net.encode(points, normals)
    g = torch.Generator().manual_seed(3)
    ids_a, ids_b = torch.randint(5, (40,), generator=g), torch.randint(5, (40,), generator=g)
    pa, pb = _poses((40,), 8, spread=0.03), _poses((40,), 9, spread=0.03)
    gathered = net.predict(_rows(table, ids_a), _rows(table, ids_b), pa, pb)
    torch.testing.assert_close(net.predict_indexed(table, ids_a, ids_b, pa, pb), gathered, atol=1e-5, rtol=1e-5)
    # The table's projection, computed once and passed to every batch, gives the same logits.
    projection = net.project_table(table)
    assert (projection is None) == (cls is GlobalOCN)
    for s in (slice(0, 13), slice(13, 40)):
        torch.testing.assert_close(net.predict_indexed(table, ids_a[s], ids_b[s], pa[s], pb[s], projection=projection),
                                   gathered[s], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("cls", NETS)
def test_world_frame_invariance(cls):
    """One rigid transform applied to both poses leaves every prediction unchanged."""
    net = _small_net(cls).double()
    points, normals = _clouds(4)
    emb = net.encode(points.double(), normals.double())
    pa, pb = _poses((4, 6), 3, dtype=torch.float64), _poses((4, 6), 4, dtype=torch.float64)
    world = _poses((), 5, spread=1.0, dtype=torch.float64)
    before = net.predict(_grouped(emb), _grouped(emb), pa, pb)
    after = net.predict(_grouped(emb), _grouped(emb), compose_poses(world, pa), compose_poses(world, pb))
    torch.testing.assert_close(after, before, atol=1e-9, rtol=1e-9)


def test_co_occupancy_is_the_masked_max_of_query_times_interpolated_key():
    """The co-occupancy term against a direct per-query computation: B's projected grid
    interpolated (grid_sample) at A's cell centres moved into B's box units, times A's projected
    cells, max over A's kept cells; through the grouped (training) and indexed (planner) paths,
    and zero when no cell is kept."""
    from contactnet.models.collision_nets import _masked_max
    from contactnet.models.geometry import grid_coordinates

    net = _small_net(LOCC_CROSS).double()
    points, normals = _clouds(2)
    emb = net.encode(points.double(), normals.double())
    pa, pb = _poses((7,), 3, 0.03, torch.float64), _poses((7,), 4, 0.03, torch.float64)
    a, b = ShapeEmbedding(emb.features[0], emb.aabb[0]), ShapeEmbedding(emb.features[1], emb.aabb[1])
    keep, _, _ = local_crop(a.aabb, 4, pa, pb, b.aabb)
    expected = []
    for k in range(7):  # one query at a time, straight from the definition
        coords = grid_coordinates(a.aabb, 4, pa[k], pb[k], b.aabb)  # (64, 3), x-major like the encoder
        keys = torch.einsum("df,fxyz->dxyz", net.key.weight, b.features)[None]
        sampled = torch.nn.functional.grid_sample(keys, coords.flip(-1).view(1, 64, 1, 1, 3), align_corners=False)
        queries = a.features.flatten(1).T @ net.query.weight.T  # (64, D)
        expected.append(_masked_max(queries * sampled.view(-1, 64).T, keep[k] > 0))
    expected = torch.stack(expected)
    lead = (7,)
    got = net._cross_grouped(a, b, pa, pb, keep > 0, lead)
    torch.testing.assert_close(got, expected)
    assert (keep > 0).any() and got.abs().sum() > 0
    # Grouped layout: one embedding pair shared by 7 poses, as in training.
    grouped = net._cross_grouped(ShapeEmbedding(a.features[None], a.aabb[None]), ShapeEmbedding(b.features[None], b.aabb[None]),
                                 pa[None], pb[None], keep[None] > 0, (1, 7))
    torch.testing.assert_close(grouped[0], expected)
    far = pb.clone()
    far[:, :3] += 10.0
    none_kept, _, _ = local_crop(a.aabb, 4, pa, far, b.aabb)
    assert (net._cross_grouped(a, b, pa, far, none_kept > 0, lead) == 0).all()


def test_distance_head_outputs_and_gradients():
    net = _small_net(LOCC_CROSS).double()
    points, normals = _clouds(2)
    emb = net.encode(points.double(), normals.double())
    pa = _poses((2, 3), 1, dtype=torch.float64).requires_grad_(True)
    pb = _poses((2, 3), 2, dtype=torch.float64)
    logits, distance = net.predict(_grouped(emb), _grouped(emb), pa, pb, with_distance=True)
    assert logits.shape == distance.shape == (2, 3)
    torch.testing.assert_close(logits, net.predict(_grouped(emb), _grouped(emb), pa, pb))
    # Pose gradients of the logit, co-occupancy included, match finite differences.
    assert torch.autograd.gradcheck(lambda p: net.predict(_grouped(emb), _grouped(emb), p, pb), (pa,), atol=1e-6)
    with pytest.raises(ValueError, match="with_distance"):
        _small_net(LOCC).predict(_grouped(emb.__class__(emb.features.float(), emb.aabb.float())),
                                 _grouped(emb.__class__(emb.features.float(), emb.aabb.float())),
                                 pa.detach().float(), pb.float(), with_distance=True)


def test_crop_has_no_false_negatives():
    """Every cell that overlaps the other box is kept: sample points inside each cell and check
    that no point inside the other box belongs to a dropped cell."""
    g = torch.Generator().manual_seed(0)
    aabb_a = torch.tensor([[-0.05, -0.02, -0.03], [0.05, 0.02, 0.03]], dtype=torch.float64)
    aabb_b = torch.tensor([[-0.04, -0.04, -0.01], [0.04, 0.04, 0.01]], dtype=torch.float64)
    m = 5
    centres = cell_centres(aabb_a, m)
    cell = (aabb_a[1] - aabb_a[0]) / m
    for trial in range(20):
        pa, pb = _poses((), 10 + trial, 0.04, torch.float64), _poses((), 50 + trial, 0.04, torch.float64)
        mask, _ = cells_near_box(centres, 0.5 * cell.norm(), pa, pb, aabb_b)
        samples = centres[:, None] + (torch.rand(m**3, 64, 3, generator=g, dtype=torch.float64) - 0.5) * cell
        from contactnet.geometry.poses import invert_poses, transform_points

        in_b = transform_points(compose_poses(invert_poses(pb), pa), samples)
        inside = ((in_b >= aabb_b[0]) & (in_b <= aabb_b[1])).all(-1).any(-1)
        assert not (inside & ~mask).any()


def test_local_crop_matches_per_cell_definition():
    """The separable crop used on the hot path equals the per-cell definition: the same mask, the
    mean kept centre in the other box's units, and the kept fraction; with broadcasting."""
    g = torch.Generator().manual_seed(3)
    m = 6
    lo = -0.02 - 0.06 * torch.rand(4, 1, 3, generator=g, dtype=torch.float64)
    aabb_a = torch.stack([lo, -lo + 0.01], -2)  # (4, 1, 2, 3): off-centre boxes
    aabb_b = aabb_a.flip(0) * 1.3
    pa, pb = _poses((4, 32), 11, 0.05, torch.float64), _poses((4, 32), 12, 0.05, torch.float64)
    weights, where, frac = local_crop(aabb_a, m, pa, pb, aabb_b)
    centres = cell_centres(aabb_a, m)
    half_diag = 0.5 * ((aabb_a[..., 1, :] - aabb_a[..., 0, :]) / m).norm(dim=-1)
    mask, local = cells_near_box(centres, half_diag, pa, pb, aabb_b)
    assert mask.any(-1).float().mean() > 0.3 and (~mask).any()  # both kept and dropped cells occur
    count = mask.sum(-1, keepdim=True).double()
    torch.testing.assert_close(weights, mask.double() / count.clamp_min(1))
    lo_b, hi_b = aabb_b[..., 0:1, :], aabb_b[..., 1:2, :]
    unit = (2 * local - (lo_b + hi_b)) / (hi_b - lo_b)
    torch.testing.assert_close(where, (weights[..., None] * unit).sum(-2))
    torch.testing.assert_close(frac, count / m**3)


@pytest.mark.parametrize("cls", NETS)
def test_overfits_64_samples(cls):
    torch.manual_seed(0)
    net = _small_net(cls)
    points, normals = _clouds(4, seed=1)
    pa, pb = _poses((4, 16), 6, spread=0.04), _poses((4, 16), 7, spread=0.04)
    labels = (torch.rand(4, 16, generator=torch.Generator().manual_seed(2)) < 0.5).float()  # arbitrary
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    for _ in range(400):
        emb = net.encode(points, normals)
        logits = net.predict(_grouped(emb), _grouped(emb), pa, pb)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if ((logits > 0).float() == labels).all():
            break
    assert ((logits > 0).float() == labels).all()


@pytest.mark.parametrize("cls", [LOCC, LOCC_TOPK, LOCC_CONTAINED, LOCC_DEPTH, LOCC_DEFAULT])
def test_locc_compiles_without_graph_breaks(cls):
    net = _small_net(cls).eval()
    points, normals = _clouds(2)
    emb = net.encode(points, normals)
    pa, pb = _poses((2, 8), 1), _poses((2, 8), 2)
    compiled = torch.compile(net.predict, backend="eager", fullgraph=True)  # graph breaks show while tracing
    with torch.no_grad():
        torch.testing.assert_close(compiled(_grouped(emb), _grouped(emb), pa, pb),
                                   net.predict(_grouped(emb), _grouped(emb), pa, pb), atol=1e-5, rtol=1e-5)


def test_grid_box_gives_flat_and_thin_objects_a_thickness_and_leaves_the_rest_as_they_are():
    from contactnet.models.encoder import grid_box
    from contactnet.models.geometry import point_coordinates

    boxes = torch.tensor([[[-0.1, -0.1, 0.0], [0.1, 0.1, 0.0]],  # a plane: no thickness
                          [[0.0, 0.0, 0.0], [0.003, 0.003, 0.3]],  # a rod, 1:100
                          [[-0.05, -0.03, -0.08], [0.05, 0.03, 0.08]],  # a box: unchanged
                          [[0.2, 0.2, 0.2], [0.2, 0.2, 0.2]]])  # a point: nothing to scale by
    grown = grid_box(boxes, 0.04)
    extent, centre = grown[:, 1] - grown[:, 0], grown.mean(1)
    torch.testing.assert_close(extent[0], torch.tensor([0.2, 0.2, 0.008]))
    torch.testing.assert_close(extent[1], torch.tensor([0.012, 0.012, 0.3]))
    torch.testing.assert_close(centre[:2], boxes[:2].mean(1))
    assert torch.equal(grown[2:], boxes[2:])  # bit for bit
    assert torch.equal(grid_box(boxes, 0.0), boxes)
    # The encoder spans that box; a box crossing the plane then has surface points inside the plane's box
    # (what LOCC's crop and co-occupancy read), and none at all without it.
    plane = torch.rand(1, 300, 3, generator=torch.Generator().manual_seed(0)) * 0.2 - 0.1
    plane[..., 2] = 0
    normals = torch.tensor([0.0, 0.0, 1.0]).expand_as(plane)
    crossing, _ = _clouds(1, k=300)  # a 10 x 6 x 16 cm box cloud, centred on the plane
    pose_plane, pose_box = torch.tensor([[0.0, 0, 0, 1, 0, 0, 0]]), torch.tensor([[0.0, 0, 0.01, 1, 0, 0, 0]])
    for aspect, expect_inside in ((0.0, False), (0.04, True)):
        encoder = ShapeEncoder(grid=4, hidden=16, features=8, channels=8, min_aspect=aspect)
        emb = encoder(plane, normals, boxes[:1])
        torch.testing.assert_close(emb.aabb, grid_box(boxes[:1], aspect))
        coords = point_coordinates(crossing, pose_box, pose_plane, emb.aabb)
        inside = (coords.abs() <= 1).all(-1).any()
        assert bool(inside) == expect_inside
    with pytest.raises(ValueError, match="min_aspect"):
        ShapeEncoder(min_aspect=1.5)


def test_bad_inputs():
    net = _small_net(LOCC)
    with pytest.raises(ValueError, match="points, normals"):
        net.encode(torch.zeros(2, 10, 3), torch.zeros(2, 9, 3))
    with pytest.raises(ValueError, match="grid"):
        ShapeEncoder(grid=5)
    encoder = ShapeEncoder(grid=4, hidden=32, features=16, channels=16)
    with pytest.raises(ValueError, match="cross_cells"):
        LOCC(encoder, cross_features=8, cross_cells=-1)
    with pytest.raises(ValueError, match="cross_cells"):
        LOCC(encoder, cross_cells=16)  # no co-occupancy term to restrict
    topk = _small_net(LOCC_TOPK)
    emb = topk.encode(*_clouds(2))
    bare = ShapeEmbedding(emb.features, emb.aabb)
    with pytest.raises(ValueError, match="emb_b.occupancy"):
        topk.predict(emb, bare, _poses((2,), 1), _poses((2,), 2))
    with pytest.raises(ValueError, match="table.occupancy"):
        topk.predict_indexed(bare, torch.tensor([0]), torch.tensor([1]), _poses((1,), 1), _poses((1,), 2))
    with pytest.raises(ValueError, match="cross_sites"):
        LOCC(encoder, cross_features=8, cross_cells=16, cross_points=16)  # cells or points: set cross_sites
    with pytest.raises(ValueError, match="cross_sites"):
        LOCC(encoder, cross_features=8, cross_sites="voxels")
    with pytest.raises(ValueError, match="cross_points"):
        LOCC(encoder, cross_points=16)
    pointwise = _small_net(LOCC_POINTS)
    no_points = pointwise.encode(*_clouds(2))._replace(points=None)
    with pytest.raises(ValueError, match="emb_a.points"):
        pointwise.predict(no_points, no_points, _poses((2,), 1), _poses((2,), 2))


@pytest.mark.parametrize("cls", NETS)
def test_takes_numpy_float64_and_one_object_clouds_as_users_have_them(cls):
    """A float32 net takes numpy clouds, float64 poses, any integer ids and one object's (K, 3)
    cloud, converted once: the same logits as float32 tensors, and float64 pose gradients."""
    net = _small_net(cls).eval()
    points, normals = _clouds(2)
    pa, pb = _poses((5,), 1, dtype=torch.float64), _poses((5,), 2, dtype=torch.float64)
    ids_a, ids_b = torch.tensor([0, 1, 0, 1, 1]), torch.tensor([1, 1, 0, 0, 1])
    with torch.no_grad():
        table = net.encode(points, normals)
        expected = net.predict_indexed(table, ids_a, ids_b, pa.float(), pb.float())
        from_numpy = net.encode(points.double().numpy(), normals.double().numpy())
        torch.testing.assert_close(from_numpy.features, table.features)
        torch.testing.assert_close(net.predict_indexed(table, ids_a.int().numpy(), ids_b.tolist(), pa.numpy(), pb),
                                   expected)
        torch.testing.assert_close(net.predict(_rows(table, ids_a), _rows(table, ids_b), pa, pb.numpy()), expected,
                                   atol=1e-5, rtol=1e-5)
        one = net.encode(points[0].numpy(), normals[0])  # unbatched: broadcasts against any poses
        torch.testing.assert_close(net.predict(one, _rows(table, ids_b), pa, pb),
                                   net.predict(_rows(table, ids_a * 0), _rows(table, ids_b), pa, pb), atol=1e-5, rtol=1e-5)
    pose = pb.clone().requires_grad_()
    net.predict_indexed(table, ids_a, ids_b, pa, pose).sum().backward()
    assert pose.grad.dtype == torch.float64 and bool(torch.isfinite(pose.grad).all())
    with pytest.raises(ValueError, match=r"pose_b: expected shape \(\.\.\., 7\)"):
        net.predict_indexed(table, ids_a, ids_b, pa, pb[:, :6])
    with pytest.raises(TypeError, match="ids_a: expected an integer dtype"):
        net.predict_indexed(table, ids_a.float(), ids_b, pa, pb)
    with pytest.raises(TypeError, match="points: expected dtype float32 or float64"):
        net.encode(points.int(), normals)


def test_cross_cells_covering_the_grid_reads_all_cells():
    """cross_cells >= M³ selects every cell: the same logits as cross_cells = 0 (bitwise: the max
    of the same products) and the same gradients, through the grouped and indexed paths."""
    nets = [_small_net(LOCC_CROSS).double() for _ in range(3)]
    nets[1].cross_cells, nets[2].cross_cells = 64, 100
    for net in nets[1:]:
        net.load_state_dict(nets[0].state_dict())
    points, normals = _clouds(3)
    pa, pb = _poses((3, 5), 1, 0.03, torch.float64), _poses((3, 5), 2, 0.03, torch.float64)
    ids_a, ids_b = torch.tensor([0, 1, 2, 2]), torch.tensor([1, 2, 0, 2])
    outs = []
    for net in nets:
        emb = net.encode(points.double(), normals.double())
        grouped = net.predict(_grouped(emb), _grouped(emb), pa, pb)
        indexed = net.predict_indexed(emb, ids_a, ids_b, pa[0, :4], pb[0, :4])
        grads = torch.autograd.grad(grouped.sum() + indexed.sum(), list(net.parameters()))
        outs.append((grouped, indexed, grads))
    for grouped, indexed, grads in outs[1:]:
        assert torch.equal(grouped, outs[0][0]) and torch.equal(indexed, outs[0][1])
        for got, want in zip(grads, outs[0][2]):
            torch.testing.assert_close(got, want)


def test_cross_cells_reads_the_kept_cells_with_points_first():
    """cross_cells = k against a per-query computation from its definition: the max over A's kept
    cells among the k of highest priority (4 where A has points + B's interpolated occupancy there
    squashed to [0, 2) + nearness to B's box centre), grouped and training layouts; cells that are
    not kept never count, even when fewer than k are kept."""
    from contactnet.models.collision_nets import _masked_max
    from contactnet.models.geometry import grid_coordinates

    net = _small_net(LOCC_CROSS).double()
    net.cross_cells = 30
    points, normals = _clouds(2)
    points[0, :100] *= 0.3  # object A's points bunched near its centre: many kept cells are empty
    emb = net.encode(points.double(), normals.double())
    a, b = emb.map(lambda x: x[0]), emb.map(lambda x: x[1])
    pa, pb = _poses((12,), 3, 0.03, torch.float64), _poses((12,), 4, 0.03, torch.float64)
    pb[:2, :3] += 10.0  # two queries with no kept cell
    keep = local_crop(a.aabb, 4, pa, pb, b.aabb)[0] > 0
    keys = torch.einsum("df,fxyz->dxyz", net.key.weight, b.features)[None]
    queries = a.features.flatten(1).T @ net.query.weight.T  # (64, D)
    expected, everything = [], []
    for q in range(12):
        coords = grid_coordinates(a.aabb, 4, pa[q], pb[q], b.aabb)  # (64, 3)
        sample = lambda grid: torch.nn.functional.grid_sample(  # noqa: E731
            grid, coords.flip(-1).view(1, 64, 1, 1, 3), align_corners=False).view(-1, 64).T
        near = sample(b.occupancy.view(1, 1, 4, 4, 4))[:, 0]
        priority = 4.0 * (a.occupancy > 0) + 2.0 * near / (1 + near) + 1 / (1 + coords.square().sum(-1))
        priority = torch.where(keep[q], priority, -1.0)
        chosen = torch.zeros(64, dtype=torch.bool)
        chosen[priority.topk(30).indices] = True
        expected.append(_masked_max(queries * sample(keys), keep[q] & chosen))
        everything.append(_masked_max(queries * sample(keys), keep[q]))
    expected, everything = torch.stack(expected), torch.stack(everything)
    kept = keep.sum(-1)
    assert (kept > 30).any() and ((kept < 30) & (kept > 0)).any() and (kept == 0).any()
    assert (expected[kept == 0] == 0).all()
    assert not torch.allclose(expected, everything)  # the selection matters on these queries
    torch.testing.assert_close(net._cross_grouped(a, b, pa, pb, keep, (12,)), expected)
    grouped = net._cross_grouped(a.map(lambda x: x[None]), b.map(lambda x: x[None]),
                                 pa[None], pb[None], keep[None], (1, 12))
    torch.testing.assert_close(grouped[0], expected)


def test_cross_points_probes_the_other_object_at_the_own_surface_points():
    """cross_points = k against its definition, per query: A's projected grid interpolated at A's
    points (edge cells extend to the box), times B's projected grid interpolated at those points
    moved into B's box units, max over the k points inside B's box of highest priority (B's
    interpolated occupancy squashed to [0, 2) + nearness to B's box centre); k >= K: every point
    inside. Grouped (training) and indexed (planner) layouts, and zero when no point is inside."""
    from contactnet.models.collision_nets import _masked_max
    from contactnet.models.geometry import point_coordinates

    points, normals = _clouds(2, k=60)
    for k in (20, 60):
        net = _small_net(LOCC_POINTS).double()
        net.cross_points = k
        emb = net.encode(points.double(), normals.double())
        a, b = emb.map(lambda x: x[0]), emb.map(lambda x: x[1])
        pa, pb = _poses((9,), 3, 0.03, torch.float64), _poses((9,), 4, 0.03, torch.float64)
        pb[0, :3] += 10.0  # no point of A inside B's box
        grid = lambda e, w: torch.einsum("df,fxyz->dxyz", w, e.features)[None]  # noqa: E731
        sample = lambda g, u, pad: torch.nn.functional.grid_sample(  # noqa: E731
            g, u.flip(-1).view(1, -1, 1, 1, 3), padding_mode=pad, align_corners=False).view(g.shape[1], -1).T
        own_unit = 2 * (a.points - a.aabb[0]) / (a.aabb[1] - a.aabb[0]) - 1
        queries = sample(grid(a, net.query.weight), own_unit, "border")  # (60, D)
        expected, inside_counts = [], []
        for q in range(9):
            coords = point_coordinates(a.points, pa[q], pb[q], b.aabb)  # (60, 3)
            inside = (coords.abs() <= 1).all(-1)
            inside_counts.append(int(inside.sum()))
            near = sample(b.occupancy.view(1, 1, 4, 4, 4), coords, "zeros")[:, 0]
            priority = torch.where(inside, 4.0 + 2.0 * near / (1 + near) + 1 / (1 + coords.square().sum(-1)), -1.0)
            chosen = torch.zeros(60, dtype=torch.bool)
            chosen[priority.topk(k).indices] = True
            expected.append(_masked_max(queries * sample(grid(b, net.key.weight), coords, "zeros"), inside & chosen))
        expected = torch.stack(expected)
        assert (expected[0] == 0).all() and expected[1:].abs().sum() > 0
        assert max(inside_counts) > 20  # k = 20 leaves some inside points out
        torch.testing.assert_close(net._cross_grouped(a, b, pa, pb, None, (9,), "points"), expected)
        grouped = net._cross_grouped(a.map(lambda x: x[None]), b.map(lambda x: x[None]), pa[None], pb[None], None,
                                     (1, 9), "points")
        torch.testing.assert_close(grouped[0], expected)
        # The indexed path gives the same logits as the grouped one.
        ids_a, ids_b = torch.zeros(9, dtype=torch.long), torch.ones(9, dtype=torch.long)
        torch.testing.assert_close(net.predict_indexed(emb, ids_a, ids_b, pa, pb), net.predict(a, b, pa, pb))


def test_cross_sites_both_feeds_the_cell_and_the_point_terms_to_the_head():
    """cross_sites="both": the head reads the cell term's and the point term's co-occupancy (each
    as its own net computes it), in that order after the crops."""
    both = _small_net(LOCC_BOTH).double()
    cells, points = _small_net(LOCC_TOPK).double(), _small_net(LOCC_POINTS).double()
    for net in (cells, points):
        net.query, net.key = both.query, both.key
    emb = both.encode(*(x.double() for x in _clouds(2, k=60)))
    a, b = emb.map(lambda x: x[0]), emb.map(lambda x: x[1])
    pa, pb = _poses((5,), 3, 0.03, torch.float64), _poses((5,), 4, 0.03, torch.float64)
    seen = []
    both.head.register_forward_pre_hook(lambda module, args: seen.append(args[0]))
    both.predict(a, b, pa, pb)
    keep_a, keep_b = (local_crop(x.aabb, 4, p, q, y.aabb)[0] > 0 for x, y, p, q in ((a, b, pa, pb), (b, a, pb, pa)))
    want = torch.cat([cells._cross_grouped(a, b, pa, pb, keep_a, (5,)), cells._cross_grouped(b, a, pb, pa, keep_b, (5,)),
                      points._cross_grouped(a, b, pa, pb, None, (5,), "points"),
                      points._cross_grouped(b, a, pb, pa, None, (5,), "points")], -1)
    torch.testing.assert_close(seen[0][:, -4 * 8:], want)


def _box_pose(g, n, spread):
    q = torch.nn.functional.normalize(torch.randn(n, 4, generator=g, dtype=torch.float64), dim=-1)
    return torch.cat([torch.randn(n, 3, generator=g, dtype=torch.float64) * spread, q], -1)


def test_box_placement_features_are_unitless_and_independent_of_the_frame_origins():
    from contactnet.geometry.poses import quaternion_to_matrix
    from contactnet.models.geometry import box_placement_features

    g = torch.Generator().manual_seed(0)
    lo = torch.randn(2, 64, 3, generator=g, dtype=torch.float64) * 0.02
    aabb_a, aabb_b = (torch.stack([lo[i], lo[i] + 0.01 + torch.rand(64, 3, generator=g, dtype=torch.float64) * 0.1], 1)
                      for i in range(2))
    pa, pb = _box_pose(g, 64, 0.05), _box_pose(g, 64, 0.05)
    f = box_placement_features(aabb_a, aabb_b, pa, pb)
    assert f.shape == (64, 18)
    # A change of units (metres to millimetres) changes nothing.
    k = 1000.0
    scaled = box_placement_features(aabb_a * k, aabb_b * k, torch.cat([pa[:, :3] * k, pa[:, 3:]], 1),
                                    torch.cat([pb[:, :3] * k, pb[:, 3:]], 1))
    torch.testing.assert_close(scaled, f, rtol=1e-9, atol=1e-9)
    # Moving an object's frame origin inside its box (the same shape in the world) changes nothing.
    c = torch.randn(64, 3, generator=g, dtype=torch.float64) * 0.03
    moved = torch.cat([pa[:, :3] - torch.einsum("nij,nj->ni", quaternion_to_matrix(pa[:, 3:]), c), pa[:, 3:]], 1)
    torch.testing.assert_close(box_placement_features(aabb_a + c[:, None], aabb_b, moved, pb), f, rtol=1e-9, atol=1e-9)
    # Two unit cubes 2 apart along x: offset 2 / √3 (their mean diagonal), sizes 1 / √3.
    cube = torch.tensor([[[-0.5] * 3, [0.5] * 3]], dtype=torch.float64)
    identity = torch.tensor([[0.0, 0, 0, 1, 0, 0, 0]], dtype=torch.float64)
    side = torch.tensor([[2.0, 0, 0, 1, 0, 0, 0]], dtype=torch.float64)
    f = box_placement_features(cube, cube, identity, side)[0]
    r3 = 3 ** 0.5
    torch.testing.assert_close(f[:3], torch.tensor([2 / r3, 0, 0], dtype=torch.float64))
    torch.testing.assert_close(f[3:12], torch.eye(3, dtype=torch.float64).flatten())
    torch.testing.assert_close(f[12:], torch.full((6,), 1 / r3, dtype=torch.float64))


def test_global_ocn_learns_box_overlap_at_centimetre_scale():
    """Boxes of a few centimetres, colliding when their axis-aligned boxes overlap: a rule of the
    placement alone, which Global-OCN picks up within 300 steps (0.996 here). With the placement
    fed in raw metres it stayed at chance this long (0.5; 0.72 after 600 steps), as it did through
    whole quickstart runs."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    net = _small_net(GlobalOCN)
    n, poses = 8, 64
    half = 0.01 + torch.rand(n, 1, 3, generator=g) * 0.03
    points = (torch.rand(n, 200, 3, generator=g) * 2 - 1) * half
    normals = torch.nn.functional.normalize(torch.randn(n, 200, 3, generator=g), dim=-1)
    identity = torch.tensor([0.0, 0, 0, 1, 0, 0, 0])
    pa = identity.expand(n, poses, 7)
    shift = (torch.rand(n, poses, 3, generator=g) * 2 - 1) * 0.08
    pb = torch.cat([shift, identity[3:].expand(n, poses, 4)], -1)
    partner = torch.roll(torch.arange(n), 1)
    reach = half + half[partner]  # (n, 1, 3): overlap when every axis is within the sum of half-sizes
    labels = (shift.abs() < reach).all(-1).float()
    assert 0.2 < float(labels.mean()) < 0.8
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    for _ in range(300):
        emb = net.encode(points, normals, torch.stack([-half[:, 0], half[:, 0]], 1))
        logits = net.predict(_grouped(emb), _grouped(_rows(emb, partner)), pa, pb)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
    predicted = logits.detach() > 0
    tpr = float(predicted[labels == 1].float().mean())
    tnr = float((~predicted[labels == 0]).float().mean())
    assert 0.5 * (tpr + tnr) > 0.9, (tpr, tnr)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_frame_tables_on_cuda_take_frame_quaternions_as_made():
    """`frame_quaternions` is made on the CPU; tables of CUDA objects must still build, and agree."""
    from contactnet.geometry.frames import frame_quaternions
    from contactnet.models.frame_tables import frame_logits, frame_tables

    torch.manual_seed(0)
    net = _small_net(LOCC).eval()
    points, normals = _clouds(3)
    aabb = torch.stack([points.amin(1), points.amax(1)], 1)
    ids, poses = torch.tensor([0, 1, 2]), _poses((3,), 1)
    out = {}
    for device in ("cpu", "cuda"):
        at = lambda x: x.to(device)  # noqa: E731
        tables = frame_tables(net.to(device), at(points), at(normals), at(aabb), list(at(points)), frame_quaternions(3))
        out[device] = frame_logits(net, tables, at(ids), at(ids.roll(1)), at(poses), at(poses.roll(1, 0)), 64)
    torch.testing.assert_close(out["cuda"].cpu(), out["cpu"], atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("cls", [LOCC, LOCC_CROSS, LOCC_POINTS, LOCC_CONTAINED, LOCC_DEFAULT])
def test_fused_kernels_give_the_torch_compositions_logits_and_gradients(cls, monkeypatch):
    """The surface-point term runs fused (`locc_point_cooccupancy`) on every path, training's
    grouped `predict` and the indexed one, with the weights' gradients (training), the poses'
    (a frozen net's learned cost) or none; the indexed crop reads the kept cells' rows
    (`locc_crop_pool`) where the weights need no gradient. Logits and gradients equal those of
    the torch composition (forced here), also in slices that do not divide the batch."""
    import contactnet.models.collision_nets as nets
    import contactnet.models.geometry as geometry

    calls = {"pool": 0, "points": 0}

    def counted(name, fn):
        def wrapper(*args, **kwargs):
            calls[name] += 1
            return fn(*args, **kwargs)
        return wrapper

    monkeypatch.setattr(geometry, "locc_crop_pool", counted("pool", geometry.locc_crop_pool))
    monkeypatch.setattr(nets, "locc_point_cooccupancy", counted("points", nets.locc_point_cooccupancy))
    monkeypatch.setattr(nets, "FUSED_CHUNK", 7)
    net = _small_net(cls).double()
    points, normals = (x.double() for x in _clouds(5, k=60))
    g = torch.Generator().manual_seed(5)
    ids_a, ids_b = torch.randint(5, (40,), generator=g), torch.randint(5, (40,), generator=g)
    pa, pb = _poses((40,), 10, 0.03, torch.float64), _poses((40,), 11, 0.03, torch.float64)
    params = list(net.parameters())
    fused_points = nets.LOCC.__dict__["_fused_points"]

    def run(fused: bool, indexed: bool, frozen: bool = False):
        """Logits and the gradients of their sum (poses, weights) on one path."""
        monkeypatch.setattr(nets.LOCC, "_fused_points", fused_points if fused else staticmethod(lambda *a: False))
        net.requires_grad_(not frozen)
        table = net.encode(points, normals)
        x = pa.clone().requires_grad_(True)
        if indexed:
            logits = net.predict_indexed(table, ids_a, ids_b, x, pb)
        else:
            logits = net.predict(_rows(table, ids_a), _rows(table, ids_b), x, pb)
        wrt = [x] + ([] if frozen else params)
        return logits.detach(), torch.autograd.grad(logits.sum(), wrt, allow_unused=True)

    points_term = cls in (LOCC_POINTS, LOCC_CONTAINED)
    for indexed in (False, True):
        for frozen in (False, True):
            want = run(False, indexed, frozen)
            before = dict(calls)
            got = run(True, indexed, frozen)
            # 40 queries in slices of 7, both sides
            assert calls["points"] - before["points"] == (2 * 6 if points_term else 0)
            torch.testing.assert_close(got[0], want[0])
            for a, b in zip(got[1], want[1]):
                assert (a is None) == (b is None)
                if a is not None:
                    torch.testing.assert_close(a, b)
    calls.update(pool=0)
    with torch.no_grad():
        table = net.encode(points, normals)
        net.predict_indexed(table, ids_a, ids_b, pa, pb)
    assert calls["pool"] == (0 if cls is LOCC_CROSS else 2)  # the cells' term reads the masks


@pytest.mark.parametrize("cls", [LOCC_DEPTH, LOCC_DEFAULT])
def test_surface_depth_reads_how_deep_each_object_reaches_behind_the_others_cloud(cls):
    """The head's two surface-depth inputs are ops.cloud_depth of A into B and of B into A over
    the radius (depth_radius × the larger point spacing), in the indexed and the grouped paths,
    with the co-occupancy term or without it; differentiable in the poses (the planner's learned
    cost); refused without the normals."""
    from contactnet.ops.cloud_depth import cloud_depth, sort_by_cell
    from contactnet.models.geometry import frame_into

    net = _small_net(cls).double()
    points, normals = _clouds(3, k=300)
    table = net.encode(points.double(), normals.double())
    g = torch.Generator().manual_seed(4)
    ids_a, ids_b = torch.randint(3, (50,), generator=g), torch.randint(3, (50,), generator=g)
    pa, pb = _poses((50,), 5, spread=0.03, dtype=torch.float64), _poses((50,), 6, spread=0.03, dtype=torch.float64)
    projection = net.project_table(table)
    depth = net._surface_depth(projection.depth_points, projection.depth_normals, projection.depth_starts,
                               projection.spacing, table.aabb, ids_a, ids_b, pa, pb)
    spacing = net._spacing(table)
    radius = net.depth_radius * torch.maximum(spacing[ids_a], spacing[ids_b])
    # The op searches DEPTH_GRID³ cells; any other grid gives the same depths.
    sorted_points, sorted_normals, starts = sort_by_cell(table.points, table.normals, table.aabb, 3)
    for side, (own, other, p_own, p_other) in enumerate(((ids_a, ids_b, pa, pb), (ids_b, ids_a, pb, pa))):
        rotation, translation = (x.contiguous() for x in frame_into(p_own, p_other))
        want = cloud_depth(sorted_points, sorted_normals, starts, own, other, radius, rotation, translation,
                           table.aabb[other].contiguous()) / radius
        torch.testing.assert_close(depth[:, side], want, atol=1e-12, rtol=0)
    assert (depth < 1).any() and (depth.abs() <= 1 + 1e-12).all()
    grouped = net._surface_depth_grouped(_rows(table, ids_a), _rows(table, ids_b), pa, pb)
    torch.testing.assert_close(grouped, depth, atol=1e-12, rtol=0)
    # The pose gradient reaches the logits through the depths.
    moving = pa.clone().requires_grad_()
    net.predict_indexed(table, ids_a, ids_b, moving, pb).sum().backward()
    assert moving.grad is not None and torch.isfinite(moving.grad).all()
    with pytest.raises(ValueError, match="normals"):
        net.predict(table._replace(normals=None), table, pa[:3], pb[:3])
    with pytest.raises(ValueError, match="depth_radius"):
        LOCC(ShapeEncoder(grid=4, hidden=32, features=16, channels=16), 32, surface_depth=True, depth_radius=0)

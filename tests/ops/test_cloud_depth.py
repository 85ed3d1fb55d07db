"""ops.cloud_depth against a brute-force reference (every pair of points), on random and
adversarial clouds and poses; its pose gradient against finite differences."""

import math

import pytest
import torch
from hypothesis import given, settings, strategies as st

from contactnet.data.pairs import random_quaternions
from contactnet.models.encoder import grid_box
from contactnet.models.geometry import frame_into
from contactnet.ops.cloud_depth import SOFTENING, cloud_depth, sort_by_cell


def sorted_clouds(points, normals, m, min_aspect=0.04):
    """Clouds sorted by the cells of an m³ grid over their grid boxes: points, normals, boxes
    (N, 2, 3), starts."""
    aabb = grid_box(torch.stack([points.amin(1), points.amax(1)], 1), min_aspect)
    points, normals, starts = sort_by_cell(points, normals, aabb, m)
    return points, normals, aabb, starts


def reference(points, normals, ids_own, ids_other, radius, rotation, translation, aabb_other, neighbours):
    out = []
    for q in range(len(ids_own)):
        o = ids_other[q]
        r = radius[q]
        x = points[ids_own[q]] @ rotation[q].T + translation[q]
        near = ((x >= aabb_other[q, 0] - r) & (x <= aabb_other[q, 1] + r)).all(-1)
        x = x[near]
        best = r
        if len(x):
            d = torch.cdist(x, points[o])
            d, j = d.topk(min(neighbours, d.shape[1]), -1, largest=False)
            ok = d <= r
            w = torch.where(ok, 1 / (d + r / SOFTENING), 0)
            s = (w * ((x[:, None] - points[o][j]) * normals[o][j]).sum(-1)).sum(-1) / w.sum(-1).clamp_min(1e-300)
            s = torch.where(ok.any(-1), s, r)
            best = torch.minimum(s.min(), r)
        out.append(best)
    return torch.stack(out)


def blobs(n, k, generator, dtype=torch.float64, scale=0.1):
    """n star-shaped blobs of k points (radius varying with direction) with outward normals."""
    u = torch.randn(n, k, 3, generator=generator, dtype=dtype)
    u = u / u.norm(dim=-1, keepdim=True)
    bumps = 1 + 0.3 * torch.sin(3 * u[..., :1] + torch.rand(n, 1, 1, generator=generator, dtype=dtype) * 6)
    stretch = 0.5 + torch.rand(n, 1, 3, generator=generator, dtype=dtype)
    points = scale * u * bumps * stretch
    normals = u / stretch  # a near-outward direction is enough for the op's arithmetic
    return points, normals / normals.norm(dim=-1, keepdim=True)


def queries(n, q, generator, dtype=torch.float64, spread=0.15):
    ids_a = torch.randint(n, (q,), generator=generator)
    ids_b = torch.randint(n, (q,), generator=generator)
    poses = lambda: torch.cat([spread * torch.randn(q, 3, generator=generator, dtype=dtype),
                               random_quaternions(q, generator, dtype)], -1)
    return ids_a, ids_b, poses(), poses()


def run(points, normals, m, ids_a, ids_b, pose_a, pose_b, radius, neighbours=4):
    p, nrm, aabb, starts = sorted_clouds(points, normals, m)
    rotation, translation = frame_into(pose_a, pose_b)
    args = (p, nrm, ids_a, ids_b, radius[ids_b], rotation.contiguous(), translation.contiguous(),
            aabb[ids_b].contiguous())
    got = cloud_depth(p, nrm, starts, *args[2:], neighbours=neighbours)
    return got, reference(*args, neighbours)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("m", [1, 4, 16])
def test_matches_brute_force(dtype, m):
    g = torch.Generator().manual_seed(m)
    points, normals = blobs(6, 400, g, dtype)
    ids_a, ids_b, pose_a, pose_b = queries(6, 300, g, dtype)
    radius = torch.full((6,), 0.012, dtype=dtype)
    got, want = run(points, normals, m, ids_a, ids_b, pose_a, pose_b, radius)
    tol = 1e-12 if dtype == torch.float64 else 2e-6
    assert torch.allclose(got, want, atol=tol, rtol=0)
    assert (got < radius[ids_b]).float().mean() > 0.1 and (got < 0).any() and (got > 0).any()  # the cases occur


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), scale=st.sampled_from([1e-3, 0.1, 30.0]),
       offset=st.sampled_from([0.0, 1e3]), neighbours=st.integers(1, 8), m=st.sampled_from([2, 6, 16]))
def test_matches_brute_force_any_scale(seed, scale, offset, neighbours, m):
    """Tiny and huge objects, far from the origin, any neighbour count (float64)."""
    g = torch.Generator().manual_seed(seed)
    points, normals = blobs(3, 200, g, scale=scale)
    points = points + offset
    ids_a, ids_b, pose_a, pose_b = queries(3, 40, g, spread=1.5 * scale)
    pose_a[:, :3] -= offset  # both objects' points near the world origin
    pose_b[:, :3] -= offset
    radius = torch.full((3,), 0.15 * scale, dtype=torch.float64)
    got, want = run(points, normals, m, ids_a, ids_b, pose_a, pose_b, radius, neighbours)
    assert torch.allclose(got, want, atol=1e-9 * (scale + offset), rtol=0)


def test_touching_and_coincident_clouds():
    """An object against itself at the same pose (every point on the other's cloud: depth near 0, the
    point's own plane weighing most), and points on cell faces of a flat object (a lattice plane)."""
    g = torch.Generator().manual_seed(3)
    points, normals = blobs(2, 300, g)
    same = torch.tensor([[0.0, 0, 0, 1, 0, 0, 0]], dtype=torch.float64).expand(4, 7)
    radius = torch.full((2,), 0.01, dtype=torch.float64)
    got, want = run(points, normals, 8, torch.tensor([0, 0, 1, 1]), torch.tensor([0, 0, 1, 1]), same, same, radius)
    assert torch.allclose(got, want, atol=1e-12) and got.abs().max() < 0.1 * 0.01
    # A lattice plane: many points exactly on cell faces of an 8-cell grid.
    xs = torch.linspace(0, 0.08, 9, dtype=torch.float64)
    plane = torch.stack(torch.meshgrid(xs, xs, indexing="ij"), -1).reshape(-1, 2)
    plane = torch.cat([plane, torch.zeros(len(plane), 1, dtype=torch.float64)], -1)[None]
    up = torch.zeros_like(plane)
    up[..., 2] = 1
    lifts = torch.tensor([-0.004, -0.001, 0.0, 0.001, 0.004, 0.02], dtype=torch.float64)
    pose_a = torch.zeros(len(lifts), 7, dtype=torch.float64)
    pose_a[:, 2], pose_a[:, 3] = lifts, 1
    pose_b = torch.zeros(len(lifts), 7, dtype=torch.float64)
    pose_b[:, 3] = 1
    ids = torch.zeros(len(lifts), dtype=torch.long)
    got, want = run(plane, up, 8, ids, ids, pose_a, pose_b, torch.tensor([0.012], dtype=torch.float64))
    assert torch.allclose(got, want, atol=1e-12)
    assert torch.allclose(got[:5], lifts[:5], atol=1e-12) and got[5] == 0.012  # past the radius: r


def close_queries(seed, q):
    """cloud_depth's arguments for q queries among three blobs posed close together (8-cell grids,
    radius 2 cm), as a tuple in its order."""
    g = torch.Generator().manual_seed(seed)
    points, normals = blobs(3, 300, g)
    p, nrm, aabb, starts = sorted_clouds(points, normals, 8)
    ids_a, ids_b, pose_a, pose_b = queries(3, q, g, spread=0.08)
    rotation, translation = (x.contiguous() for x in frame_into(pose_a, pose_b))
    radius = torch.full((q,), 0.02, dtype=torch.float64)
    return p, nrm, starts, ids_a, ids_b, radius, rotation, translation, aabb[ids_b].contiguous()


def test_pose_gradient_matches_finite_differences():
    args = close_queries(5, 60)
    depth = cloud_depth(*args)
    inside = (depth < args[5]).nonzero().flatten()[:8]
    assert len(inside) >= 4
    for i in inside.tolist():
        one = (*args[:3], *(x[i:i + 1] for x in args[3:]))  # the clouds, then query i's rows
        f = lambda t: cloud_depth(*one[:7], t, one[8])
        # The chosen point and neighbours are fixed where no other point takes over within the step.
        torch.autograd.gradcheck(f, (one[7].clone().requires_grad_(),), eps=1e-7, atol=1e-5)


def test_no_gradient_path_returns_the_kernel_value():
    args = close_queries(6, 80)
    plain = cloud_depth(*args)
    graded = cloud_depth(*args[:7], args[7].clone().requires_grad_(), args[8])
    assert torch.allclose(plain, graded.detach(), atol=1e-14)


def test_bad_inputs_name_the_argument():
    g = torch.Generator().manual_seed(7)
    points, normals = blobs(2, 50, g)
    p, nrm, aabb, starts = sorted_clouds(points, normals, 4)
    rot, t = torch.eye(3, dtype=torch.float64)[None], torch.zeros(1, 3, dtype=torch.float64)
    radius = torch.full((1,), 0.01, dtype=torch.float64)
    ok = dict(points=p, normals=nrm, starts=starts, radius=radius, ids_own=torch.tensor([0]), ids_other=torch.tensor([1]), rotation=rot,
              translation=t, aabb_other=aabb[1:2])
    cloud_depth(**ok)
    for change, name, error in (({"starts": starts.long()}, "starts", TypeError),
                                ({"normals": nrm.float()}, "normals", TypeError),
                                ({"radius": radius.expand(2)}, "radius", ValueError),
                                ({"ids_other": torch.tensor([2])}, "ids_other", (ValueError, IndexError)),
                                ({"neighbours": 9}, "neighbours", (ValueError, RuntimeError)),
                                ({"neighbours": 0}, "neighbours", ValueError),
                                ({"starts": starts[:, :-2]}, "starts", (ValueError, RuntimeError))):
        with pytest.raises(error, match=name):
            cloud_depth(**{**ok, **change})
    for args, name in (((points[..., :2], normals, aabb, 4), "points"), ((points, normals, aabb[:1], 4), "aabb"),
                       ((points, normals, aabb, 0), "grid")):
        with pytest.raises((ValueError, TypeError), match=name):
            sort_by_cell(*args)


def test_sort_by_cell_puts_each_cells_points_in_one_run():
    """Each point lies in the cell whose run holds it (its box's m³ grid, the box's faces in the
    edge cells), the runs follow the cells' row-major order, and the points keep their order
    within a cell; the normals move with their points."""
    g = torch.Generator().manual_seed(3)
    points, normals = blobs(3, 200, g)
    aabb = torch.stack([points.amin(1), points.amax(1)], 1)
    m = 5
    p, nrm, starts = sort_by_cell(points, normals, aabb, m)
    assert starts.dtype == torch.int32 and starts.shape == (3, m**3 + 1)
    for o in range(3):
        assert starts[o, 0] == 0 and starts[o, -1] == 200 and (starts[o].diff() >= 0).all()
        cell = ((p[o] - aabb[o, 0]) * (m / (aabb[o, 1] - aabb[o, 0]))).floor().long().clamp(0, m - 1)
        flat = (cell[:, 0] * m + cell[:, 1]) * m + cell[:, 2]
        run = torch.searchsorted(starts[o].long(), torch.arange(200), right=True) - 1
        assert torch.equal(flat, run)
        original = [next(i for i in range(200) if torch.equal(points[o, i], x)) for x in p[o]]
        for c in range(m**3):
            ids = original[starts[o, c]:starts[o, c + 1]]
            assert ids == sorted(ids)
        assert torch.equal(nrm[o], normals[o, original])

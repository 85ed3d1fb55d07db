"""The fused surface-point co-occupancy term against its pure-torch reference (the torch
composition of LOCC's indexed path): random tables and poses, every point kept and none, the rank
cut with and without ties, flat boxes, points on the box faces, float32 and float64; argument
errors; opcheck."""

import pytest
import torch
from hypothesis import given, settings, strategies as st

from contactnet.geometry.poses import quaternion_to_matrix
from contactnet.ops.locc_cooccupancy import locc_point_cooccupancy
from contactnet.ops.reference.locc_cooccupancy import locc_point_cooccupancy as reference

DTYPES = [torch.float32, torch.float64]


def _inputs(q, seed, dtype, n=4, k=50, d=5, grid=4, spread=0.05):
    """A table of n objects (k points in boxes of a few cm, d-channel keys on a grid³, occupancy
    counts with empty cells) and q queries at random relative poses: some keep none of their
    points, some all."""
    g = torch.Generator().manual_seed(seed)
    half = 0.02 + 0.04 * torch.rand(n, 1, 3, generator=g, dtype=torch.float64)
    points = (2 * torch.rand(n, k, 3, generator=g, dtype=torch.float64) - 1) * half
    aabb = torch.cat([-half, half], 1)  # (n, 2, 3)
    point_queries = torch.randn(n, k, d, generator=g, dtype=torch.float64)
    keys = torch.randn(n * grid**3, d, generator=g, dtype=torch.float64)
    occupancy = torch.randint(0, 4, (n * grid**3,), generator=g).to(torch.float64)
    ids_own, ids_other = torch.randint(n, (q,), generator=g), torch.randint(n, (q,), generator=g)
    quat = torch.randn(q, 4, generator=g, dtype=torch.float64)
    rotation = quaternion_to_matrix(quat / quat.norm(dim=1, keepdim=True))
    translation = spread * torch.randn(q, 3, generator=g, dtype=torch.float64)
    rotation[:4], translation[:4] = torch.eye(3, dtype=torch.float64), 0.0  # an object against itself: all kept
    ids_other[:4] = ids_own[:4]
    translation[4:8] = 10.0  # nothing kept
    cast = lambda x: x.to(dtype).contiguous()  # noqa: E731
    return (cast(points), cast(point_queries), cast(keys), cast(occupancy), grid, ids_own, ids_other, cast(rotation),
            cast(translation), cast(aabb[ids_other]))


def _check(args, count, dtype):
    got = locc_point_cooccupancy(*args, count)
    want = reference(*args, count)
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    torch.testing.assert_close(got, want, rtol=tol, atol=tol)
    return got


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("count", [1, 7, 50, 1000])
def test_matches_reference(dtype, count):
    args = _inputs(400, count, dtype)
    got = _check(args, count, dtype)
    assert (got[4:8] == 0).all() and (got[:4] != 0).all()
    if count == 7:  # the rank cut is exercised: queries that keep more points than they read
        points, ids_own, rotation, translation, box = args[0], args[5], args[7], args[8], args[9]
        local = torch.einsum("qij,qkj->qki", rotation, points[ids_own]) + translation[:, None]
        kept = ((local >= box[:, 0:1]) & (local <= box[:, 1:2])).all(-1).sum(-1)
        assert ((kept > count) & (kept < 50)).sum() > 20


@pytest.mark.parametrize("dtype", DTYPES)
def test_ties_at_the_cut_read_equal_values(dtype):
    """Points repeated (equal ranks, equal values): whichever copies the cut reads, the max is the
    same, so the op agrees with topk's choice."""
    args = list(_inputs(200, 3, dtype, k=48))
    args[0] = args[0][:, :6].repeat(1, 8, 1).contiguous()  # 6 points, 8 copies each
    args[1] = args[1][:, :6].repeat(1, 8, 1).contiguous()
    for count in (1, 5, 9, 20):
        _check(args, count, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_flat_boxes_and_points_on_the_faces(dtype):
    """A box with no thickness (its extent clamped to 1e-6, as `point_coordinates` does: points up
    to 1e-6 past it are inside) and points exactly on a box's faces (kept: |c| <= 1)."""
    args = list(_inputs(8, 5, dtype))
    points, box = args[0].clone(), args[9].clone()
    rotation, translation = args[7], args[8]
    rotation[:], translation[:] = torch.eye(3, dtype=dtype), 0.0
    box[:, 0, 2] = box[:, 1, 2] = 0.0  # flat along z
    points[:, :10, 2] = 0.0
    points[:, 10:20, 2] = 4e-7  # past the flat box, within the clamp
    points[:, 20:30, 2] = 3e-6  # beyond it
    points[:, 30:, :] = box[0, 1]  # on the corner of object 0's box (queries of other objects vary)
    args[0], args[9] = points.contiguous(), box.contiguous()
    args[5] = torch.zeros_like(args[5])  # every query's own object is 0
    got = _check(args, 1000, dtype)
    assert (got != 0).any()


@pytest.mark.parametrize("dtype", DTYPES)
def test_nan_points_are_outside(dtype):
    args = list(_inputs(50, 6, dtype))
    args[0] = args[0].clone()
    args[0][:, ::3] = float("nan")
    _check(args, 10, dtype)


def test_zero_queries():
    args = _inputs(8, 0, torch.float32)
    empty = tuple(x[:0].contiguous() if isinstance(x, torch.Tensor) and i >= 5 else x for i, x in enumerate(args))
    assert locc_point_cooccupancy(*empty, 4).shape == (0, 5)


@settings(max_examples=40, deadline=None)
@given(k=st.integers(1, 40), d=st.integers(1, 20), grid=st.integers(1, 5), count=st.integers(1, 45),
       spread=st.sampled_from([0.0, 0.01, 0.05]), seed=st.integers(0, 2**16))
def test_random_sizes(k, d, grid, count, spread, seed):
    _check(_inputs(30, seed, torch.float64, n=3, k=k, d=d, grid=grid, spread=spread), count, torch.float64)


@pytest.mark.parametrize("count", [3, 1000])
def test_pose_gradients(count):
    """d/d rotation and translation: gradcheck (float64), and equal to the reference's autograd
    (F.grid_sample's coordinate gradient) under a random upstream gradient."""
    args = list(_inputs(40, 9, torch.float64, k=30))
    rotation, translation = (args[i].clone().requires_grad_(True) for i in (7, 8))

    def fused(r, t):
        return locc_point_cooccupancy(*args[:7], r, t, args[9], count)

    torch.autograd.gradcheck(fused, (rotation, translation), eps=1e-7, atol=1e-6)
    upstream = torch.randn(40, 5, dtype=torch.float64)
    got = torch.autograd.grad((fused(rotation, translation) * upstream).sum(), (rotation, translation))
    want = torch.autograd.grad((reference(*args[:7], rotation, translation, args[9], count) * upstream).sum(),
                               (rotation, translation))
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-9, atol=1e-12)
    assert got[0].abs().sum() > 0 and got[1].abs().sum() > 0


@pytest.mark.parametrize("count", [3, 1000])
def test_table_gradients(count):
    """d/d point_queries and keys (training's): gradcheck, and equal to the reference's autograd,
    with the poses' gradients alongside."""
    args = list(_inputs(30, 4, torch.float64, n=3, k=20, d=3, grid=3))
    inputs = [args[i].clone().requires_grad_(True) for i in (1, 2, 7, 8)]

    def call(op, pq, keys, r, t):
        return op(args[0], pq, keys, *args[3:7], r, t, args[9], count)

    torch.autograd.gradcheck(lambda *x: call(locc_point_cooccupancy, *x), inputs, eps=1e-7, atol=1e-6)
    upstream = torch.randn(30, 3, dtype=torch.float64)
    got = torch.autograd.grad((call(locc_point_cooccupancy, *inputs) * upstream).sum(), inputs)
    want = torch.autograd.grad((call(reference, *inputs) * upstream).sum(), inputs)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-9, atol=1e-12)
    assert all(g.abs().sum() > 0 for g in got)


def test_points_occupancy_or_boxes_that_need_a_gradient_are_refused():
    args = list(_inputs(6, 0, torch.float64))
    args[0] = args[0].clone().requires_grad_(True)
    with pytest.raises(ValueError, match="points: locc_point_cooccupancy differentiates the poses"):
        locc_point_cooccupancy(*args, 4)


def test_bad_input_is_a_clear_error():
    args = list(_inputs(6, 0, torch.float32))
    with pytest.raises(ValueError, match=r"count: expected an int >= 1"):
        locc_point_cooccupancy(*args, 0)
    with pytest.raises(ValueError, match=r"keys: expected shape \(256, 5\)"):
        locc_point_cooccupancy(*args[:2], args[2][1:].contiguous(), *args[3:], 4)
    with pytest.raises(TypeError, match="occupancy has dtype torch.float64"):
        locc_point_cooccupancy(*args[:3], args[3].double(), *args[4:], 4)
    with pytest.raises(ValueError, match=r"ids_other: indices must lie in \[0, 4\)"):
        locc_point_cooccupancy(*args[:6], torch.full((6,), 4), *args[7:], 4)
    with pytest.raises(ValueError, match="rotation: expected a contiguous tensor"):
        locc_point_cooccupancy(*args[:7], args[7].transpose(1, 2), *args[8:], 4)
    with pytest.raises(TypeError, match="ids_own: expected an integer dtype"):
        locc_point_cooccupancy(*args[:5], args[5].float(), *args[6:], 4)


def test_opcheck():
    args = list(_inputs(12, 2, torch.float64))
    torch.library.opcheck(torch.ops.contactnet.locc_point_cooccupancy.default, (*args, 3))
    args[7], args[8] = args[7].requires_grad_(True), args[8].requires_grad_(True)
    torch.library.opcheck(torch.ops.contactnet.locc_point_cooccupancy.default, (*args, 3))

"""The fused LOCC crop against its pure-torch reference (exact masks and counts), on random and
adversarial inputs; argument errors; opcheck; the differentiable crop features built on it."""

import pytest
import torch

from contactnet.geometry.poses import quaternion_to_matrix
from contactnet.models.geometry import local_crop
from contactnet.ops.locc_crop import locc_crop, locc_crop_pool
from contactnet.ops.reference.locc_crop import locc_crop as locc_crop_reference
from contactnet.ops.reference.locc_crop import locc_crop_pool as locc_crop_pool_reference

DTYPES = [torch.float32, torch.float64]


def _inputs(q, seed, dtype, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    lo = -(0.02 + 0.08 * torch.rand(q, 3, generator=g, dtype=torch.float64))
    hi = 0.01 + 0.08 * torch.rand(q, 3, generator=g, dtype=torch.float64)
    quat = torch.randn(q, 4, generator=g, dtype=torch.float64)
    rotation = quaternion_to_matrix(quat / quat.norm(dim=1, keepdim=True))
    offset = 0.1 * torch.randn(q, 3, generator=g, dtype=torch.float64)
    reach = 0.02 + 0.06 * torch.rand(q, 3, generator=g, dtype=torch.float64)
    return tuple((x * s).to(dtype).contiguous() for x, s in
                 ((torch.stack([lo, hi], 1), scale), (rotation, 1.0), (offset, scale), (reach, scale)))


def _check(args, grid):
    got = locc_crop(*args, grid)
    want = locc_crop_reference(*args, grid)
    assert torch.equal(got.weights, want[0]) and torch.equal(got.count, want[2])
    torch.testing.assert_close(got.mean_own, want[1])
    return got


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("grid", [2, 5, 6, 16])
def test_matches_reference(dtype, grid):
    got = _check(_inputs(500, grid, dtype), grid)
    # Empty and partly kept crops both occur (a fully kept one: test_adversarial_cases).
    assert (got.count == 0).any() and ((got.count > 0) & (got.count < grid**3)).any()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("scale", [1e-4, 1e3])
def test_tiny_and_huge_coordinates(dtype, scale):
    _check(_inputs(200, 7, dtype, scale), 6)


@pytest.mark.parametrize("dtype", DTYPES)
def test_adversarial_cases(dtype):
    aabb, rotation, offset, reach = _inputs(6, 1, dtype)
    rotation[:] = torch.eye(3, dtype=dtype)
    aabb[1] = torch.tensor([[-0.1, -0.1, 0.0], [0.1, 0.1, 0.0]], dtype=dtype)  # a flat box
    offset[2] = 0.0
    reach[2] = 0.05  # cell centres at ±0.05 along x lie exactly on the reach: kept (<=)
    aabb[2] = torch.tensor([[-0.06, -0.06, -0.06], [0.06, 0.06, 0.06]], dtype=dtype)
    reach[3] = 1e9  # everything kept
    offset[4] = 1e9  # nothing kept
    got = _check((aabb, rotation, offset, reach), 6)
    assert got.count[3] == 216 and got.count[4] == 0 and (got.weights[4] == 0).all()
    assert (got.mean_own[4] == 0).all()


def test_zero_queries():
    args = tuple(x[:0].contiguous() for x in _inputs(3, 0, torch.float32))
    got = locc_crop(*args, 6)
    assert got.weights.shape == (0, 216) and got.mean_own.shape == (0, 3) and got.count.shape == (0,)


def test_bad_input_is_a_clear_error():
    aabb, rotation, offset, reach = _inputs(4, 0, torch.float32)
    with pytest.raises(ValueError, match=r"grid: expected an int in \[2, 16\]"):
        locc_crop(aabb, rotation, offset, reach, 17)
    with pytest.raises(ValueError, match=r"rotation: expected shape \(4, 3, 3\)"):
        locc_crop(aabb, rotation[:3].contiguous(), offset, reach, 6)
    with pytest.raises(TypeError, match="reach has dtype torch.float64"):
        locc_crop(aabb, rotation, offset, reach.double(), 6)
    with pytest.raises(ValueError, match="offset: expected a contiguous tensor"):
        locc_crop(aabb, rotation, torch.zeros(4, 6)[:, :3], reach, 6)


def test_opcheck():
    torch.library.opcheck(torch.ops.contactnet.locc_crop.default, (*_inputs(8, 2, torch.float64), 6))


def test_crop_features_are_differentiable_in_the_poses():
    """The mean kept centre (in the other box's units) carries the poses' gradient; the masks
    are piecewise constant. gradcheck on random poses away from mask changes."""
    g = torch.Generator().manual_seed(4)
    aabb_a = torch.tensor([[-0.05, -0.02, -0.03], [0.05, 0.02, 0.03]], dtype=torch.float64)
    aabb_b = torch.tensor([[-0.04, -0.04, -0.01], [0.04, 0.04, 0.01]], dtype=torch.float64)
    pose_b = torch.tensor([[0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0]], dtype=torch.float64)
    q = torch.randn(1, 4, generator=g, dtype=torch.float64)
    pose_a = torch.cat([0.03 * torch.randn(1, 3, generator=g, dtype=torch.float64), q / q.norm()], 1)
    pose_a.requires_grad_(True)
    assert 0 < local_crop(aabb_a, 6, pose_a, pose_b, aabb_b)[2].item() < 1
    torch.autograd.gradcheck(lambda p: local_crop(aabb_a, 6, p, pose_b, aabb_b)[1], (pose_a,))


# ---- the crop pooled from a table of embeddings ---------------------------------------------------


def _pool_inputs(q, seed, dtype, grid, n=5, f=7):
    args = _inputs(q, seed, dtype)
    g = torch.Generator().manual_seed(seed + 100)
    rows = torch.randn(n * grid**3, f, generator=g, dtype=torch.float64).to(dtype)
    return args, rows, torch.randint(n, (q,), generator=g)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("grid", [2, 6, 16])
def test_pool_is_the_embedding_bag_of_the_weights(dtype, grid):
    """locc_crop_pool = an embedding bag of each query's rows with locc_crop's weights (the
    indexed LOCC's crop before it), and the same mean centres and counts."""
    args, rows, ids = _pool_inputs(300, grid, dtype, grid)
    args[2][:3] = 1e9  # nothing kept: a zero crop
    crop = locc_crop(*args, grid)
    bag, _, _ = locc_crop_pool_reference(*args, grid, rows, ids)
    got = locc_crop_pool(*args, grid, rows, ids)
    tol = 1e-12 if dtype == torch.float64 else 1e-6
    torch.testing.assert_close(got.pooled, bag, rtol=tol, atol=tol)
    assert torch.equal(got.count, crop.count) and torch.equal(got.mean_own, crop.mean_own)
    assert (got.pooled[:3] == 0).all() and (got.count > 0).any()


def test_pool_bad_input_is_a_clear_error():
    args, rows, ids = _pool_inputs(4, 0, torch.float32, 6)
    with pytest.raises(ValueError, match=r"rows: expected N·M³ rows \(M = 6\)"):
        locc_crop_pool(*args, 6, rows[1:], ids)
    with pytest.raises(TypeError, match="rows has dtype torch.float64"):
        locc_crop_pool(*args, 6, rows.double(), ids)
    with pytest.raises(ValueError, match=r"ids: indices must lie in \[0, 5\)"):
        locc_crop_pool(*args, 6, rows, torch.full((4,), 5))
    with pytest.raises(ValueError, match=r"ids: expected shape \(4,\)"):
        locc_crop_pool(*args, 6, rows, ids[:3])


def test_pool_opcheck():
    args, rows, ids = _pool_inputs(8, 2, torch.float64, 6)
    torch.library.opcheck(torch.ops.contactnet.locc_crop_pool.default, (*args, 6, rows, ids))

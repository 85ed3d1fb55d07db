"""The argument-check policy of contactnet.ops._checks: index tensors of any integer dtype or
layout are accepted (converted once, same results), well-formed ones pass with no copy, poses of
the other float dtype are cast to the library's, and tensor values are checked in C++ on the CPU
(no host read in the wrapper) and in Python elsewhere, except under trust or graph capture."""

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from contactnet.geometry import Mesh, MeshLibrary
from contactnet.ops import blem_contacts, ipc, mesh_collide, mesh_distance
from contactnet.ops._checks import as_index_tensor, check_float_tensor, values_checked_here
from tests.ops import ipc_cases as cases
from tests.ops.mesh_cases import bumpy_sphere, random_poses

aten = torch.ops.aten
_COPIES = {aten._to_copy.default, aten.copy_.default, aten.clone.default, aten.contiguous.default}
_HOST_READS = {aten._local_scalar_dense.default, aten.min.default, aten.max.default, aten.is_nonzero.default}


class Seen(TorchDispatchMode):
    """Records every aten / contactnet op called (not those inside a C++ op)."""

    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(func)
        return func(*args, **(kwargs or {}))


def _strided(t: torch.Tensor) -> torch.Tensor:
    """The same values as `t`, in a non-contiguous tensor."""
    wide = torch.zeros(t.shape[0], 2 * t.shape[1], dtype=t.dtype, device=t.device)
    wide[:, ::2] = t
    out = wide[:, ::2]
    assert not out.is_contiguous()
    return out


def test_as_index_tensor_converts_once_and_passes_int64_through():
    x = torch.arange(12).reshape(4, 3)
    assert as_index_tensor(x, "x", (None, 3)) is x
    for other in (x.int(), x.short(), _strided(x), _strided(x.int()), x.t().contiguous().t()):
        y = as_index_tensor(other, "x", (None, 3))
        assert y.dtype == torch.int64 and y.is_contiguous() and torch.equal(y, x)
    with pytest.raises(TypeError, match="x: expected an integer dtype"):
        as_index_tensor(x.double(), "x", (None, 3))
    with pytest.raises(TypeError, match="x: expected an integer dtype"):
        as_index_tensor(x > 0, "x", (None, 3))
    with pytest.raises(ValueError, match=r"x: expected shape \(N, 2\)"):
        as_index_tensor(x, "x", (None, 2))


def _ipc_outputs(V, F, E, body, dhat, cand):
    """Every IPC entry that takes index tensors, on one scene."""
    V1 = V + 0.3 * dhat
    fv, ee = cand
    return {
        "edges": ipc.mesh_edges(F),
        "candidates": ipc.collision_candidates(V, F, E, dhat, body),
        "swept": ipc.swept_candidates(V, V1, F, E, 0.0, body),
        "padded": ipc.collision_candidates_padded(V, F, E, dhat, 256, body),
        "swept_padded": ipc.swept_candidates_padded(V, V1, F, E, 256, 0.0, body),
        "energy": ipc.barrier_potential(V, F, E, (fv, ee), dhat, per_candidate=True),
        "gradient": ipc.barrier_potential_gradient(V, F, E, (fv, ee), dhat),
        "hessian": ipc.barrier_potential_hessian(V, F, E, (fv, ee), dhat).local,
        "friction": ipc.friction_potential_gradient(V1 - V, V, F, E, (fv, ee), dhat, 1.0, 0.5, 1e-3),
        "toi": ipc.ccd_time_of_impact(V, V1, F, E, (fv, ee)),
    }


def _flat(x):
    if isinstance(x, torch.Tensor):
        return [x]
    return [t for y in x for t in _flat(y)]


@pytest.mark.parametrize("convert", ["int32", "strided", "strided_int32"])
def test_ipc_ops_accept_any_integer_index_tensor(convert, device):
    V, F, E, body, dhat = (t.to(device) if isinstance(t, torch.Tensor) else t for t in cases.stacked_sheets(3))
    cand = ipc.collision_candidates(V, F, E, dhat, body)
    assert cand.count > 10
    want = _ipc_outputs(V, F, E, body, dhat, cand)

    def conv(t):
        if "int32" in convert:
            t = t.int()
        if "strided" in convert:
            t = _strided(t[:, None])[:, 0] if t.dim() == 1 else _strided(t)
        return t

    got = _ipc_outputs(V, conv(F), conv(E), conv(body), dhat, ipc.Candidates(conv(cand[0]), conv(cand[1])))
    for key in want:
        for a, b in zip(_flat(want[key]), _flat(got[key]), strict=True):
            if a.is_floating_point() and a.device.type != "cpu":
                # a device sums into shared rows atomically, in no fixed order: equal to rounding
                torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-15, msg=key)
            else:
                assert torch.equal(a, b), key


def test_well_formed_ipc_inputs_are_not_copied_nor_read_on_the_cpu():
    """int64 contiguous indices reach the op as they are, and on the CPU the wrapper reads no
    values (the C++ entry checks them in its own pass)."""
    V, F, E, body, dhat = cases.stacked_sheets(3)
    cand = ipc.collision_candidates(V, F, E, dhat, body)
    with Seen() as seen:
        ipc.collision_candidates(V, F, E, dhat, body)
        ipc.collision_candidates_padded(V, F, E, dhat, 64, body)
        ipc.barrier_potential(V, F, E, cand, dhat, per_candidate=True)
        ipc.ccd_time_of_impact(V, V, F, E, cand)
    assert not _COPIES & set(seen.ops) and not _HOST_READS & set(seen.ops), set(seen.ops)
    with Seen() as seen:
        ipc.collision_candidates(V, F.int(), E, dhat, body)
    assert seen.ops.count(aten.copy_.default) == 1  # the one conversion


def test_cpu_value_checks_run_in_cpp_with_the_argument_names():
    V, F, E, body, dhat = cases.stacked_sheets(2)
    ops = torch.ops.contactnet
    fv, ee = ipc.collision_candidates(V, F, E, dhat)
    rest = V.clone()
    # direct op calls: the C++ entry raises ValueError naming the argument
    with pytest.raises(ValueError, match="faces: indices must lie in"):
        ops.ipc_collision_candidates(V, F + V.shape[0], E, None, dhat)
    with pytest.raises(ValueError, match="vertex_body: body ids must be >= 0"):
        ops.ipc_collision_candidates(V, F, E, body - 1, dhat)
    # large index tensors take another path (one vectorised pass) with the same verdicts
    big = F.repeat(2048 // F.shape[0] + 1, 1)
    assert big.numel() > 4096
    ops.ipc_collision_candidates(V, big, E, None, dhat)
    for bad in (V.shape[0], -1):
        wrong = big.clone()
        wrong[-1, 2] = bad
        with pytest.raises(ValueError, match="faces: indices must lie in"):
            ops.ipc_collision_candidates(V, wrong, E, None, dhat)
    with pytest.raises(ValueError, match=r"candidates.face_vertex\): column 1 must lie in"):
        ops.ipc_barrier_potential(V, rest, F, E, fv + torch.tensor([0, F.shape[0]]), ee, dhat, 1.0)
    with pytest.raises(ValueError, match=r"candidates.edge_edge\): a padding row"):
        ops.ipc_ccd(V, V, F, E, fv, torch.tensor([[-1, 0]]), 0.0, 1.0, 0.9, 100)
    # the wrappers raise the same, without reading the values in Python
    with pytest.raises(ValueError, match="vertex_body"):
        ipc.swept_candidates_padded(V, V, F, E, 8, 0.0, body - 1)
    with pytest.raises(ValueError, match="face_vertex"):
        ipc.friction_potential(V, V, F, E, ipc.Candidates(fv - 2, ee), dhat, 1.0, 0.5, 1e-3)


def test_values_are_checked_in_python_off_the_cpu_unless_trusted():
    meta = torch.empty(3, dtype=torch.int64, device="meta")
    assert values_checked_here(meta) and not values_checked_here(torch.empty(3, dtype=torch.int64))
    assert values_checked_here(torch.empty(3), checked_in_cpp_on_cpu=False)  # pure-torch functions
    with ipc.trusted_indices():
        assert not values_checked_here(meta)
        assert not values_checked_here(torch.empty(3), checked_in_cpp_on_cpu=False)


def test_trusted_inputs_skip_every_check_and_restore_them():
    V, F, E, body, dhat = cases.stacked_sheets(3)
    with pytest.raises(ValueError, match="candidates.face_vertex"):
        ipc.barrier_potential(V, F, E, ipc.Candidates(torch.zeros(3, 3, dtype=torch.int64),
                                                      torch.zeros(0, 2, dtype=torch.int64)), dhat)
    cand = ipc.collision_candidates(V, F, E, dhat, body)
    want = ipc.barrier_potential(V, F, E, cand, dhat)
    with ipc.trusted_inputs():
        check_float_tensor(torch.zeros(2, dtype=torch.int64), "x", (5,))  # vouched for: not checked
        assert not values_checked_here(torch.empty(3, dtype=torch.int64, device="meta"))
        torch.testing.assert_close(ipc.barrier_potential(V, F, E, cand, dhat), want)
        assert torch.ops.contactnet.trust_index_values(True)  # the C++ value passes are off too
    with pytest.raises(TypeError, match="x: expected dtype float"):
        check_float_tensor(torch.zeros(2, dtype=torch.int64), "x", (5,))
    with pytest.raises(RuntimeError, match="boom"), ipc.trusted_inputs():
        raise RuntimeError("boom")
    # Both halves are back on after the context, an exception included: C++ reads the values again.
    assert not torch.ops.contactnet.trust_index_values(False)
    with pytest.raises(ValueError, match="faces"):
        ipc.barrier_potential(V, F + V.shape[0], E, cand, dhat)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_graph_capture_skips_value_checks():
    V, F, E, body, dhat = (t.cuda() if isinstance(t, torch.Tensor) else t for t in cases.stacked_sheets(3))
    with pytest.raises(ValueError, match="faces"):  # outside capture, the wrapper checks
        ipc.collision_candidates_padded(V, F + 10**6, E, dhat, 64, body)
    ipc.collision_candidates_padded(V, F, E, dhat, 256, body)  # warm up (lazy init)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        found = ipc.collision_candidates_padded(V, F, E, dhat, 256, body)  # room for all 270
        energy = ipc.barrier_potential(V, F, E, found.candidates, dhat)
    graph.replay()
    want = ipc.barrier_potential(V, F, E, ipc.collision_candidates(V, F, E, dhat, body), dhat)
    torch.testing.assert_close(energy, want)


# ---- mesh queries: poses of either float dtype ------------------------------------------------


@pytest.fixture(scope="module")
def spheres():
    return [Mesh(*bumpy_sphere(2, seed=s)) for s in range(2)]


@pytest.mark.parametrize("lib_dtype", [torch.float32, torch.float64])
def test_poses_of_the_other_float_dtype_are_cast_to_the_library(spheres, lib_dtype, device):
    lib = MeshLibrary(spheres, dtype=lib_dtype, device=device)
    other = torch.float64 if lib_dtype == torch.float32 else torch.float32
    pa = random_poses(16, 0.06, seed=1, dtype=other).to(device)
    pb = random_poses(16, 0.06, seed=2, dtype=other).to(device)
    ids_a, ids_b = torch.zeros(16, dtype=torch.int32), torch.ones(16, dtype=torch.int32)
    ca, cb = pa.to(lib_dtype), pb.to(lib_dtype)
    for f in (mesh_distance, mesh_collide):
        want, got = f(lib, ids_a.long(), ids_b.long(), ca, cb), f(lib, ids_a, ids_b, pa, pb)
        for a, b in zip(_flat(want), _flat(got), strict=True):
            assert torch.equal(a.nan_to_num(0.5), b.nan_to_num(0.5)), f.__name__
    want = blem_contacts(lib, ids_a, ids_b, ca, cb, 0.002, 0.002)
    got = blem_contacts(lib, ids_a, ids_b, pa, pb, 0.002, 0.002)
    assert int(want.counts.sum()) > 0
    for a, b in zip(want, got, strict=True):
        assert torch.equal(a, b)
    with pytest.raises(TypeError, match="poses_a: expected dtype float32 or float64"):
        mesh_distance(lib, ids_a, ids_b, pa.long(), pb)


def test_numpy_poses_points_and_int32_ids_give_the_tensors_answers(spheres, device):
    # What users hold (numpy arrays, float32 or float64, int32 ids) is converted once at the boundary.
    import numpy as np

    from contactnet.ops import hulls_separated, point_mesh_distance

    lib = MeshLibrary(spheres, dtype=torch.float64, device=device)
    pa, pb = random_poses(16, 0.06, seed=1, dtype=torch.float64), random_poses(16, 0.06, seed=2, dtype=torch.float64)
    ids_a, ids_b = torch.zeros(16, dtype=torch.int64), torch.ones(16, dtype=torch.int64)
    na, nb = np.zeros(16, dtype=np.int32), np.ones(16, dtype=np.int32)
    for f in (mesh_distance, mesh_collide, hulls_separated):
        for cast in (np.float64, np.float32):
            na_poses, nb_poses = pa.numpy().astype(cast), pb.numpy().astype(cast)
            want = f(lib, ids_a.to(device), ids_b.to(device), torch.from_numpy(na_poses).to(device),
                     torch.from_numpy(nb_poses).to(device))
            got = f(lib, na, nb, na_poses, nb_poses)
            for a, b in zip(_flat(want), _flat(got), strict=True):
                assert b.device == a.device and torch.equal(a.nan_to_num(0.5), b.nan_to_num(0.5)), f.__name__
    points = torch.randn(16, 3, dtype=torch.float64) * 0.05
    want = point_mesh_distance(lib, ids_a.to(device), points.to(device))
    got = point_mesh_distance(lib, na, points.numpy())
    for a, b in zip(_flat(want), _flat(got), strict=True):
        assert torch.equal(a, b)
    with pytest.raises(TypeError, match="poses_a: expected dtype float32 or float64"):
        mesh_distance(lib, na, nb, np.zeros((16, 7), dtype=np.int64), pb.numpy())


def test_well_formed_poses_are_not_copied_nor_read_on_the_cpu(spheres):
    lib = MeshLibrary(spheres)
    pa, pb = random_poses(8, 0.06, seed=1, dtype=torch.float32), random_poses(8, 0.06, seed=2, dtype=torch.float32)
    ids_a, ids_b = torch.zeros(8, dtype=torch.int64), torch.ones(8, dtype=torch.int64)
    lib.bvh  # build outside the recording
    with Seen() as seen:
        mesh_distance(lib, ids_a, ids_b, pa, pb)
        mesh_collide(lib, ids_a, ids_b, pa, pb)
    assert not _COPIES & set(seen.ops) and not _HOST_READS & set(seen.ops), set(seen.ops)

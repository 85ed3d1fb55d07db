"""Argument checks for every op wrapper (and the stepper): one home, one policy.

Each check raises a Python exception that names the argument and says what it expected:
TypeError for a wrong type or dtype, ValueError for a wrong shape, device, layout or value.

Where checks run:

- Metadata (type, dtype, shape, device, contiguity) and scalar arguments are checked here, in
  Python, on every call: that reads no tensor data.
- Tensor values (index ranges, padding rows, finite poses, mesh ids) must be read. On the CPU
  the op's C++ entry checks them in the pass that reads the data anyway (csrc/common/checks.h),
  so the wrappers do not repeat them. On other devices reading values is a host sync, so the
  wrapper checks them here before the launch and the C++ entry does not. Under CUDA graph
  capture (`torch.cuda.is_current_stream_capturing()`) a sync is forbidden, so value checks are
  skipped there, as they are inside `trusted_indices()` (for callers whose indices are valid by
  construction). `values_checked_here` is that rule. Pure-torch functions (no C++ entry) check
  values here on every device, skipped the same way under capture or trust. Inside
  `trusted_inputs()` (a hot loop over tensors contactnet built and checked once) nothing is
  checked at all, in Python or in C++.
- Boundary conversions: an index tensor of any integer dtype or layout is cast / copied to a
  contiguous int64 tensor once (`as_index_tensor`); one that already is passes through with no
  copy, so hot loops that keep int64 indices pay nothing. Float tensors are never converted
  silently (a wrong float dtype or a non-contiguous float tensor is an error), except where a
  wrapper documents it (poses are cast to a MeshLibrary's dtype).
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Sequence

import numpy as np
import torch

from contactnet.geometry.mesh import MeshLibrary
from contactnet.geometry.poses import check_poses

FLOAT_DTYPES = (torch.float32, torch.float64)

_trust = threading.local()


# ---- where value checks run --------------------------------------------------------------------


@contextlib.contextmanager
def trusted_indices():
    """Within this context the wrappers check index tensors' dtype, shape and device but not their
    values: a value check on a GPU reads the tensor on the host (a sync). For callers whose
    indices are valid by construction, such as the stepper's fixed-iteration mode. (On the CPU the
    ops' C++ entries still check values: there it costs no sync.)"""
    before = getattr(_trust, "on", False)
    _trust.on = True
    try:
        yield
    finally:
        _trust.on = before


@contextlib.contextmanager
def trusted_inputs():
    """Within this context the wrappers check nothing: the caller vouches for every argument
    (type, dtype, shape, device, layout, index values) and passes index tensors as contiguous
    int64 already. For hot loops over tensors that contactnet built itself, such as a stepper's
    Newton iterations after it has checked its state once: there the checks' Python is a tenth of
    a small scene's step. The C++ entries skip their value passes too (on the CPU they would read
    every face and edge again, op after op)."""
    before = getattr(_trust, "on", False), getattr(_trust, "inputs", False)
    _trust.on = _trust.inputs = True
    before_cpp = torch.ops.contactnet.trust_index_values(True)
    try:
        yield
    finally:
        _trust.on, _trust.inputs = before
        torch.ops.contactnet.trust_index_values(before_cpp)


def inputs_trusted() -> bool:
    """Whether the caller vouches for every argument (`trusted_inputs`): the wrappers check nothing."""
    return getattr(_trust, "inputs", False)


def capturing(like: torch.Tensor) -> bool:
    """Whether `like`'s device is inside a CUDA graph capture (where a host sync is forbidden)."""
    return like.is_cuda and torch.cuda.is_current_stream_capturing()


def values_checked_here(like: torch.Tensor, checked_in_cpp_on_cpu: bool = True) -> bool:
    """Whether a wrapper checks tensor values in Python (the policy above): not on the CPU when
    the op's C++ entry checks them there, never under graph capture or `trusted_indices()`."""
    if checked_in_cpp_on_cpu and like.device.type == "cpu":
        return False
    return not getattr(_trust, "on", False) and not capturing(like)


# ---- tensors -----------------------------------------------------------------------------------


def _shape_text(shape: Sequence[int | None]) -> str:
    return "(" + ", ".join("N" if s is None else str(s) for s in shape) + (",)" if len(shape) == 1 else ")")


def _has_shape(x: torch.Tensor, shape: Sequence[int | None]) -> bool:
    return x.dim() == len(shape) and all(s is None or x.shape[i] == s for i, s in enumerate(shape))


def check_tensor(x, name: str) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(x).__name__}")


def check_float_tensor(x, name: str, shape: Sequence[int | None]) -> None:
    """Check that `x` is a contiguous float32/float64 tensor of `shape` (None = any size)."""
    if inputs_trusted():
        return
    check_tensor(x, name)
    if x.dtype not in FLOAT_DTYPES:
        raise TypeError(f"{name}: expected dtype float32 or float64, got {x.dtype}")
    if not _has_shape(x, shape):
        raise ValueError(f"{name}: expected shape {_shape_text(shape)}, got {tuple(x.shape)}")
    if not x.is_contiguous():
        raise ValueError(f"{name}: expected a contiguous tensor (call .contiguous() first)")


def check_same_batch(tensors: dict[str, torch.Tensor]) -> None:
    """All tensors share device, dtype and leading (batch) size."""
    if inputs_trusted():
        return
    (first_name, first), *rest = tensors.items()
    for name, x in rest:
        check_same_device(x, name, first, first_name)
        if x.dtype != first.dtype:
            raise TypeError(f"{name} has dtype {x.dtype} but {first_name} has {first.dtype}")
        if x.shape[0] != first.shape[0]:
            raise ValueError(f"{name} has batch size {x.shape[0]} but {first_name} has {first.shape[0]}")


def check_same_device(x: torch.Tensor, name: str, like: torch.Tensor, like_name: str) -> None:
    if inputs_trusted():
        return
    if x.device != like.device:
        raise ValueError(f"{name} is on {x.device} but {like_name} is on {like.device}; expected one device")


def as_index_tensor(x, name: str, shape: Sequence[int | None], device=None) -> torch.Tensor:
    """`x` as a contiguous int64 tensor of `shape` (None = any size): any integer dtype is cast and
    any layout copied, once; an int64 contiguous tensor is returned as is (no copy). With
    `device`, the result is moved there (mesh ids follow their library); otherwise the caller
    checks the device."""
    if inputs_trusted() and device is None:  # a move to another device is work, not a check
        return x
    check_tensor(x, name)
    if x.dtype.is_floating_point or x.dtype.is_complex or x.dtype == torch.bool:
        raise TypeError(f"{name}: expected an integer dtype (int64 preferred), got {x.dtype}")
    if not _has_shape(x, shape):
        raise ValueError(f"{name}: expected shape {_shape_text(shape)}, got {tuple(x.shape)}")
    if x.dtype == torch.int64 and x.is_contiguous() and (device is None or x.device == device):
        return x
    # One copy whatever the source dtype and strides (`.to` keeps the strides of a dense tensor).
    return torch.empty(x.shape, dtype=torch.int64, device=x.device if device is None else device).copy_(x)


def as_float_tensor(x, name: str, width: int, meaning: str, dtype: torch.dtype, device) -> torch.Tensor:
    """(..., width) floats as a tensor of `dtype` on `device`, converted once at a module's
    boundary: a numpy array or a nested sequence becomes a tensor there, the other float dtype is
    cast (the autograd graph kept); a well-formed tensor passes through untouched. Only types and
    shapes are read, never values (no host sync on a GPU)."""
    if type(x) is torch.Tensor and x.dtype == dtype and x.device == device and x.dim() >= 1 and x.shape[-1] == width:
        return x
    if isinstance(x, (np.ndarray, list, tuple)):
        x = torch.as_tensor(np.asarray(x), device=device)
    check_tensor(x, name)
    if x.dtype not in FLOAT_DTYPES:
        raise TypeError(f"{name}: expected dtype float32 or float64, got {x.dtype}")
    if x.dim() < 1 or x.shape[-1] != width:
        raise ValueError(f"{name}: expected shape (..., {width}) {meaning}, got {tuple(x.shape)}")
    if x.device != device:
        raise ValueError(f"{name} is on {x.device} but expected {device}")
    return x.to(dtype)


def as_mask_tensor(x, name: str, n: int, like: torch.Tensor) -> torch.Tensor | None:
    """None, or `x` as a contiguous (n,) bool tensor on `like`'s device (copied only if strided)."""
    if x is None:
        return None
    if not isinstance(x, torch.Tensor) or x.dtype != torch.bool:
        raise TypeError(f"{name}: expected a bool tensor or None")
    if x.shape != (n,):
        raise ValueError(f"{name}: expected shape ({n},), got {tuple(x.shape)}")
    check_same_device(x, name, like, "the vertices")
    return x.contiguous()


def check_index_values(x: torch.Tensor, name: str, bound: int | None) -> None:
    """Indices lie in [0, bound) (bound None: are >= 0). Reads the values: call it where
    `values_checked_here` says so."""
    if not x.numel():
        return
    if bound is None and int(x.min()) < 0:
        raise ValueError(f"{name}: indices must be >= 0")
    if bound is not None and (int(x.min()) < 0 or int(x.max()) >= bound):
        raise ValueError(f"{name}: indices must lie in [0, {bound})")


def check_pair_values(pairs: torch.Tensor, name: str, bounds: tuple[int, int]) -> None:
    """Rows of a (N, 2) pair list: column c in [0, bounds[c]), or the whole row -1 (padding of a
    fixed-capacity list). The same rule, and message, as check_pair_rows in csrc/common/checks.h."""
    if pairs.numel() == 0:
        return
    pad = pairs == -1
    if bool((pad.any(1) != pad.all(1)).any()):
        raise ValueError(f"{name}: a padding row must be -1 in every column")
    for c, bound in enumerate(bounds):
        if int(pairs[:, c].min()) < -1 or int(pairs[:, c].max()) >= bound:
            raise ValueError(f"{name}: column {c} must lie in [0, {bound}) (or the row be -1 padding)")


# ---- IPC meshes and candidates -----------------------------------------------------------------


def ipc_mesh_args(vertices, faces, edges, vertex_body=None, name: str = "vertices"):
    """Checked (faces, edges, vertex_body) of a packed IPC mesh: vertices (V, 3) float; faces
    (F, 3), edges (E, 2) and vertex_body (V,) (optional) integer tensors, returned as contiguous
    int64 on the vertices' device, indices in [0, V) (vertex_body >= 0)."""
    if inputs_trusted():
        return faces, edges, vertex_body
    check_float_tensor(vertices, name, (None, 3))
    n = vertices.shape[0]
    faces = as_index_tensor(faces, "faces", (None, 3))
    edges = as_index_tensor(edges, "edges", (None, 2))
    check_same_device(faces, "faces", vertices, name)
    check_same_device(edges, "edges", vertices, name)
    if vertex_body is not None:
        vertex_body = as_index_tensor(vertex_body, "vertex_body", (n,))
        check_same_device(vertex_body, "vertex_body", vertices, name)
    if values_checked_here(vertices):
        check_index_values(faces, "faces", n)
        check_index_values(edges, "edges", n)
        if vertex_body is not None and vertex_body.numel() and int(vertex_body.min()) < 0:
            raise ValueError("vertex_body: body ids must be >= 0")
    return faces, edges, vertex_body


def ipc_candidate_args(candidates, vertices, faces, edges):
    """Checked (face_vertex, edge_edge) of a Candidates pair: (N, 2) integer tensors as contiguous
    int64 on the vertices' device; face–vertex rows (vertex < V, face < F), edge–edge rows
    (edge < E, edge < E), or rows of -1 (padding)."""
    if inputs_trusted():
        return candidates[0], candidates[1]
    if not isinstance(candidates, tuple) or len(candidates) != 2:
        raise TypeError("candidates: expected a Candidates (face_vertex, edge_edge) pair")
    fv = as_index_tensor(candidates[0], "candidates.face_vertex", (None, 2))
    ee = as_index_tensor(candidates[1], "candidates.edge_edge", (None, 2))
    check_same_device(fv, "candidates.face_vertex", vertices, "the vertices")
    check_same_device(ee, "candidates.edge_edge", vertices, "the vertices")
    if values_checked_here(vertices):
        check_pair_values(fv, "candidates.face_vertex", (vertices.shape[0], faces.shape[0]))
        check_pair_values(ee, "candidates.edge_edge", (edges.shape[0], edges.shape[0]))
    return fv, ee


# ---- mesh queries ------------------------------------------------------------------------------


def mesh_ids(ids, name: str, device) -> torch.Tensor:
    """(Q,) mesh ids from an int, a sequence or an integer tensor, as contiguous int64 on `device`."""
    if isinstance(ids, int):
        ids = [ids]
    if not isinstance(ids, torch.Tensor):
        ids = torch.as_tensor(ids)
    return as_index_tensor(ids, name, (None,), device)


def float_rows(x, name: str, q: int, width: int, meaning: str, batch_name: str, dtype, device) -> torch.Tensor:
    """(q, width) float rows as a contiguous tensor of the library's `dtype` on its `device`: the
    other float dtype is cast once; a well-formed tensor passes through with no copy. `meaning`
    describes a row in the shape error; `batch_name` is the argument that fixed q. A numpy array
    (what users' poses and points often are) is taken as a tensor on `device` first."""
    if isinstance(x, np.ndarray):
        x = torch.as_tensor(x, device=device)
    if not (type(x) is torch.Tensor and x.dtype == dtype and x.device == device and x.shape == (q, width)):
        check_tensor(x, name)
        if x.dim() == 2 and x.shape[0] != q:
            raise ValueError(f"{name} has batch size {x.shape[0]} but {batch_name} has {q}")
        if x.dim() != 2 or x.shape[1] != width:
            raise ValueError(f"{name}: expected shape (Q, {width}) {meaning}, got {tuple(x.shape)}")
        if x.dtype not in FLOAT_DTYPES:
            raise TypeError(f"{name}: expected dtype float32 or float64, got {x.dtype}")
        if x.device != device:
            raise ValueError(f"{name} is on {x.device} but the library is on {device}")
        x = x.to(dtype)
    return x.contiguous()


def query_poses(poses, name: str, q: int, dtype: torch.dtype, device) -> torch.Tensor:
    """(Q, 7) poses as a contiguous tensor of the library's dtype on its device: a pose batch of
    the other float dtype is cast once (float64 into a float32 library rounds to float32, as the
    library's vertices are); a well-formed batch passes through with no copy."""
    p = float_rows(poses, name, q, 7, "[x, y, z, qw, qx, qy, qz]", "ids_a", dtype, device)
    if values_checked_here(p):
        check_poses(p, name)
    return p


def mesh_query_args(lib, ids_a, ids_b, poses_a, poses_b):
    """Checked (ids_a, ids_b, poses_a, poses_b) of Q mesh-pair queries on a MeshLibrary `lib`."""
    if not isinstance(lib, MeshLibrary):
        raise TypeError(f"lib: expected a contactnet.geometry.MeshLibrary, got {type(lib).__name__}")
    return pair_query_args(len(lib), lib.device, lib.dtype, ids_a, ids_b, poses_a, poses_b)


def pair_query_args(num_meshes: int, device, dtype, ids_a, ids_b, poses_a, poses_b):
    """`mesh_query_args` for any packed set of `num_meshes` meshes on `device`, the poses cast to
    `dtype` (a library's, or float64 for its convex hulls)."""
    ids_a = mesh_ids(ids_a, "ids_a", device)
    ids_b = mesh_ids(ids_b, "ids_b", device)
    q = ids_a.shape[0]
    if ids_b.shape[0] != q:
        raise ValueError(f"ids_b has batch size {ids_b.shape[0]} but ids_a has {q}")
    poses_a = query_poses(poses_a, "poses_a", q, dtype, device)
    poses_b = query_poses(poses_b, "poses_b", q, dtype, device)
    if q and values_checked_here(ids_a):
        m = num_meshes
        for name, ids in (("ids_a", ids_a), ("ids_b", ids_b)):
            if int(ids.min()) < 0 or int(ids.max()) >= m:
                raise ValueError(f"{name}: mesh ids must lie in [0, {m}), got [{int(ids.min())}, {int(ids.max())}]")
    return ids_a, ids_b, poses_a, poses_b


def point_query_args(lib, ids, points, max_distance):
    """Checked (ids, points, max_distance) of Q point–mesh queries on a MeshLibrary `lib`: ids (Q,)
    integer mesh ids in [0, M) or -1 (padding) as contiguous int64; points (Q, 3) float, cast to the
    library's dtype like poses (no copy when it already matches); max_distance None or math.inf (no
    cut-off), a finite number > 0 or a (Q,) tensor of values > 0 (+inf allowed), as a contiguous (Q,)
    tensor like the points."""
    if not isinstance(lib, MeshLibrary):
        raise TypeError(f"lib: expected a contactnet.geometry.MeshLibrary, got {type(lib).__name__}")
    device, dtype = lib.device, lib.dtype
    ids = mesh_ids(ids, "ids", device)
    q = ids.shape[0]
    p = float_rows(points, "points", q, 3, "in the meshes' frames", "ids", dtype, device)
    if max_distance is None or (type(max_distance) in (int, float) and max_distance == math.inf):
        bound = p.new_full((q,), math.inf)
    elif isinstance(max_distance, torch.Tensor):
        bound = max_distance.to(dtype=dtype)
        if bound.dim() == 0:
            bound = bound.expand(q)
        if bound.shape != (q,):
            raise ValueError(f"max_distance: expected a number or a (Q,) = ({q},) tensor, got shape "
                             f"{tuple(bound.shape)}")
        check_same_device(bound, "max_distance", p, "points")
        bound = bound.contiguous()
        if values_checked_here(bound) and not bool((bound > 0).all()):
            raise ValueError("max_distance: expected values > 0 (+inf for no cut-off)")
    else:
        check_number(max_distance, "max_distance", 0.0)  # finite, > 0
        bound = p.new_full((q,), float(max_distance))
    if q and values_checked_here(ids):
        m = len(lib)
        if int(ids.min()) < -1 or int(ids.max()) >= m:
            raise ValueError(f"ids: mesh ids must lie in [0, {m}) (or be -1 padding), got "
                             f"[{int(ids.min())}, {int(ids.max())}]")
    return ids, p, bound


def boundary_layer_widths(r, name: str, q: int, like: torch.Tensor) -> torch.Tensor:
    """A float or a (Q,) tensor of widths >= 0 (metres), as a contiguous (Q,) tensor like `like`."""
    if isinstance(r, (int, float)) and not isinstance(r, bool):
        return like.new_full((q,), check_positive(r, name, allow_zero=True))
    r = torch.as_tensor(r, dtype=like.dtype, device=like.device)
    if r.dim() == 0:
        r = r.expand(q)
    if r.shape != (q,):
        raise ValueError(f"{name}: expected a float or a (Q,) = ({q},) tensor, got shape {tuple(r.shape)}")
    r = r.contiguous()
    if values_checked_here(r) and (not bool(torch.isfinite(r).all()) or bool((r < 0).any())):
        raise ValueError(f"{name}: boundary-layer widths must be finite and >= 0")
    return r


# ---- scalars -----------------------------------------------------------------------------------


def check_positive(value, name: str, allow_zero: bool = False) -> float:
    """A finite real number > 0 (>= 0 with allow_zero), as a float."""
    if inputs_trusted():
        return float(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name}: expected a number, got {type(value).__name__}")
    value = float(value)
    if not (value >= 0 if allow_zero else value > 0) or not math.isfinite(value):
        raise ValueError(f"{name}: expected a finite value {'>= 0' if allow_zero else '> 0'}, got {value}")
    return value


def check_int(value, name: str, minimum: int) -> int:
    """A Python int (not a bool) >= minimum."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name}: expected an int >= {minimum}, got {value!r}")
    return value


def check_number(value, name: str, minimum: float = 0.0, inclusive: bool = False, allow_none: bool = False):
    """A finite number (any real scalar, numpy's and 0-d tensors included) > minimum (>= with
    inclusive), or None with allow_none; ValueError otherwise."""
    if value is None and allow_none:
        return
    try:
        ok = bool(value >= minimum if inclusive else value > minimum) and bool(value < float("inf"))
    except (TypeError, ValueError, RuntimeError):
        ok = False
    if not ok:
        bound = f"{'>=' if inclusive else '>'} {minimum:g}"
        raise ValueError(f"{name}: expected a finite number {bound}{' or None' if allow_none else ''}, got {value!r}")


def check_count(value, name: str, allow_none: bool = False):
    """A Python int > 0, or None with allow_none."""
    if not ((value is None and allow_none) or (isinstance(value, int) and value > 0)):
        raise ValueError(f"{name}: expected a positive int{' or None' if allow_none else ''}, got {value!r}")


def check_choice(value, name: str, choices: Sequence) -> None:
    if value not in choices:
        raise ValueError(f"{name}: expected one of {', '.join(map(repr, choices))}, got {value!r}")

"""IPC barrier kernels: squared distances with derivatives, the log barrier, collision candidates,
the barrier potential with gradient and (PSD-projected) Hessian, the chain rule to rigid / affine
body DOFs, and conservative CCD. C++ on CPU, CUDA on GPU, float32 or float64.

Conventions (the same as IPC Toolkit 1.6.1, against which the tests compare):

- "Distance" in this module means the SQUARED Euclidean distance d². ``dhat`` arguments are the
  unsquared activation distance d̂ in metres.
- Barrier: b(x, x̂) = -(x - x̂)² ln(x / x̂) for 0 < x < x̂, else 0, applied to x = d², x̂ = d̂²
  (IPC Toolkit's ``barrier(d², d̂²)``, ``BarrierPotential(dhat, stiffness)``). x ≤ 0 (touching or
  penetrating) gives b = +inf, b' = -inf, b'' = +inf: the configuration is infeasible.
- Potential: B(x) = κ Σ_k m_k(x) b(d_k²(x), d̂²) over candidates k, with m_k the edge–edge
  mollifier (1 for face–vertex candidates). κ multiplies the energy, gradient and Hessian.
- Stencils: a face–vertex candidate (vertex, face) acts on (p, t0, t1, t2); an edge–edge
  candidate (edge_a, edge_b) on (ea0, ea1, eb0, eb1). Per-candidate gradients are (N, 12) and
  Hessians (N, 12, 12) on those 4 vertices × 3 coordinates; face–vertex candidates come first.
- Padding: a candidate row of -1 (from the fixed-capacity `*_candidates_padded` searches, which
  never read back to the host) contributes 0 to every potential, gradient and Hessian and has no
  impact (tmax) in CCD; `candidate_stencils` gives it the last face's / edge's vertices, which
  receive those zeros harmlessly.
- Assembled derivatives use DOF 3·v + c (vertex-major, the flattening of a (V, 3) tensor); the
  assembled Hessian is a coalesced sparse COO tensor of shape (3V, 3V).
"""

from __future__ import annotations

import contextlib
import threading
from typing import NamedTuple

import torch

from contactnet._extension import load_extension
from contactnet.ops._checks import check_float_tensor, check_same_batch

load_extension()

_ops = torch.ops.contactnet

__all__ = [
    "BarrierHessian",
    "BodyDerivatives",
    "Candidates",
    "PaddedCandidates",
    "affine_jacobian",
    "barrier",
    "barrier_potential",
    "barrier_potential_gradient",
    "barrier_potential_hessian",
    "body_gradient_hessian",
    "candidate_stencils",
    "ccd_time_of_impact",
    "collision_candidates",
    "collision_candidates_padded",
    "collision_free_step",
    "edge_edge_distance_squared",
    "edge_edge_distance_squared_gradient",
    "edge_edge_distance_squared_hessian",
    "edge_edge_mollifier",
    "edge_edge_mollifier_gradient",
    "edge_edge_mollifier_hessian",
    "edge_edge_mollifier_threshold",
    "friction_potential",
    "friction_potential_gradient",
    "friction_potential_hessian",
    "mesh_edges",
    "point_edge_distance_squared",
    "point_edge_distance_squared_gradient",
    "point_edge_distance_squared_hessian",
    "point_point_distance_squared",
    "point_point_distance_squared_gradient",
    "point_point_distance_squared_hessian",
    "point_triangle_distance_squared",
    "point_triangle_distance_squared_gradient",
    "point_triangle_distance_squared_hessian",
    "rigid_jacobian",
    "swept_candidates",
    "swept_candidates_padded",
    "trusted_indices",
]


class Candidates(NamedTuple):
    """Collision candidates of one packed mesh."""

    face_vertex: torch.Tensor  # (Nfv, 2) int64: vertex, face
    edge_edge: torch.Tensor  # (Nee, 2) int64: edge_a < edge_b

    @property
    def count(self) -> int:
        return self.face_vertex.shape[0] + self.edge_edge.shape[0]


class PaddedCandidates(NamedTuple):
    """Fixed-capacity candidates: `candidates` has `capacity` rows of each kind, the rows past the
    pairs found are -1 (padding: every op here gives them no contribution, or no impact for CCD).
    counts: (2,) int64 face–vertex and edge–edge pairs found; more than `capacity` means some were
    dropped (see `overflow`)."""

    candidates: Candidates
    counts: torch.Tensor

    @property
    def overflow(self) -> torch.Tensor:
        """0-dim bool tensor: some pairs did not fit (read it outside any captured region)."""
        return (self.counts > self.candidates.face_vertex.shape[0]).any()


class BarrierHessian(NamedTuple):
    local: torch.Tensor  # (N, 12, 12) per-candidate Hessian on its stencil
    stencils: torch.Tensor  # (N, 4) int64 vertex ids of each stencil
    matrix: torch.Tensor | None  # (3V, 3V) sparse COO, coalesced; None when assemble=False


class BodyDerivatives(NamedTuple):
    gradient: torch.Tensor  # (B, K) per-body gradient
    local: torch.Tensor  # (N, 4K, 4K) per-candidate Hessian on its 4 stencil vertices' body DOFs
    stencil_bodies: torch.Tensor  # (N, 4) int64 body of each stencil vertex
    matrix: torch.Tensor  # (B·K, B·K) sparse COO, coalesced; DOF K·body + j


# ---- argument checks ---------------------------------------------------------------------------

_trust = threading.local()


@contextlib.contextmanager
def trusted_indices():
    """Within this context the wrappers check index tensors' dtype, shape and device but not their
    values: a value check reads the tensor on the host (a sync, which a CUDA graph capture
    forbids). For callers whose indices are valid by construction, such as the stepper's
    fixed-iteration mode."""
    before = getattr(_trust, "on", False)
    _trust.on = True
    try:
        yield
    finally:
        _trust.on = before


def _check_index_tensor(x, name: str, cols: int | None, bound: int, padded: bool = False) -> None:
    """padded: rows of -1 (fixed-capacity padding) are allowed."""
    _check_index_layout(x, name, cols)
    if x.numel() == 0 or getattr(_trust, "on", False):
        return
    low = -1 if padded else 0
    if int(x.min()) < low or int(x.max()) >= bound:
        raise ValueError(f"{name}: indices must lie in [0, {bound})" + (" (or be -1 padding)" if padded else ""))
    if padded and x.dim() == 2 and bool(((x == -1).any(1) != (x == -1).all(1)).any()):
        raise ValueError(f"{name}: a padding row must be -1 in every column")


def _check_index_layout(x, name: str, cols: int | None) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(x).__name__}")
    if x.dtype != torch.int64:
        raise TypeError(f"{name}: expected dtype int64, got {x.dtype}")
    shape = "(N,)" if cols is None else f"(N, {cols})"
    if (cols is None and x.dim() != 1) or (cols is not None and (x.dim() != 2 or x.shape[1] != cols)):
        raise ValueError(f"{name}: expected shape {shape}, got {tuple(x.shape)}")
    if not x.is_contiguous():
        raise ValueError(f"{name}: expected a contiguous tensor (call .contiguous() first)")


def _check_positive(value, name: str, allow_zero: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name}: expected a number, got {type(value).__name__}")
    value = float(value)
    if not (value >= 0 if allow_zero else value > 0) or value != value or value == float("inf"):
        raise ValueError(f"{name}: expected a finite value {'>= 0' if allow_zero else '> 0'}, got {value}")
    return value


def _check_mesh(vertices, faces, edges, vertex_body=None, name="vertices") -> None:
    check_float_tensor(vertices, name, (None, 3))
    n = vertices.shape[0]
    _check_index_tensor(faces, "faces", 3, n)
    _check_index_tensor(edges, "edges", 2, n)
    for t, tname in ((faces, "faces"), (edges, "edges")):
        if t.device != vertices.device:
            raise ValueError(f"{tname} is on {t.device} but {name} is on {vertices.device}")
    if vertex_body is not None:
        _check_index_tensor(vertex_body, "vertex_body", None, 2**62)
        if vertex_body.shape[0] != n:
            raise ValueError(f"vertex_body: expected shape ({n},), got {tuple(vertex_body.shape)}")
        if vertex_body.device != vertices.device:
            raise ValueError(f"vertex_body is on {vertex_body.device} but {name} is on {vertices.device}")


def _check_candidates(candidates, vertices, faces, edges) -> Candidates:
    if not isinstance(candidates, tuple) or len(candidates) != 2:
        raise TypeError("candidates: expected a Candidates (face_vertex, edge_edge) pair")
    fv, ee = candidates
    _check_index_tensor(fv, "candidates.face_vertex", 2, 2**62, padded=True)
    _check_index_tensor(ee, "candidates.edge_edge", 2, max(edges.shape[0], 0), padded=True)
    if fv.numel():
        _check_index_tensor(fv[:, 0].contiguous(), "candidates.face_vertex[:, 0]", None, vertices.shape[0], True)
        _check_index_tensor(fv[:, 1].contiguous(), "candidates.face_vertex[:, 1]", None, faces.shape[0], True)
    return Candidates(fv, ee)


# ---- meshes ------------------------------------------------------------------------------------


def mesh_edges(faces: torch.Tensor) -> torch.Tensor:
    """Unique undirected edges (E, 2) int64 of a triangle mesh, each as (smaller id, larger id),
    sorted lexicographically."""
    _check_index_tensor(faces, "faces", 3, 2**62)
    e = torch.cat([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]], dim=0)
    e = torch.sort(e, dim=1).values
    return torch.unique(e, dim=0).contiguous()


def candidate_stencils(faces: torch.Tensor, edges: torch.Tensor, candidates: Candidates) -> torch.Tensor:
    """(N, 4) int64 vertex ids of each candidate's stencil: (p, t0, t1, t2) for face–vertex,
    (ea0, ea1, eb0, eb1) for edge–edge; face–vertex candidates first."""
    fv, ee = candidates
    a = torch.cat([fv[:, :1], faces[fv[:, 1]]], dim=1)
    b = torch.cat([edges[ee[:, 0]], edges[ee[:, 1]]], dim=1)
    return torch.cat([a, b], dim=0)


# ---- distances ---------------------------------------------------------------------------------


def _distance_args(names, tensors):
    for n, t in zip(names, tensors):
        check_float_tensor(t, n, (None, 3))
    check_same_batch(dict(zip(names, tensors)))


def point_point_distance_squared(p, q):
    """|p - q|². p, q: (N, 3) -> (N,)."""
    _distance_args(("p", "q"), (p, q))
    return _ops.ipc_point_point_distance(p, q)


def point_point_distance_squared_gradient(p, q):
    """(N, 6) gradient on (p, q)."""
    _distance_args(("p", "q"), (p, q))
    return _ops.ipc_point_point_distance_gradient(p, q)


def point_point_distance_squared_hessian(p, q):
    """(N, 6, 6) Hessian on (p, q)."""
    _distance_args(("p", "q"), (p, q))
    return _ops.ipc_point_point_distance_hessian(p, q)


def point_edge_distance_squared(p, e0, e1):
    """Squared distance from points to segments (closest feature chosen first). (N, 3) each -> (N,)."""
    _distance_args(("p", "e0", "e1"), (p, e0, e1))
    return _ops.ipc_point_edge_distance(p, e0, e1)


def point_edge_distance_squared_gradient(p, e0, e1):
    """(N, 9) gradient on (p, e0, e1)."""
    _distance_args(("p", "e0", "e1"), (p, e0, e1))
    return _ops.ipc_point_edge_distance_gradient(p, e0, e1)


def point_edge_distance_squared_hessian(p, e0, e1):
    """(N, 9, 9) Hessian on (p, e0, e1)."""
    _distance_args(("p", "e0", "e1"), (p, e0, e1))
    return _ops.ipc_point_edge_distance_hessian(p, e0, e1)


def point_triangle_distance_squared(p, t0, t1, t2):
    """Squared point–triangle distance (closest feature chosen first). (N, 3) each -> (N,)."""
    _distance_args(("p", "t0", "t1", "t2"), (p, t0, t1, t2))
    return _ops.ipc_point_triangle_distance(p, t0, t1, t2)


def point_triangle_distance_squared_gradient(p, t0, t1, t2):
    """(N, 12) gradient on (p, t0, t1, t2)."""
    _distance_args(("p", "t0", "t1", "t2"), (p, t0, t1, t2))
    return _ops.ipc_point_triangle_distance_gradient(p, t0, t1, t2)


def point_triangle_distance_squared_hessian(p, t0, t1, t2):
    """(N, 12, 12) Hessian on (p, t0, t1, t2)."""
    _distance_args(("p", "t0", "t1", "t2"), (p, t0, t1, t2))
    return _ops.ipc_point_triangle_distance_hessian(p, t0, t1, t2)


def edge_edge_distance_squared(ea0, ea1, eb0, eb1):
    """Squared segment–segment distance (closest feature chosen first; nearly parallel edges use
    their end-point features). (N, 3) each -> (N,)."""
    _distance_args(("ea0", "ea1", "eb0", "eb1"), (ea0, ea1, eb0, eb1))
    return _ops.ipc_edge_edge_distance(ea0, ea1, eb0, eb1)


def edge_edge_distance_squared_gradient(ea0, ea1, eb0, eb1):
    """(N, 12) gradient on (ea0, ea1, eb0, eb1)."""
    _distance_args(("ea0", "ea1", "eb0", "eb1"), (ea0, ea1, eb0, eb1))
    return _ops.ipc_edge_edge_distance_gradient(ea0, ea1, eb0, eb1)


def edge_edge_distance_squared_hessian(ea0, ea1, eb0, eb1):
    """(N, 12, 12) Hessian on (ea0, ea1, eb0, eb1)."""
    _distance_args(("ea0", "ea1", "eb0", "eb1"), (ea0, ea1, eb0, eb1))
    return _ops.ipc_edge_edge_distance_hessian(ea0, ea1, eb0, eb1)


def edge_edge_mollifier_threshold(ea0_rest, ea1_rest, eb0_rest, eb1_rest):
    """ε_x = 1e-3 |ea1 - ea0|² |eb1 - eb0|² at rest, (N,)."""
    _distance_args(("ea0_rest", "ea1_rest", "eb0_rest", "eb1_rest"), (ea0_rest, ea1_rest, eb0_rest, eb1_rest))
    return 1e-3 * ((ea1_rest - ea0_rest) ** 2).sum(-1) * ((eb1_rest - eb0_rest) ** 2).sum(-1)


def _mollifier_args(ea0, ea1, eb0, eb1, eps_x):
    _distance_args(("ea0", "ea1", "eb0", "eb1"), (ea0, ea1, eb0, eb1))
    check_float_tensor(eps_x, "eps_x", (None,))
    check_same_batch({"ea0": ea0, "eps_x": eps_x})


def edge_edge_mollifier(ea0, ea1, eb0, eb1, eps_x):
    """m(x) = (2 - x/ε) x/ε for x = |(ea1 - ea0) × (eb1 - eb0)|² < ε, else 1. eps_x: (N,) -> (N,)."""
    _mollifier_args(ea0, ea1, eb0, eb1, eps_x)
    return _ops.ipc_edge_edge_mollifier(ea0, ea1, eb0, eb1, eps_x)


def edge_edge_mollifier_gradient(ea0, ea1, eb0, eb1, eps_x):
    """(N, 12) gradient of the mollifier on (ea0, ea1, eb0, eb1), ε_x held fixed."""
    _mollifier_args(ea0, ea1, eb0, eb1, eps_x)
    return _ops.ipc_edge_edge_mollifier_gradient(ea0, ea1, eb0, eb1, eps_x)


def edge_edge_mollifier_hessian(ea0, ea1, eb0, eb1, eps_x):
    """(N, 12, 12) Hessian of the mollifier, ε_x held fixed."""
    _mollifier_args(ea0, ea1, eb0, eb1, eps_x)
    return _ops.ipc_edge_edge_mollifier_hessian(ea0, ea1, eb0, eb1, eps_x)


# ---- barrier -----------------------------------------------------------------------------------


class BarrierValues(NamedTuple):
    value: torch.Tensor  # b(d², d̂²)
    first: torch.Tensor  # ∂b/∂(d²)
    second: torch.Tensor  # ∂²b/∂(d²)²


def barrier(d2: torch.Tensor, dhat: float) -> BarrierValues:
    """The IPC log barrier on squared distances: b(d², d̂²) = -(d² - d̂²)² ln(d²/d̂²) for
    0 < d² < d̂², 0 beyond, with its first and second derivatives with respect to d².

    d2: (N,) float squared distances (m²); dhat: activation distance (m), > 0.
    d2 ≤ 0 means contact or penetration: value +inf, first -inf, second +inf (never an error, so
    a line search can reject the step).
    """
    check_float_tensor(d2, "d2", (None,))
    dhat = _check_positive(dhat, "dhat")
    return BarrierValues(*_ops.ipc_barrier(d2, dhat))


# ---- candidates --------------------------------------------------------------------------------


def collision_candidates(vertices, faces, edges, dhat: float, vertex_body=None) -> Candidates:
    """All face–vertex and edge–edge pairs closer than dhat (squared distance < dhat²).

    vertices: (V, 3) float, metres; faces: (F, 3) int64; edges: (E, 2) int64 (see mesh_edges);
    vertex_body: optional (V,) int64 body / mesh id per vertex: pairs within one body are skipped
    (rigid bodies do not self-collide); without it, every pair of the packed mesh is considered.
    Pairs sharing a vertex are always skipped. A primitive belongs to its first vertex's body.

    Broad phase: primitive boxes grown by dhat/2 on a uniform grid (cell ≈ the mean face / edge
    box size, so flat sheets cost no more than compact meshes), then the exact squared distance
    (same code as the potential) filters the pairs.
    Face–vertex pairs are listed as (vertex, face), edge–edge pairs as (edge_a < edge_b).
    """
    _check_mesh(vertices, faces, edges, vertex_body)
    dhat = _check_positive(dhat, "dhat")
    return Candidates(*_ops.ipc_collision_candidates(vertices, faces, edges, vertex_body, dhat))


def swept_candidates(vertices_t0, vertices_t1, faces, edges, min_distance: float = 0.0, vertex_body=None) -> Candidates:
    """Face–vertex and edge–edge pairs whose boxes around both positions (grown by
    min_distance/2) overlap: the CCD broad phase for linear trajectories."""
    _check_mesh(vertices_t0, faces, edges, vertex_body, "vertices_t0")
    check_float_tensor(vertices_t1, "vertices_t1", (None, 3))
    check_same_batch({"vertices_t0": vertices_t0, "vertices_t1": vertices_t1})
    min_distance = _check_positive(min_distance, "min_distance", allow_zero=True)
    return Candidates(
        *_ops.ipc_swept_candidates(vertices_t0, vertices_t1, faces, edges, vertex_body, min_distance)
    )


def _check_active(vertices, faces, edges, vertex_active, face_active, edge_active) -> None:
    for mask, name, n in ((vertex_active, "vertex_active", vertices.shape[0]),
                          (face_active, "face_active", faces.shape[0]), (edge_active, "edge_active", edges.shape[0])):
        if mask is None:
            continue
        if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
            raise TypeError(f"{name}: expected a bool tensor or None")
        if mask.shape != (n,):
            raise ValueError(f"{name}: expected shape ({n},), got {tuple(mask.shape)}")
        if mask.device != vertices.device:
            raise ValueError(f"{name} is on {mask.device} but the vertices are on {vertices.device}")
        if not mask.is_contiguous():
            raise ValueError(f"{name}: expected a contiguous tensor (call .contiguous() first)")


def _check_capacity(capacity) -> int:
    if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 0:
        raise ValueError(f"capacity: expected an int >= 0, got {capacity!r}")
    return capacity


def collision_candidates_padded(vertices, faces, edges, dhat: float, capacity: int, vertex_body=None,
                                vertex_active=None, face_active=None, edge_active=None) -> PaddedCandidates:
    """`collision_candidates` with a fixed number of rows and no host sync (CUDA-graph capturable):
    `capacity` rows of face–vertex and `capacity` rows of edge–edge pairs, -1 past the pairs found
    (in sweep order, not sorted), and the (2,) counts found, which exceed `capacity` when pairs
    were dropped (`PaddedCandidates.overflow`). vertex_active (V,), face_active (F,), edge_active
    (E,): optional bool masks; an inactive primitive takes part in no pair (cheaper than
    compacting the mesh, which needs data-dependent shapes)."""
    _check_mesh(vertices, faces, edges, vertex_body)
    dhat = _check_positive(dhat, "dhat")
    capacity = _check_capacity(capacity)
    _check_active(vertices, faces, edges, vertex_active, face_active, edge_active)
    fv, ee, counts = _ops.ipc_collision_candidates_padded(vertices, faces, edges, vertex_body, dhat, capacity,
                                                          vertex_active, face_active, edge_active)
    return PaddedCandidates(Candidates(fv, ee), counts)


def swept_candidates_padded(vertices_t0, vertices_t1, faces, edges, capacity: int, min_distance: float = 0.0,
                            vertex_body=None, vertex_active=None, face_active=None,
                            edge_active=None) -> PaddedCandidates:
    """`swept_candidates` with a fixed number of rows (see `collision_candidates_padded`)."""
    _check_mesh(vertices_t0, faces, edges, vertex_body, "vertices_t0")
    check_float_tensor(vertices_t1, "vertices_t1", (None, 3))
    check_same_batch({"vertices_t0": vertices_t0, "vertices_t1": vertices_t1})
    min_distance = _check_positive(min_distance, "min_distance", allow_zero=True)
    capacity = _check_capacity(capacity)
    _check_active(vertices_t0, faces, edges, vertex_active, face_active, edge_active)
    fv, ee, counts = _ops.ipc_swept_candidates_padded(vertices_t0, vertices_t1, faces, edges, vertex_body,
                                                      min_distance, capacity, vertex_active, face_active, edge_active)
    return PaddedCandidates(Candidates(fv, ee), counts)


# ---- barrier potential -------------------------------------------------------------------------


def _potential_args(vertices, faces, edges, candidates, dhat, kappa, rest_vertices):
    _check_mesh(vertices, faces, edges)
    candidates = _check_candidates(candidates, vertices, faces, edges)
    dhat = _check_positive(dhat, "dhat")
    kappa = _check_positive(kappa, "kappa", allow_zero=True)
    if rest_vertices is None:
        rest_vertices = vertices.detach()
    else:
        check_float_tensor(rest_vertices, "rest_vertices", (None, 3))
        check_same_batch({"vertices": vertices, "rest_vertices": rest_vertices})
    return candidates, dhat, kappa, rest_vertices


def _scatter_vertices(local: torch.Tensor, stencils: torch.Tensor, num_vertices: int) -> torch.Tensor:
    out = local.new_zeros((num_vertices, 3))
    return out.index_add_(0, stencils.reshape(-1), local.reshape(-1, 3))


def barrier_potential(vertices, faces, edges, candidates: Candidates, dhat: float, kappa: float = 1.0,
                      rest_vertices=None, per_candidate: bool = False) -> torch.Tensor:
    """B = κ Σ_k m_k b(d_k², d̂²): a 0-dim tensor, differentiable (twice) in `vertices`.

    vertices: (V, 3) float; candidates from collision_candidates (pairs beyond dhat add 0).
    rest_vertices: (V, 3) positions defining the edge–edge mollifier thresholds
    ε_x = 1e-3 |ea|²|eb|², held constant (no derivative flows through them). Default: the current
    vertices, detached; when differentiating numerically (finite differences, gradcheck) pass fixed
    rest positions, or the thresholds move with the perturbation. Intersecting candidates give +inf.
    With per_candidate=True, the (N,) terms instead of their sum.
    """
    candidates, dhat, kappa, rest = _potential_args(vertices, faces, edges, candidates, dhat, kappa, rest_vertices)
    fv, ee = candidates
    terms = _ops.ipc_barrier_potential(vertices, rest, faces, edges, fv, ee, dhat, kappa)
    return terms if per_candidate else terms.sum()


def barrier_potential_gradient(vertices, faces, edges, candidates: Candidates, dhat: float, kappa: float = 1.0,
                               rest_vertices=None, per_candidate: bool = False):
    """∇B per vertex, (V, 3); with per_candidate=True, the (N, 12) stencil gradients instead."""
    candidates, dhat, kappa, rest = _potential_args(vertices, faces, edges, candidates, dhat, kappa, rest_vertices)
    fv, ee = candidates
    local = _ops.ipc_barrier_potential_gradient(vertices, rest, faces, edges, fv, ee, dhat, kappa)
    if per_candidate:
        return local
    return _scatter_vertices(local, candidate_stencils(faces, edges, candidates), vertices.shape[0])


def assemble_hessian(local: torch.Tensor, stencils: torch.Tensor, num_vertices: int) -> torch.Tensor:
    """Sum (N, 12, 12) stencil blocks into a coalesced sparse COO (3V, 3V) matrix, DOF 3·v + c."""
    n = local.shape[0]
    size = 3 * num_vertices
    if local.device.type == "cpu":
        # C++ row-by-row gather: the entries come out coalesced, no sort.
        index, values = _ops.ipc_assemble_hessian(local, stencils, num_vertices)
        return torch.sparse_coo_tensor(index, values, (size, size), check_invariants=False, is_coalesced=True)
    # Merge the 16 vertex–vertex 3×3 blocks of every stencil first (16 keys per candidate rather
    # than 144 entries), so the sort that coalescing needs runs on the merged blocks only.
    blocks = local.reshape(n, 4, 3, 4, 3).permute(0, 1, 3, 2, 4).reshape(n * 16, 3, 3)
    vi = stencils[:, :, None].expand(n, 4, 4).reshape(-1)
    vj = stencils[:, None, :].expand(n, 4, 4).reshape(-1)
    keys, inverse = torch.unique(vi * num_vertices + vj, return_inverse=True)
    merged = local.new_zeros(keys.shape[0], 3, 3).index_add_(0, inverse, blocks)
    c = torch.arange(3, device=stencils.device)
    rows = (3 * (keys // num_vertices))[:, None, None] + c[None, :, None]
    cols = (3 * (keys % num_vertices))[:, None, None] + c[None, None, :]
    index = torch.stack([rows.expand_as(merged).reshape(-1), cols.expand_as(merged).reshape(-1)])
    return torch.sparse_coo_tensor(index, merged.reshape(-1), (size, size), check_invariants=False).coalesce()


def barrier_potential_hessian(vertices, faces, edges, candidates: Candidates, dhat: float, kappa: float = 1.0,
                              rest_vertices=None, project_to_psd: bool = True,
                              assemble: bool = True) -> BarrierHessian:
    """∇²B: per-candidate (N, 12, 12) blocks (each projected onto the PSD cone by clamping its
    negative eigenvalues when project_to_psd, as IPC Toolkit's PSDProjectionMethod.CLAMP), their
    stencils, and (when assemble) the coalesced sparse (3V, 3V) sum."""
    candidates, dhat, kappa, rest = _potential_args(vertices, faces, edges, candidates, dhat, kappa, rest_vertices)
    fv, ee = candidates
    local = _ops.ipc_barrier_potential_hessian(vertices, rest, faces, edges, fv, ee, dhat, kappa,
                                               bool(project_to_psd))
    stencils = candidate_stencils(faces, edges, candidates)
    matrix = assemble_hessian(local, stencils, vertices.shape[0]) if assemble else None
    return BarrierHessian(local, stencils, matrix)


# ---- friction ----------------------------------------------------------------------------------


def _friction_args(velocities, lagged_vertices, faces, edges, candidates, dhat, kappa, mu, eps_v, rest_vertices):
    _check_mesh(lagged_vertices, faces, edges, None, "lagged_vertices")
    check_float_tensor(velocities, "velocities", (None, 3))
    check_same_batch({"velocities": velocities, "lagged_vertices": lagged_vertices})
    candidates = _check_candidates(candidates, lagged_vertices, faces, edges)
    dhat = _check_positive(dhat, "dhat")
    kappa = _check_positive(kappa, "kappa", allow_zero=True)
    mu = _check_positive(mu, "mu", allow_zero=True)
    eps_v = _check_positive(eps_v, "eps_v")
    if rest_vertices is None:
        rest_vertices = lagged_vertices
    check_float_tensor(rest_vertices, "rest_vertices", (None, 3))
    check_same_batch({"velocities": velocities, "rest_vertices": rest_vertices})
    return candidates, dhat, kappa, mu, eps_v, lagged_vertices.detach(), rest_vertices.detach()


def friction_potential(velocities, lagged_vertices, faces, edges, candidates: Candidates, dhat: float,
                       kappa: float, mu: float, eps_v: float, rest_vertices=None,
                       per_candidate: bool = False) -> torch.Tensor:
    """Smooth (lagged) IPC friction D = Σ_k μ N_k f₀(‖u_k‖), u_k = T_kᵀ v: a 0-dim tensor,
    differentiable (twice) in `velocities`.

    velocities: (V, 3) velocities (or displacements x - xᵗ, with eps_v = ε_v h); lagged_vertices:
    (V, 3) positions where the normal forces N_k = -κ b'(d̄², d̂²)·2d̄, tangent bases and closest
    points are evaluated (held constant); eps_v: the velocity (displacement) below which friction
    is static; mu: friction coefficient. Matches IPC Toolkit's FrictionPotential(eps_v) on
    TangentialCollisions built with BarrierPotential(dhat, kappa) and mu. With per_candidate=True,
    the (N,) terms instead of their sum.
    """
    candidates, dhat, kappa, mu, eps_v, lagged, rest = _friction_args(
        velocities, lagged_vertices, faces, edges, candidates, dhat, kappa, mu, eps_v, rest_vertices)
    fv, ee = candidates
    terms = _ops.ipc_friction_potential(velocities, lagged, rest, faces, edges, fv, ee, dhat, kappa, mu, eps_v)
    return terms if per_candidate else terms.sum()


def friction_potential_gradient(velocities, lagged_vertices, faces, edges, candidates: Candidates, dhat: float,
                                kappa: float, mu: float, eps_v: float, rest_vertices=None,
                                per_candidate: bool = False) -> torch.Tensor:
    """∇ᵥD per vertex (V, 3), or the (N, 12) stencil gradients with per_candidate=True."""
    candidates, dhat, kappa, mu, eps_v, lagged, rest = _friction_args(
        velocities, lagged_vertices, faces, edges, candidates, dhat, kappa, mu, eps_v, rest_vertices)
    fv, ee = candidates
    local = _ops.ipc_friction_potential_gradient(velocities, lagged, rest, faces, edges, fv, ee, dhat, kappa, mu, eps_v)
    if per_candidate:
        return local
    return _scatter_vertices(local, candidate_stencils(faces, edges, candidates), velocities.shape[0])


def friction_potential_hessian(velocities, lagged_vertices, faces, edges, candidates: Candidates, dhat: float,
                               kappa: float, mu: float, eps_v: float, rest_vertices=None,
                               assemble: bool = True) -> BarrierHessian:
    """∇ᵥ²D: per-candidate (N, 12, 12) blocks (PSD by construction, no projection needed), their
    stencils and (when assemble) the coalesced sparse (3V, 3V) sum."""
    candidates, dhat, kappa, mu, eps_v, lagged, rest = _friction_args(
        velocities, lagged_vertices, faces, edges, candidates, dhat, kappa, mu, eps_v, rest_vertices)
    fv, ee = candidates
    local = _ops.ipc_friction_potential_hessian(velocities, lagged, rest, faces, edges, fv, ee, dhat, kappa, mu, eps_v)
    stencils = candidate_stencils(faces, edges, candidates)
    matrix = assemble_hessian(local, stencils, velocities.shape[0]) if assemble else None
    return BarrierHessian(local, stencils, matrix)


# ---- chain rule to body DOFs (ZeMa eq. 6–8) ----------------------------------------------------


def rigid_jacobian(lever_arms: torch.Tensor) -> torch.Tensor:
    """(V, 3, 6) Jacobian of x = p + R x0 with respect to a rigid body's tangent DOFs (δp, δθ) at
    the current pose: ∂x/∂(p, θ) = [I, -[r]×] with r = R x0 = x - p (lever_arms, (V, 3)). The
    second-order term of the rotation is not included (Gauss–Newton in the rotation)."""
    check_float_tensor(lever_arms, "lever_arms", (None, 3))
    r = lever_arms
    zero = torch.zeros_like(r[:, 0])
    skew = torch.stack([
        torch.stack([zero, -r[:, 2], r[:, 1]], -1),
        torch.stack([r[:, 2], zero, -r[:, 0]], -1),
        torch.stack([-r[:, 1], r[:, 0], zero], -1),
    ], dim=1)  # [r]×
    eye = torch.eye(3, dtype=r.dtype, device=r.device).expand(r.shape[0], 3, 3)
    return torch.cat([eye, -skew], dim=2).contiguous()


def affine_jacobian(rest_points: torch.Tensor) -> torch.Tensor:
    """(V, 3, 12) Jacobian J(x0) = ∂x/∂q of an affine body x = A x0 + p, q = (p, a1, a2, a3) with
    a_i the rows of A (ZeMa eq. 2): x_i = p_i + a_i · x0. Exact: x is linear in q."""
    check_float_tensor(rest_points, "rest_points", (None, 3))
    n = rest_points.shape[0]
    J = rest_points.new_zeros((n, 3, 12))
    for i in range(3):
        J[:, i, i] = 1.0
        J[:, i, 3 + 3 * i: 6 + 3 * i] = rest_points
    return J


def body_gradient_hessian(local_gradient: torch.Tensor, local_hessian: torch.Tensor, stencils: torch.Tensor,
                          vertex_body: torch.Tensor, jacobian: torch.Tensor, num_bodies: int) -> BodyDerivatives:
    """Chain rule from stencil vertex derivatives to body DOFs (ZeMa eq. 6–8): with x̃ = J̃ ỹ and
    J̃ = blockdiag(J(v) for the 4 stencil vertices),
        ∇ỹ = J̃ᵀ ∇x̃,    ∇²ỹ = J̃ᵀ ∇²x̃ J̃.
    A PSD-projected ∇²x̃ stays PSD under this congruence, so project before calling.

    local_gradient (N, 12), local_hessian (N, 12, 12), stencils (N, 4) int64 (from
    barrier_potential_hessian), vertex_body (V,) int64 in [0, num_bodies), jacobian (V, 3, K)
    (rigid_jacobian: K = 6, affine_jacobian: K = 12). Every vertex belongs to a body.
    """
    check_float_tensor(local_gradient, "local_gradient", (None, 12))
    check_float_tensor(local_hessian, "local_hessian", (None, 12, 12))
    _check_index_tensor(stencils, "stencils", 4, vertex_body.shape[0] if isinstance(vertex_body, torch.Tensor) else 0)
    _check_index_tensor(vertex_body, "vertex_body", None, num_bodies)
    if not isinstance(jacobian, torch.Tensor) or jacobian.dim() != 3 or jacobian.shape[:2] != (vertex_body.shape[0], 3):
        raise ValueError(f"jacobian: expected shape ({vertex_body.shape[0]}, 3, K), got "
                         f"{tuple(jacobian.shape) if isinstance(jacobian, torch.Tensor) else type(jacobian).__name__}")
    check_same_batch({"local_gradient": local_gradient, "local_hessian": local_hessian})
    n, K = stencils.shape[0], jacobian.shape[2]
    Js = jacobian[stencils]  # (N, 4, 3, K)
    g = local_gradient.reshape(n, 4, 3)
    # ∇ỹ = J̃ᵀ ∇x̃: per stencil vertex J(v)ᵀ g_v, summed into its body
    gy = torch.einsum("nvik,nvi->nvk", Js, g)
    bodies = vertex_body[stencils]  # (N, 4)
    gradient = local_gradient.new_zeros((num_bodies, K)).index_add_(0, bodies.reshape(-1), gy.reshape(-1, K))
    # ∇²ỹ = J̃ᵀ ∇²x̃ J̃: block (v, w) = J(v)ᵀ H_vw J(w)
    H = local_hessian.reshape(n, 4, 3, 4, 3)
    Hy = torch.einsum("nvik,nviwj,nwjl->nvkwl", Js, H, Js).reshape(n, 4 * K, 4 * K)
    dof = (K * bodies[:, :, None] + torch.arange(K, device=bodies.device)).reshape(n, 4 * K)
    rows = dof[:, :, None].expand(n, 4 * K, 4 * K).reshape(-1)
    cols = dof[:, None, :].expand(n, 4 * K, 4 * K).reshape(-1)
    size = K * num_bodies
    matrix = torch.sparse_coo_tensor(torch.stack([rows, cols]), Hy.reshape(-1), (size, size), check_invariants=False).coalesce()
    return BodyDerivatives(gradient, Hy, bodies, matrix)


# ---- CCD ---------------------------------------------------------------------------------------


def ccd_time_of_impact(vertices_t0, vertices_t1, faces, edges, candidates: Candidates, min_distance: float = 0.0,
                       tmax: float = 1.0, conservative_rescaling: float = 0.9,
                       max_iterations: int = 1_000_000) -> torch.Tensor:
    """Per-candidate conservative time of impact in [0, tmax] under x(t) = x0 + t (x1 - x0)
    (tmax where there is none). Additive CCD (IPC Toolkit's AdditiveCCD): the pair stays farther
    apart than min_distance on [0, toi]. 0 when a pair starts closer than min_distance.
    max_iterations caps the ACCD loop; on hitting it the (still safe) time reached is returned.
    """
    _check_mesh(vertices_t0, faces, edges, None, "vertices_t0")
    check_float_tensor(vertices_t1, "vertices_t1", (None, 3))
    check_same_batch({"vertices_t0": vertices_t0, "vertices_t1": vertices_t1})
    candidates = _check_candidates(candidates, vertices_t0, faces, edges)
    min_distance = _check_positive(min_distance, "min_distance", allow_zero=True)
    tmax = _check_positive(tmax, "tmax", allow_zero=True)
    conservative_rescaling = _check_positive(conservative_rescaling, "conservative_rescaling")
    if conservative_rescaling > 1:
        raise ValueError(f"conservative_rescaling: expected a value in (0, 1], got {conservative_rescaling}")
    if isinstance(max_iterations, bool) or not isinstance(max_iterations, int) or max_iterations <= 0:
        raise ValueError(f"max_iterations: expected a positive int, got {max_iterations!r}")
    fv, ee = candidates
    return _ops.ipc_ccd(vertices_t0, vertices_t1, faces, edges, fv, ee, min_distance, tmax,
                        conservative_rescaling, max_iterations)


def collision_free_step(vertices_t0, vertices_t1, faces, edges, min_distance: float = 0.0, vertex_body=None,
                        conservative_rescaling: float = 0.9, max_iterations: int = 1_000_000) -> torch.Tensor:
    """Largest step fraction α in [0, 1] such that moving every vertex from x0 to x0 + α (x1 - x0)
    keeps all face–vertex and edge–edge pairs farther apart than min_distance (conservative: never
    a step that ends in penetration). A 0-dim tensor on the vertices' device."""
    candidates = swept_candidates(vertices_t0, vertices_t1, faces, edges, min_distance, vertex_body)
    toi = ccd_time_of_impact(vertices_t0, vertices_t1, faces, edges, candidates, min_distance, 1.0,
                             conservative_rescaling, max_iterations)
    if toi.numel() == 0:
        return vertices_t0.new_ones(())
    return toi.min()


# ---- fake (meta) implementations ---------------------------------------------------------------

_DISTANCE_OPS = {
    "ipc_point_point_distance": 2,
    "ipc_point_edge_distance": 3,
    "ipc_point_triangle_distance": 4,
    "ipc_edge_edge_distance": 4,
    "ipc_edge_edge_mollifier": 4,
}


def _register_distance_fakes(name: str, nv: int) -> None:
    K = 3 * nv

    def value(*args):
        return args[0].new_empty((args[0].shape[0],))

    def gradient(*args):
        return args[0].new_empty((args[0].shape[0], K))

    def hessian(*args):
        return args[0].new_empty((args[0].shape[0], K, K))

    torch.library.register_fake(f"contactnet::{name}")(value)
    torch.library.register_fake(f"contactnet::{name}_gradient")(gradient)
    torch.library.register_fake(f"contactnet::{name}_hessian")(hessian)


for _name, _nv in _DISTANCE_OPS.items():
    _register_distance_fakes(_name, _nv)


@torch.library.register_fake("contactnet::ipc_barrier")
def _(d2, dhat):
    return d2.new_empty(d2.shape), d2.new_empty(d2.shape), d2.new_empty(d2.shape)


def _dynamic_pairs(like):
    ctx = torch.library.get_ctx()
    return like.new_empty((ctx.new_dynamic_size(), 2), dtype=torch.int64)


@torch.library.register_fake("contactnet::ipc_collision_candidates")
def _(vertices, faces, edges, vertex_body, dhat):
    return _dynamic_pairs(faces), _dynamic_pairs(faces)


@torch.library.register_fake("contactnet::ipc_swept_candidates")
def _(vertices_t0, vertices_t1, faces, edges, vertex_body, min_distance):
    return _dynamic_pairs(faces), _dynamic_pairs(faces)


@torch.library.register_fake("contactnet::ipc_collision_candidates_padded")
def _(vertices, faces, edges, vertex_body, dhat, capacity, vertex_active=None, face_active=None, edge_active=None):
    return (faces.new_empty((capacity, 2), dtype=torch.int64), faces.new_empty((capacity, 2), dtype=torch.int64),
            faces.new_empty((2,), dtype=torch.int64))


@torch.library.register_fake("contactnet::ipc_swept_candidates_padded")
def _(vertices_t0, vertices_t1, faces, edges, vertex_body, min_distance, capacity, vertex_active=None,
      face_active=None, edge_active=None):
    return (faces.new_empty((capacity, 2), dtype=torch.int64), faces.new_empty((capacity, 2), dtype=torch.int64),
            faces.new_empty((2,), dtype=torch.int64))


@torch.library.register_fake("contactnet::ipc_barrier_potential")
def _(vertices, rest_vertices, faces, edges, fv, ee, dhat, kappa):
    return vertices.new_empty((fv.shape[0] + ee.shape[0],))


@torch.library.register_fake("contactnet::ipc_barrier_potential_gradient")
def _(vertices, rest_vertices, faces, edges, fv, ee, dhat, kappa):
    return vertices.new_empty((fv.shape[0] + ee.shape[0], 12))


@torch.library.register_fake("contactnet::ipc_barrier_potential_hessian")
def _(vertices, rest_vertices, faces, edges, fv, ee, dhat, kappa, project_to_psd):
    return vertices.new_empty((fv.shape[0] + ee.shape[0], 12, 12))


@torch.library.register_fake("contactnet::ipc_friction_potential")
def _(velocities, lagged_vertices, rest_vertices, faces, edges, fv, ee, dhat, kappa, mu, eps_v):
    return velocities.new_empty((fv.shape[0] + ee.shape[0],))


@torch.library.register_fake("contactnet::ipc_friction_potential_gradient")
def _(velocities, lagged_vertices, rest_vertices, faces, edges, fv, ee, dhat, kappa, mu, eps_v):
    return velocities.new_empty((fv.shape[0] + ee.shape[0], 12))


@torch.library.register_fake("contactnet::ipc_friction_potential_hessian")
def _(velocities, lagged_vertices, rest_vertices, faces, edges, fv, ee, dhat, kappa, mu, eps_v):
    return velocities.new_empty((fv.shape[0] + ee.shape[0], 12, 12))


@torch.library.register_fake("contactnet::ipc_assemble_hessian")
def _(local, stencils, num_vertices):
    nnz = torch.library.get_ctx().new_dynamic_size()
    return stencils.new_empty((2, nnz)), local.new_empty((nnz,))


@torch.library.register_fake("contactnet::ipc_ccd")
def _(vertices_t0, vertices_t1, faces, edges, fv, ee, min_distance, tmax, conservative_rescaling, max_iterations):
    return vertices_t0.new_empty((fv.shape[0] + ee.shape[0],))


# ---- autograd: backward from the analytic gradient, double backward from the Hessian ----------


def _register_distance_autograd(name: str, nv: int, has_eps: bool) -> None:
    ops = getattr(_ops, name)
    grad_op = getattr(_ops, f"{name}_gradient")
    hess_op = getattr(_ops, f"{name}_hessian")
    nx = nv

    def setup(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    def backward(ctx, grad_out):
        inputs = ctx.saved_tensors
        g = grad_op(*inputs).reshape(-1, nx, 3) * grad_out[:, None, None]
        grads = [g[:, k] for k in range(nx)]
        return (*grads, None) if has_eps else tuple(grads)

    def grad_backward(ctx, grad_out):
        inputs = ctx.saved_tensors
        H = hess_op(*inputs)  # (N, K, K), symmetric
        g = torch.einsum("nij,nj->ni", H, grad_out).reshape(-1, nx, 3)
        grads = [g[:, k] for k in range(nx)]
        return (*grads, None) if has_eps else tuple(grads)

    torch.library.register_autograd(f"contactnet::{name}", backward, setup_context=setup)
    torch.library.register_autograd(f"contactnet::{name}_gradient", grad_backward, setup_context=setup)
    del ops


for _name, _nv in _DISTANCE_OPS.items():
    _register_distance_autograd(_name, _nv, _name == "ipc_edge_edge_mollifier")


def _barrier_setup(ctx, inputs, output):
    ctx.mark_non_differentiable(output[2])
    ctx.save_for_backward(output[1], output[2])


def _barrier_backward(ctx, grad_value, grad_first, grad_second):
    first, second = ctx.saved_tensors
    g = grad_value * first
    if grad_first is not None:
        g = g + grad_first * second
    return g, None


torch.library.register_autograd("contactnet::ipc_barrier", _barrier_backward, setup_context=_barrier_setup)


def _potential_setup(ctx, inputs, output):
    vertices, rest, faces, edges, fv, ee, dhat, kappa = inputs[:8]
    ctx.save_for_backward(vertices, rest, faces, edges, fv, ee)
    ctx.dhat, ctx.kappa = dhat, kappa


def _potential_backward(ctx, grad_out):
    vertices, rest, faces, edges, fv, ee = ctx.saved_tensors
    local = _ops.ipc_barrier_potential_gradient(vertices, rest, faces, edges, fv, ee, ctx.dhat, ctx.kappa)
    stencils = candidate_stencils(faces, edges, Candidates(fv, ee))
    g = _scatter_vertices(local * grad_out[:, None], stencils, vertices.shape[0])
    return g, None, None, None, None, None, None, None


def _potential_gradient_backward(ctx, grad_out):
    vertices, rest, faces, edges, fv, ee = ctx.saved_tensors
    H = _ops.ipc_barrier_potential_hessian(vertices, rest, faces, edges, fv, ee, ctx.dhat, ctx.kappa, False)
    stencils = candidate_stencils(faces, edges, Candidates(fv, ee))
    g = _scatter_vertices(torch.einsum("nij,nj->ni", H, grad_out), stencils, vertices.shape[0])
    return g, None, None, None, None, None, None, None


torch.library.register_autograd("contactnet::ipc_barrier_potential", _potential_backward,
                                setup_context=_potential_setup)
torch.library.register_autograd("contactnet::ipc_barrier_potential_gradient", _potential_gradient_backward,
                                setup_context=_potential_setup)


def _friction_setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs[:7])
    ctx.params = inputs[7:]


def _friction_backward(ctx, grad_out):
    v, lagged, rest, faces, edges, fv, ee = ctx.saved_tensors
    local = _ops.ipc_friction_potential_gradient(v, lagged, rest, faces, edges, fv, ee, *ctx.params)
    stencils = candidate_stencils(faces, edges, Candidates(fv, ee))
    return (_scatter_vertices(local * grad_out[:, None], stencils, v.shape[0]),) + (None,) * 10


def _friction_gradient_backward(ctx, grad_out):
    v, lagged, rest, faces, edges, fv, ee = ctx.saved_tensors
    H = _ops.ipc_friction_potential_hessian(v, lagged, rest, faces, edges, fv, ee, *ctx.params)
    stencils = candidate_stencils(faces, edges, Candidates(fv, ee))
    return (_scatter_vertices(torch.einsum("nij,nj->ni", H, grad_out), stencils, v.shape[0]),) + (None,) * 10


torch.library.register_autograd("contactnet::ipc_friction_potential", _friction_backward,
                                setup_context=_friction_setup)
torch.library.register_autograd("contactnet::ipc_friction_potential_gradient", _friction_gradient_backward,
                                setup_context=_friction_setup)

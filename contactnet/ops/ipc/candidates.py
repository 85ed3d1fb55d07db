"""IPC collision candidates of a packed mesh: its edges, the stencils of candidate pairs, and the
broad phases (csrc/ipc/ipc_broad_phase.h): a uniform grid for variable-size lists, a
sort-and-sweep for fixed-capacity (`*_padded`) lists that never read back to the host; and, for
affine bodies, a body-level search over per-body rest-frame trees (csrc/ipc/ipc_body_broad_phase.h,
either device) that finds the same pairs while visiting only what is near contact; and a narrow phase that
prunes a list to the pairs that may really come within reach (`prune_candidates`, and
`prune_candidates_padded` for fixed-capacity lists)."""

from __future__ import annotations

from typing import NamedTuple

import torch

from contactnet._extension import load_extension
from contactnet.ops._checks import (
    as_index_tensor,
    as_mask_tensor,
    check_float_tensor,
    check_index_values,
    check_int,
    check_positive,
    check_same_batch,
    check_same_device,
    ipc_candidate_args,
    ipc_mesh_args,
    values_checked_here,
)

load_extension()

_ops = torch.ops.contactnet


class Candidates(NamedTuple):
    """Collision candidates of one packed mesh."""

    face_vertex: torch.Tensor  # (Nfv, 2) int64: vertex, face
    edge_edge: torch.Tensor  # (Nee, 2) int64: edge_a < edge_b

    @property
    def count(self) -> int:
        return self.face_vertex.shape[0] + self.edge_edge.shape[0]


class BoundedCandidates(Candidates):
    """Candidates of fixed-capacity lists whose rows at or past `extents` are all padding.
    extents: (2,) int64 on the lists' device, face–vertex then edge–edge: the counts a padded
    search or pruning returns (`PaddedCandidates.bounded`; a count past the capacity reads as the
    whole list). Under a CUDA graph a list's shape cannot follow its count; the stepper's ops
    (`affine_potential`, `affine_potential_derivatives`, `collision_free_steps`,
    `affine_contact_forces`, `contact_statistics`) read the extents on the device instead and skip
    the rows past them, so their cost follows the rows in use, not the capacity. Unpacks, indexes
    and counts as `Candidates`; a tuple made from it (`Candidates(*c)`, `_replace`) has no
    extents, nor has one made without them (None)."""

    def __new__(cls, face_vertex: torch.Tensor, edge_edge: torch.Tensor, extents: torch.Tensor | None = None):
        self = super().__new__(cls, face_vertex, edge_edge)
        self.extents = extents
        return self


def candidate_extents(candidates: Candidates, name: str = "extents", like: torch.Tensor | None = None):
    """The extents of `BoundedCandidates`; None for other candidates (every row may be in use).
    With `like`, they are checked ((2,) int64 counts >= 0 on like's device; values where read
    here), and the errors name them `name`."""
    extents = getattr(candidates, "extents", None)
    if extents is None or like is None:
        return extents
    if not isinstance(extents, torch.Tensor) or extents.dtype != torch.int64:
        raise TypeError(f"{name}: expected an int64 tensor of (face–vertex, edge–edge) counts, got "
                        f"{getattr(extents, 'dtype', type(extents).__name__)}")
    if extents.shape != (2,):
        raise ValueError(f"{name}: expected shape (2,), got {tuple(extents.shape)}")
    check_same_device(extents, name, like, "the candidates")
    if values_checked_here(extents) and int(extents.min()) < 0:
        raise ValueError(f"{name}: expected counts >= 0, got {extents.tolist()}")
    return extents


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

    @property
    def bounded(self) -> BoundedCandidates:
        """The lists with their counts as extents: the ops that take them skip the padding past
        the pairs found without reading it."""
        return BoundedCandidates(*self.candidates, self.counts)


# ---- meshes ------------------------------------------------------------------------------------


def mesh_edges(faces: torch.Tensor) -> torch.Tensor:
    """Unique undirected edges (E, 2) int64 of a triangle mesh, each as (smaller id, larger id),
    sorted lexicographically. faces: (F, 3) integer tensor (cast to int64)."""
    faces = as_index_tensor(faces, "faces", (None, 3))
    if values_checked_here(faces, checked_in_cpp_on_cpu=False):
        check_index_values(faces, "faces", None)
    e = torch.cat([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]], dim=0)
    e = torch.sort(e, dim=1).values
    if e.shape[0] == 0:
        return e.contiguous()
    # One int64 key per edge: a 1-D unique is ~50x faster than unique(dim=0) on a packed scene of
    # thousands of environments, and sorting the keys sorts the edges lexicographically.
    n = int(e.max()) + 1
    keys = torch.unique(e[:, 0] * n + e[:, 1])
    return torch.stack([keys // n, keys % n], dim=1)


def candidate_stencils(faces: torch.Tensor, edges: torch.Tensor, candidates: Candidates) -> torch.Tensor:
    """(N, 4) int64 vertex ids of each candidate's stencil: (p, t0, t1, t2) for face–vertex,
    (ea0, ea1, eb0, eb1) for edge–edge; face–vertex candidates first."""
    fv, ee = candidates
    a = torch.cat([fv[:, :1], faces[fv[:, 1]]], dim=1)
    b = torch.cat([edges[ee[:, 0]], edges[ee[:, 1]]], dim=1)
    return torch.cat([a, b], dim=0)


# ---- variable-size lists (uniform grid) --------------------------------------------------------


def collision_candidates(vertices, faces, edges, dhat: float, vertex_body=None) -> Candidates:
    """All face–vertex and edge–edge pairs closer than dhat (squared distance < dhat²).

    vertices: (V, 3) float, metres; faces: (F, 3) int64; edges: (E, 2) int64 (see mesh_edges);
    vertex_body: optional (V,) int64 body / mesh id per vertex: pairs within one body are skipped
    (rigid bodies do not self-collide); without it, every pair of the packed mesh is considered.
    Index tensors of another integer dtype or layout are accepted (converted once, see
    contactnet.ops._checks). Pairs sharing a vertex are always skipped. A primitive belongs to its
    first vertex's body.

    Broad phase: primitive boxes grown by dhat/2 on a uniform grid (cell ≈ the mean face / edge
    box size, so flat sheets cost no more than compact meshes), then the exact squared distance
    (same code as the potential) filters the pairs.
    Face–vertex pairs are listed as (vertex, face), edge–edge pairs as (edge_a < edge_b).
    """
    faces, edges, vertex_body = ipc_mesh_args(vertices, faces, edges, vertex_body)
    dhat = check_positive(dhat, "dhat")
    return Candidates(*_ops.ipc_collision_candidates(vertices, faces, edges, vertex_body, dhat))


def _swept_args(vertices_t0, vertices_t1, faces, edges, vertex_body, min_distance):
    faces, edges, vertex_body = ipc_mesh_args(vertices_t0, faces, edges, vertex_body, "vertices_t0")
    check_float_tensor(vertices_t1, "vertices_t1", (None, 3))
    check_same_batch({"vertices_t0": vertices_t0, "vertices_t1": vertices_t1})
    return faces, edges, vertex_body, check_positive(min_distance, "min_distance", allow_zero=True)


def swept_candidates(vertices_t0, vertices_t1, faces, edges, min_distance: float = 0.0, vertex_body=None) -> Candidates:
    """Face–vertex and edge–edge pairs whose boxes around both positions (grown by
    min_distance/2) overlap: the CCD broad phase for linear trajectories."""
    faces, edges, vertex_body, min_distance = _swept_args(vertices_t0, vertices_t1, faces, edges, vertex_body,
                                                          min_distance)
    return Candidates(
        *_ops.ipc_swept_candidates(vertices_t0, vertices_t1, faces, edges, vertex_body, min_distance)
    )


def prune_candidates(vertices_t0, faces, edges, candidates: Candidates, reach: float,
                     vertices_t1=None) -> Candidates:
    """The candidates that may come closer than `reach` on the linear motion x0 → x1 (or, without
    vertices_t1, that are closer than reach at x0), in their order: a narrow phase after a broad
    one, whose box tests keep many pairs that never come near. Conservative: every point of a
    primitive moves by a convex combination of its vertices' displacements, so a pair stays at
    least d(x0) − δ_a − δ_b apart, δ a side's largest displacement, measured either absolutely or
    from one stencil vertex's (whichever bound is smaller: a motion both sides share, such as
    objects resting in a shaken bowl, moves no distance); pairs with that bound ≥ reach are
    dropped (a relative margin of 1e-9 covers rounding). At x0 alone the test is the barrier's
    own, d² < reach². Padding rows (-1) are dropped. The count is read on the host (a sync on a
    GPU)."""
    return Candidates(*_ops.ipc_prune_candidates(*_prune_args(vertices_t0, vertices_t1, faces, edges, candidates,
                                                              reach)))


def prune_candidates_padded(vertices_t0, faces, edges, candidates: Candidates, reach: float, capacity: int,
                            vertices_t1=None) -> PaddedCandidates:
    """`prune_candidates` with fixed shapes and no host sync (CUDA-graph capturable): the kept rows,
    in order, at the front of `capacity` rows of each kind (-1 after them), and the counts kept
    (more than `capacity`: rows were dropped, see `PaddedCandidates.overflow`). Padding rows of the
    input are dropped, so a padded broad phase's list can be narrowed to what the motion can reach:
    its boxes keep far more pairs (around a shaken bowl, 30 to 250 times more)."""
    args = _prune_args(vertices_t0, vertices_t1, faces, edges, candidates, reach)
    fv, ee, counts = _ops.ipc_prune_candidates_padded(*args, check_int(capacity, "capacity", 0))
    return PaddedCandidates(Candidates(fv, ee), counts)


def _prune_args(vertices_t0, vertices_t1, faces, edges, candidates, reach):
    faces, edges, _ = ipc_mesh_args(vertices_t0, faces, edges, None, "vertices_t0")
    if vertices_t1 is not None:
        check_float_tensor(vertices_t1, "vertices_t1", (None, 3))
        check_same_batch({"vertices_t0": vertices_t0, "vertices_t1": vertices_t1})
    fv, ee = ipc_candidate_args(candidates, vertices_t0, faces, edges)
    return vertices_t0, vertices_t1, faces, edges, fv, ee, check_positive(reach, "reach", allow_zero=True)


# ---- fixed-capacity lists (sort-and-sweep) -----------------------------------------------------


def _active_args(vertices, faces, edges, vertex_active, face_active, edge_active):
    return (as_mask_tensor(vertex_active, "vertex_active", vertices.shape[0], vertices),
            as_mask_tensor(face_active, "face_active", faces.shape[0], vertices),
            as_mask_tensor(edge_active, "edge_active", edges.shape[0], vertices))


def collision_candidates_padded(vertices, faces, edges, dhat: float, capacity: int, vertex_body=None,
                                vertex_active=None, face_active=None, edge_active=None) -> PaddedCandidates:
    """`collision_candidates` with a fixed number of rows and no host sync (CUDA-graph capturable):
    `capacity` rows of face–vertex and `capacity` rows of edge–edge pairs, -1 past the pairs found
    (in sweep order, not sorted), and the (2,) counts found, which exceed `capacity` when pairs
    were dropped (`PaddedCandidates.overflow`). vertex_active (V,), face_active (F,), edge_active
    (E,): optional bool masks; an inactive primitive takes part in no pair (cheaper than
    compacting the mesh, which needs data-dependent shapes)."""
    faces, edges, vertex_body = ipc_mesh_args(vertices, faces, edges, vertex_body)
    dhat = check_positive(dhat, "dhat")
    capacity = check_int(capacity, "capacity", 0)
    active = _active_args(vertices, faces, edges, vertex_active, face_active, edge_active)
    fv, ee, counts = _ops.ipc_collision_candidates_padded(vertices, faces, edges, vertex_body, dhat, capacity,
                                                          *active)
    return PaddedCandidates(Candidates(fv, ee), counts)


def swept_candidates_padded(vertices_t0, vertices_t1, faces, edges, capacity: int, min_distance: float = 0.0,
                            vertex_body=None, vertex_active=None, face_active=None,
                            edge_active=None) -> PaddedCandidates:
    """`swept_candidates` with a fixed number of rows (see `collision_candidates_padded`)."""
    faces, edges, vertex_body, min_distance = _swept_args(vertices_t0, vertices_t1, faces, edges, vertex_body,
                                                          min_distance)
    capacity = check_int(capacity, "capacity", 0)
    active = _active_args(vertices_t0, faces, edges, vertex_active, face_active, edge_active)
    fv, ee, counts = _ops.ipc_swept_candidates_padded(vertices_t0, vertices_t1, faces, edges, vertex_body,
                                                      min_distance, capacity, *active)
    return PaddedCandidates(Candidates(fv, ee), counts)


# ---- body-level search (affine bodies, CPU) ----------------------------------------------------


class BodyTrees(NamedTuple):
    """Every body's vertex, face and edge box trees in its rest frame (`body_trees`; layout in
    csrc/ipc/ipc_body_broad_phase.h)."""

    box: torch.Tensor  # (N, 6) float rest-frame [lo, hi] per node
    node: torch.Tensor  # (N, 3) int64 [right child or -1 (leaf), first, count]
    prim: torch.Tensor  # (V + F + E,) int64 primitive ids in leaf order
    root: torch.Tensor  # (num_bodies, 3) int64 root node of each body's vertex / face / edge tree, -1: none


class BodySearch(NamedTuple):
    """Pairs of `body_candidates` and what finding them cost (timing-free counters)."""

    candidates: Candidates
    stats: torch.Tensor  # (4,) int64: body pairs tested, body pairs near, node pairs tested, primitive pairs tested


def body_trees(rest_vertices, faces, edges, vertex_body, num_bodies: int) -> BodyTrees:
    """Build once the trees of `body_candidates`: per body (vertex_body (V,) int64 in
    [0, num_bodies)), a median-split box tree of its vertices, faces and edges at rest_vertices
    (V, 3), the bodies' rest frames. A face / edge belongs to its first vertex's body. CPU tensors
    (moved to a device, the trees serve `body_candidates_padded` there)."""
    faces, edges, vertex_body = ipc_mesh_args(rest_vertices, faces, edges, vertex_body, "rest_vertices")
    if vertex_body is None:
        raise TypeError("vertex_body: expected a (V,) int64 tensor of body ids, got None")
    num_bodies = check_int(num_bodies, "num_bodies", 0)
    return BodyTrees(*_ops.ipc_body_trees(rest_vertices, faces, edges, vertex_body, num_bodies))


def body_candidates(vertices_t0, faces, edges, trees: BodyTrees, q_t0, body_pairs, reach: float,
                    vertices_t1=None, q_t1=None, vertex_body=None, prune: bool = False) -> BodySearch:
    """The pairs of `collision_candidates(vertices_t0, faces, edges, reach, vertex_body)` (or, with
    vertices_t1, of `swept_candidates(vertices_t0, vertices_t1, faces, edges, reach, vertex_body)`)
    that join the two bodies of a row of body_pairs (P, 2) int64: the same boxes and exact filter,
    so the same pairs, but found by traversing only the trees of body pairs whose moving boxes
    come within reach, with the node boxes mapped by the bodies' affine maps.

    trees: from `body_trees` with the rest vertices x0. q_t0, q_t1: (num_bodies, 12) float, each
    body's affine map (p, A row-major); vertices_t0 / vertices_t1 must be x = A x0 + p (to
    rounding; a shift of a body's vertices belongs in its p). List each unordered body pair once.
    Pairs come grouped by body pair in the order of body_pairs (deterministic), face–vertex as
    (vertex, face), edge–edge as (edge_a < edge_b). On either device (the trees moved there); the
    lists' sizes are read on the host (a sync on a GPU).

    prune=True keeps, of a swept search's pairs, only those `prune_candidates` would keep at reach
    on the motion (each pair tested as it is found): the search and the pruning in one pass, the
    same pairs in the same order."""
    args = _body_args(vertices_t0, faces, edges, trees, q_t0, body_pairs, reach, vertices_t1, q_t1, vertex_body)
    fv, ee, stats = _ops.ipc_body_candidates(*args, bool(prune))
    return BodySearch(Candidates(fv, ee), stats)


def body_candidates_padded(vertices_t0, faces, edges, trees: BodyTrees, q_t0, body_pairs, reach: float,
                           capacity: int, vertices_t1=None, q_t1=None, vertex_body=None,
                           prune: bool = False) -> PaddedCandidates:
    """`body_candidates` (prune as there) in fixed-size lists, as `collision_candidates_padded`
    returns them: `capacity` rows of each kind (the first pairs in `body_candidates`' order), -1
    past the pairs found, and the counts found. On either device (the trees moved there), with no
    output shape depending on the data and no host read: the stepper's fixed-shape mode runs it
    in CUDA graphs."""
    args = _body_args(vertices_t0, faces, edges, trees, q_t0, body_pairs, reach, vertices_t1, q_t1, vertex_body)
    fv, ee, counts, _ = _ops.ipc_body_candidates_padded(*args, check_int(capacity, "capacity", 0), bool(prune))
    return PaddedCandidates(Candidates(fv, ee), counts)


def _body_args(vertices_t0, faces, edges, trees, q_t0, body_pairs, reach, vertices_t1, q_t1, vertex_body):
    faces = as_index_tensor(faces, "faces", (None, 3))
    edges = as_index_tensor(edges, "edges", (None, 2))
    check_float_tensor(vertices_t0, "vertices_t0", (None, 3))
    body_pairs = as_index_tensor(body_pairs, "body_pairs", (None, 2))
    if vertex_body is not None:
        vertex_body = as_index_tensor(vertex_body, "vertex_body", (vertices_t0.shape[0],))
    if not isinstance(trees, BodyTrees):
        raise TypeError(f"trees: expected the BodyTrees of body_trees, got {type(trees).__name__}")
    reach = check_positive(reach, "reach", allow_zero=vertices_t1 is not None)
    return (vertices_t0, vertices_t1, faces, edges, vertex_body, q_t0, q_t1, body_pairs, *trees, reach)


# ---- fake (meta) implementations ---------------------------------------------------------------


def _dynamic_pairs(like):
    ctx = torch.library.get_ctx()
    return like.new_empty((ctx.new_dynamic_size(), 2), dtype=torch.int64)


@torch.library.register_fake("contactnet::ipc_collision_candidates")
def _(vertices, faces, edges, vertex_body, dhat):
    return _dynamic_pairs(faces), _dynamic_pairs(faces)


@torch.library.register_fake("contactnet::ipc_swept_candidates")
def _(vertices_t0, vertices_t1, faces, edges, vertex_body, min_distance):
    return _dynamic_pairs(faces), _dynamic_pairs(faces)


@torch.library.register_fake("contactnet::ipc_prune_candidates")
def _(vertices_t0, vertices_t1, faces, edges, fv, ee, reach):
    return _dynamic_pairs(faces), _dynamic_pairs(faces)


@torch.library.register_fake("contactnet::ipc_prune_candidates_padded")
def _(vertices_t0, vertices_t1, faces, edges, fv, ee, reach, capacity):
    return _padded_pairs(faces, capacity)


@torch.library.register_fake("contactnet::ipc_body_candidates")
def _(vertices_t0, vertices_t1, faces, edges, vertex_body, q_t0, q_t1, body_pairs, box, node, prim, root, reach,
      prune=False):
    return _dynamic_pairs(faces), _dynamic_pairs(faces), faces.new_empty((4,), dtype=torch.int64)


@torch.library.register_fake("contactnet::ipc_body_candidates_padded")
def _(vertices_t0, vertices_t1, faces, edges, vertex_body, q_t0, q_t1, body_pairs, box, node, prim, root, reach,
      capacity, prune=False):
    return (*_padded_pairs(faces, capacity), faces.new_empty((4,), dtype=torch.int64))


def _padded_pairs(faces, capacity):
    return (faces.new_empty((capacity, 2), dtype=torch.int64), faces.new_empty((capacity, 2), dtype=torch.int64),
            faces.new_empty((2,), dtype=torch.int64))


@torch.library.register_fake("contactnet::ipc_collision_candidates_padded")
def _(vertices, faces, edges, vertex_body, dhat, capacity, vertex_active=None, face_active=None, edge_active=None):
    return _padded_pairs(faces, capacity)


@torch.library.register_fake("contactnet::ipc_swept_candidates_padded")
def _(vertices_t0, vertices_t1, faces, edges, vertex_body, min_distance, capacity, vertex_active=None,
      face_active=None, edge_active=None):
    return _padded_pairs(faces, capacity)

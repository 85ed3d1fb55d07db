"""Collision networks over shape embeddings: LOCC (local crops) and Global-OCN (global pooling).

Both share the inference API: `encode(points, normals, aabb)` once per object, then
- `predict(emb_a, emb_b, pose_a, pose_b) -> logits`: embeddings broadcast against the poses'
  leading dimensions, e.g. embeddings (B, 1, ...) with poses (B, G, 7) score G poses per object
  pair without copying (training);
- `predict_indexed(table, ids_a, ids_b, pose_a, pose_b) -> logits`: a table of N cached
  embeddings and (Q,) object ids per query, never copying an embedding per query (planners).
Logit > 0 means "colliding".
"""

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from contactnet.models import containment
from contactnet.models.encoder import ShapeEmbedding, ShapeEncoder
from contactnet.models.geometry import (
    box_placement_features,
    frame_into,
    grid_coordinates,
    local_crop,
    point_coordinates,
    relative_pose_features,
)
from contactnet.ops._checks import as_float_tensor, mesh_ids, trusted_indices
from contactnet.ops.cloud_depth import cloud_depth, sort_by_cell
from contactnet.ops.grid_sample_rows import grid_sample_rows
from contactnet.ops.locc_cooccupancy import locc_point_cooccupancy


CROSS_CHUNK = 2048  # queries per slice of the indexed co-occupancy term (torch composition)
# Queries per call of the fused surface-point term: its scratch is K ranks and K indices per query,
# touched only as far as a query keeps points (about 200 MB at 3,000 points, mostly untouched).
FUSED_CHUNK = 8192
# The grid whose cells the surface depths search the other's points by, whatever the encoder's: at
# 3,000 points a 16³ cell holds a few and the ball meets a few cells (on real boundary pairs the
# op took 16% longer over the 8³ grid, and 3-20% longer over 24³-48³).
DEPTH_GRID = 16


class TableProjection(NamedTuple):
    """What `LOCC.predict_indexed` derives from a whole embedding table before it reads its
    queries' rows (`LOCC.project_table`). It costs a pass over every cell of every object in the
    table whatever the batch, so a caller that sends many batches against one table (the
    collision checker) computes it once and passes it along."""

    rows: torch.Tensor  # (N·M³, F) the table's cells as rows
    queries: torch.Tensor | None  # (N, M³, D) co-occupancy queries of the cells (None: no such term)
    keys: torch.Tensor | None  # (N·M³, D) co-occupancy key grids as rows (`grid_sample_rows`)
    point_queries: torch.Tensor | None  # (N, K, D) queries at the encoded points (cross sites "points")
    occupancy: torch.Tensor | None  # (N·M³, 1) the table's points per cell as rows, for ranking sites
    # surface_depth: the points and normals (N, K, 3) sorted by DEPTH_GRID³ cells, each cell's
    # first point (N, DEPTH_GRID³ + 1), each object's point spacing (N,)
    depth_points: torch.Tensor | None = None
    depth_normals: torch.Tensor | None = None
    depth_starts: torch.Tensor | None = None
    spacing: torch.Tensor | None = None


def _grid_sampler(grids: torch.Tensor):
    """coords (N, P, C, 3) -> (N, P, C, D): trilinear samples of grids (N, D, M, M, M) (zero padding,
    align_corners=False, coords[..., 0] along the first grid axis)."""
    def sample(coords):
        out = F.grid_sample(grids, coords.flip(-1)[:, :, :, None], align_corners=False)  # (N, D, P, C, 1)
        return out.squeeze(-1).permute(0, 2, 3, 1)
    return sample


def _row_sampler(rows: torch.Tensor, grid: int, ids: torch.Tensor):
    """`_grid_sampler` of the grids ids (N,) of a table stored as rows (`grid_sample_rows`). The
    ids have already indexed the table's boxes, so their values are not read again (on a GPU that
    would be a host sync on the hot path)."""
    def sample(coords):
        n, p, c = coords.shape[:3]
        with trusted_indices():
            out = grid_sample_rows(rows, grid, ids, coords.reshape(n, p * c, 3))
        return out.reshape(n, p, c, rows.shape[1])
    return sample


def _mlp(cin: int, hidden: int, outputs: int = 1) -> nn.Sequential:
    return nn.Sequential(nn.Linear(cin, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                         nn.Linear(hidden, outputs))


def _dipoles(emb: ShapeEmbedding, arg: str) -> torch.Tensor:
    if emb.dipoles is None:
        raise ValueError(f"{arg}.dipoles: the containment test reads the encoder's surface dipoles; got an embedding "
                         f"without them (pass the encoder's ShapeEmbedding.dipoles along, or set containment=False)")
    return emb.dipoles


def _poses(poses, name: str, like: torch.Tensor) -> torch.Tensor:
    return as_float_tensor(poses, name, 7, "[x, y, z, qw, qx, qy, qz]", like.dtype, like.device)


def _masked_max(values: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """Max over the cell axis (-2) of values (..., C, D) where keep (..., C) holds; 0 if none does."""
    lowest = torch.finfo(values.dtype).min
    best = torch.where(keep[..., None], values, lowest).amax(-2)
    return torch.where(keep.any(-1, keepdim=True), best, torch.zeros_like(best))


class CollisionNet(nn.Module):
    """containment: a pair whose winding-number test finds one object wholly inside the other
    (`contactnet.models.containment`) gets a logit of at least CONTAINED_LOGIT, whatever the head
    says; it has no parameters, so it can be switched on for a net trained without it."""

    def __init__(self, encoder: ShapeEncoder, containment: bool = False):
        super().__init__()
        self.encoder = encoder
        self.containment = bool(containment)

    def _contained(self, emb_a: ShapeEmbedding, emb_b: ShapeEmbedding, pose_a, pose_b) -> torch.Tensor | None:
        """Where one object of each pair lies inside the other (None: the test is off)."""
        if not self.containment:
            return None
        return containment.contained(_dipoles(emb_a, "emb_a"), _dipoles(emb_b, "emb_b"), pose_a, pose_b)

    def _contained_indexed(self, table: ShapeEmbedding, ids_a, ids_b, pose_a, pose_b) -> torch.Tensor | None:
        """`_contained` for queries against a table."""
        if not self.containment:
            return None
        return containment.contained_indexed(_dipoles(table, "table"), ids_a, ids_b, pose_a, pose_b)

    def encode(self, points, normals, aabb=None) -> ShapeEmbedding:
        """The embedding of B objects' clouds, points and normals (B, K, 3) in each object's frame
        [+ aabb (B, 2, 3), the box the grid spans; default the cloud's]; one object's (K, 3) gives an
        unbatched embedding, which `predict` broadcasts against any batch of poses. numpy arrays and
        float64 are taken, cast once to the net's dtype."""
        param = next(self.parameters())
        points = as_float_tensor(points, "points", 3, "object-frame points", param.dtype, param.device)
        normals = as_float_tensor(normals, "normals", 3, "unit normals", param.dtype, param.device)
        if aabb is not None:
            aabb = as_float_tensor(aabb, "aabb", 3, "[min, max] corners", param.dtype, param.device)
        single = points.dim() == 2
        if single:
            points, normals, aabb = points[None], normals[None], None if aabb is None else aabb[None]
        emb = self.encoder(points, normals, aabb)
        return emb.map(lambda x: x[0]) if single else emb

    def predict(self, emb_a: ShapeEmbedding, emb_b: ShapeEmbedding, pose_a, pose_b, **options) -> torch.Tensor:
        """Logits (> 0: colliding) of objects emb_a, emb_b at poses pose_a, pose_b (..., 7) [x, y, z,
        qw, qx, qy, qz] in a shared frame; the embeddings' leading dimensions broadcast against the
        poses'. numpy and float64 poses are cast once to the embeddings' dtype (the graph kept, so
        float64 poses that need a gradient get one). options: LOCC's `with_distance`."""
        like = emb_a.features
        return self._predict(emb_a, emb_b, _poses(pose_a, "pose_a", like), _poses(pose_b, "pose_b", like), **options)

    def predict_indexed(self, table: ShapeEmbedding, ids_a, ids_b, pose_a, pose_b, **options) -> torch.Tensor:
        """Logits of Q queries against a table of N embeddings (`encode` of N objects): object ids
        ids_a, ids_b (Q,) into the table, poses (Q, 7). Ids of any integer type and numpy or float64
        poses are taken, converted once. options: LOCC's `projection` (`project_table(table)`, to
        reuse across many batches against one table) and `with_distance`."""
        like = table.features
        return self._predict_indexed(table, mesh_ids(ids_a, "ids_a", like.device), mesh_ids(ids_b, "ids_b", like.device),
                                     _poses(pose_a, "pose_a", like), _poses(pose_b, "pose_b", like), **options)

    def forward(self, emb_a: ShapeEmbedding, emb_b: ShapeEmbedding, pose_a: torch.Tensor, pose_b: torch.Tensor):
        return self.predict(emb_a, emb_b, pose_a, pose_b)

    def project_table(self, table: ShapeEmbedding) -> TableProjection | None:
        """What `predict_indexed(..., projection=...)` can reuse across batches against `table`
        (None: nothing)."""
        return None


class LOCC(CollisionNet):
    """Local object crop collision net (LOCC §III): each object keeps the cells of its embedding
    that may overlap the other object's box, averages their features (a fixed-shape masked mean),
    and an MLP reads both crops with the relative pose and the kept cells' mean positions.

    Two additions for the contact boundary, both off by default (the paper's LOCC):
    - `cross_features` D > 0: a co-occupancy term. Each kept cell of A is looked up in B's
      embedding at the same place (B's grid at A's cell centre moved into B's
      frame, trilinearly interpolated); the max over A's kept cells of (query(A's cell) ⊙
      key(B there)), D features per side, tells the head whether some place holds geometry of
      both objects — the existential question collision asks, which a mean over a crop
      dilutes. query / key are linear maps of the F features, applied once per embedding (they
      commute with interpolation; a planner's table is projected once per call). Each query
      reads M³·8·D numbers per side: on a CPU this term costs far more than the crop (see the
      README's figures); a nearest-cell lookup was cheaper but lost 3 points on boundary pairs.
      `cross_cells` k > 0 reads only k of A's cells per query (fixed shapes: `torch.topk`), the
      kept cells where A has points first (`ShapeEmbedding.occupancy`), among them those nearest
      B's points (B's occupancy interpolated there), then those nearest B's box centre; cells
      that are not kept never count. 0 reads all M³ (k >= M³ reads them all too).
      `cross_sites` "points" probes at A's encoded surface points instead of its cell centres
      (`ShapeEmbedding.points`): query(A's grid interpolated at the point) ⊙ key(B's grid there),
      over the points inside B's box (`cross_points` k > 0: the k of them ranked as cross_cells
      ranks cells; 0: all). A point is where A's surface is, not a cell's centre up to half a cell
      away, so the max asks "is some point of A's surface inside B" (IS-CD's question, on A's
      surface) at the points' resolution. "both" gives the head both terms (2 × 2D features).
      None (the default) means "points" when cross_points > 0, else "cells".
    - `distance_head`: a second output regressing the clamped signed distance (trained jointly,
      see CollisionModule.beta), so the shared features must resolve how far the objects are
      from touching, not only which side they are on.
    - `surface_depth`: per side, how deep A's surface points reach behind B's surface as B's cloud
      places it (`ops.cloud_depth`: at each point of A near B, the point-to-plane distance to B's
      `depth_neighbours` nearest points within a radius of `depth_radius` × the larger point
      spacing of the two, weighted by nearness; the least over A's points, divided by the radius,
      so in [-1, 1], 1 where none is near). It reads the surfaces at the clouds' spacing, where
      the grids blur them over a cell: near contact (within a millimetre or two) the features
      alone cannot tell a touch from a gap. Deep overlaps, past the radius, stay with the other
      terms.
    """

    def __init__(self, encoder: ShapeEncoder, head_hidden: int = 256, cross_features: int = 0,
                 distance_head: bool = False, cross_cells: int = 0, cross_points: int = 0,
                 cross_sites: str | None = None, containment: bool = False, surface_depth: bool = False,
                 depth_radius: float = 0.7, depth_neighbours: int = 4):
        super().__init__(encoder, containment)
        f = encoder.features
        self.cross_features, self.distance_head = int(cross_features), bool(distance_head)
        self.cross_cells, self.cross_points = int(cross_cells), int(cross_points)
        if self.cross_features < 0:
            raise ValueError(f"cross_features: expected a count >= 0, got {cross_features}")
        if self.cross_cells < 0 or (self.cross_cells and not self.cross_features):
            raise ValueError(f"cross_cells: expected 0, or a count > 0 with cross_features > 0, got {cross_cells} "
                             f"(cross_features {cross_features})")
        if self.cross_points < 0 or (self.cross_points and not self.cross_features):
            raise ValueError(f"cross_points: expected 0, or a count > 0 with cross_features > 0, got {cross_points} "
                             f"(cross_features {cross_features})")
        sites = cross_sites or ("points" if self.cross_points else "cells")
        kinds = {"cells": ("cells",), "points": ("points",), "both": ("cells", "points")}
        if sites not in kinds or (sites != "cells" and not self.cross_features):
            raise ValueError(f"cross_sites: expected 'cells', 'points' or 'both' (not cells: with cross_features > 0), "
                             f"got {cross_sites!r} (cross_features {cross_features})")
        if (sites == "cells" and self.cross_points) or (sites == "points" and self.cross_cells):
            raise ValueError(f"cross_sites: {sites!r} leaves a count unused (cross_cells {cross_cells}, cross_points "
                             f"{cross_points})")
        self.cross_sites = sites
        self._kinds = kinds[sites] if self.cross_features else ()
        self.surface_depth = bool(surface_depth)
        if isinstance(depth_radius, bool) or not isinstance(depth_radius, (int, float)) or not depth_radius > 0:
            raise ValueError(f"depth_radius: expected a positive multiple of the point spacing, got {depth_radius!r}")
        if isinstance(depth_neighbours, bool) or not isinstance(depth_neighbours, int) or not 1 <= depth_neighbours <= 8:
            raise ValueError(f"depth_neighbours: expected 1 to 8 cloud points, got {depth_neighbours!r}")
        self.depth_radius, self.depth_neighbours = float(depth_radius), depth_neighbours
        if self.cross_features:
            self.query = nn.Linear(f, self.cross_features, bias=False)
            self.key = nn.Linear(f, self.cross_features, bias=False)
        # crops (2F) + relative pose (12) + mean kept-cell centres in the other's box units (6)
        # + kept fractions (2) + co-occupancy (2D per kind of site) + surface depths (2)
        self.head = _mlp(2 * f + 12 + 6 + 2 + 2 * self.cross_features * len(self._kinds) + 2 * self.surface_depth,
                         head_hidden, 2 if self.distance_head else 1)

    def _head(self, crop_a, crop_b, pose_a, pose_b, extra_a, extra_b, cross=(), with_distance=False, contained=None):
        """The head's logits (and distance), raised where `contained` (`containment.lift`; None: nowhere)."""
        if with_distance and not self.distance_head:
            raise ValueError("with_distance: this network was built without distance_head")
        rel = relative_pose_features(pose_a, pose_b)
        out = self.head(torch.cat([crop_a, crop_b, rel, extra_a[0], extra_b[0], extra_a[1], extra_b[1], *cross], -1))
        logits = containment.lift(out[..., 0], contained)
        return (logits, out[..., 1]) if with_distance else logits

    def _rows(self, features: torch.Tensor) -> torch.Tensor:
        """(..., F, M, M, M) embeddings -> (N·M³, F) cell rows, N the number of embeddings."""
        return features.flatten(-3).transpose(-1, -2).reshape(-1, self.encoder.features)

    def _cross(self, own: torch.Tensor, keys, coords: torch.Tensor, keep: torch.Tensor,
               occupancy: tuple | None = None, count: int = 0) -> torch.Tensor:
        """Co-occupancy of the own object's kept cells: own (..., C, D) projected own cells (or, with
        count, a function of the chosen sites' indices (..., k) -> (..., k, D)), keys a
        function of coords (N, P, C, 3) -> (N, P, C, D), the other objects' projected grids
        sampled there (`_grid_sampler`, or `grid_sample_rows` on a table), coords the own cells in
        the other box's units (P queries per grid; own and keep (..., C) broadcast to (N·P, C)).
        count > 0: only that many sites, ranked with occupancy = (own (..., C) points per site, a
        function of coords -> (N, P, C, 1), the other's points per cell interpolated there)."""
        if count:
            n, p = coords.shape[:2]
            cells = self._cells(coords, keep, *occupancy, count)  # (..., k) like keep's leading dimensions
            own = own(cells) if callable(own) else \
                own.expand(*keep.shape, own.shape[-1]).gather(-2, cells[..., None].expand(*cells.shape, own.shape[-1]))
            coords = coords.reshape(*keep.shape, 3).gather(-2, cells[..., None].expand(*cells.shape, 3))
            coords, keep = coords.reshape(n, p, -1, 3), keep.gather(-1, cells)
        sampled = keys(coords)
        return _masked_max(own * sampled.reshape(*keep.shape, sampled.shape[-1]), keep)

    @torch.no_grad()
    def _cells(self, coords: torch.Tensor, keep: torch.Tensor, own_occupancy: torch.Tensor,
               other_occupancy, count: int) -> torch.Tensor:
        """Indices (..., count) of the sites read per query, by priority: kept cells with the
        own object's points (4) + the other's occupancy interpolated there (other_occupancy, as
        `_cross` takes it), squashed to [0, 2) + nearness to the other box's centre in (0, 1];
        cells that are not kept rank last (-1)."""
        near = other_occupancy(coords).reshape(keep.shape)
        centre = coords.square().sum(-1).reshape(keep.shape)
        priority = 4.0 * (own_occupancy > 0) + 2.0 * near / (1.0 + near) + 1.0 / (1.0 + centre)
        priority = torch.where(keep, priority, -1.0)
        return priority.topk(min(count, keep.shape[-1]), -1, sorted=False).indices

    def _count(self, kind: str) -> int:
        """Sites read per query and side by the co-occupancy term of this kind (0: every one)."""
        return self.cross_points if kind == "points" else self.cross_cells

    def _point_queries(self, emb: ShapeEmbedding) -> torch.Tensor:
        """(..., K, D) A's projected grid interpolated at its own points (edge cells extend to the box
        faces, where the points that span the box lie)."""
        m, d = self.encoder.grid, self.cross_features
        rows = self.query(emb.features.flatten(-3).transpose(-1, -2))  # (..., M³, D)
        grids = rows.transpose(-1, -2).reshape(-1, d, m, m, m)
        k = emb.points.shape[-2]
        lo, hi = emb.aabb[..., 0:1, :], emb.aabb[..., 1:2, :]
        unit = (2 * (emb.points - lo) / (hi - lo).clamp_min(1e-6) - 1).expand(*rows.shape[:-2], k, 3)
        sampled = F.grid_sample(grids, unit.reshape(-1, k, 1, 1, 3).flip(-1), padding_mode="border",
                                align_corners=False)  # (N, D, K, 1, 1)
        return sampled.reshape(*rows.shape[:-2], d, k).transpose(-1, -2)

    def _occupancy(self, emb: ShapeEmbedding, arg: str) -> torch.Tensor | None:
        """emb's occupancy, checked where a term ranks sites by it, and its points where one probes them."""
        if emb.occupancy is None and any(self._count(kind) for kind in self._kinds):
            raise ValueError(f"{arg}.occupancy: cross_cells / cross_points rank sites by the encoder's points per "
                             f"cell; got an embedding without it (pass the encoder's ShapeEmbedding.occupancy along)")
        if "points" in self._kinds and emb.points is None:
            raise ValueError(f"{arg}.points: cross_sites 'points' probes the encoded surface points; got an embedding "
                             f"without them (pass the encoder's ShapeEmbedding.points along)")
        return emb.occupancy

    def _cross_grouped(self, own, other, pose_own, pose_other, keep, lead, kind="cells"):
        """`_cross` for embeddings that broadcast against the poses: the other's grid is sampled
        once per embedding for all the poses that share it (training's (B, 1) vs (B, G)). kind:
        the own sites, "cells" (kept where `keep`) or "points" (kept inside the other's box)."""
        m = self.encoder.grid
        if kind == "points" and self._fused_points(own.points, other.aabb, other.occupancy, pose_own, pose_other):
            return self._point_cross_grouped_fused(own, other, pose_own, pose_other, lead)
        if kind == "points":
            coords = point_coordinates(own.points, pose_own, pose_other, other.aabb)
            keep = (coords.abs() <= 1).all(-1).expand(*lead, coords.shape[-2])  # inside the other's box
            queries, own_occupancy = self._point_queries(own), coords.new_ones(coords.shape[-2])
        else:
            coords = grid_coordinates(own.aabb, m, pose_own, pose_other, other.aabb)
            queries, own_occupancy = self.query(own.features.flatten(-3).transpose(-1, -2)), own.occupancy
        sites = coords.shape[-2]
        coords = coords.expand(*lead, sites, 3)
        shared = other.features.shape[:-4]
        shared = (1,) * (len(lead) - len(shared)) + tuple(shared)
        split = len(lead)  # leading dims of `lead` up to `split` index the other's embeddings
        while split > 0 and shared[split - 1] == 1:
            split -= 1
        n = math.prod(lead[:split])
        grids = other.features.reshape(*shared, *other.features.shape[-4:]).expand(*lead[:split], *shared[split:],
                                                                                  *other.features.shape[-4:])
        keys = self.key(grids.reshape(n, self.encoder.features, -1).transpose(1, 2)).transpose(1, 2)
        occupancy, count = None, self._count(kind)
        if count:
            other_occupancy = other.occupancy.reshape(*shared, m**3).expand(*lead[:split], *shared[split:], m**3)
            occupancy = (own_occupancy, _grid_sampler(other_occupancy.reshape(n, 1, m, m, m)))
        return self._cross(queries, _grid_sampler(keys.reshape(n, -1, m, m, m)), coords.reshape(n, -1, sites, 3), keep,
                           occupancy, count)

    def _predict(self, emb_a: ShapeEmbedding, emb_b: ShapeEmbedding, pose_a: torch.Tensor, pose_b: torch.Tensor,
                 with_distance: bool = False):
        m = self.encoder.grid
        w_a, where_a, frac_a = local_crop(emb_a.aabb, m, pose_a, pose_b, emb_b.aabb)
        w_b, where_b, frac_b = local_crop(emb_b.aabb, m, pose_b, pose_a, emb_a.aabb)
        crop_a = torch.einsum("...fc,...c->...f", emb_a.features.flatten(-3), w_a)
        crop_b = torch.einsum("...fc,...c->...f", emb_b.features.flatten(-3), w_b)
        cross = ()
        if self.cross_features:
            self._occupancy(emb_a, "emb_a"), self._occupancy(emb_b, "emb_b")
            lead = torch.broadcast_shapes(emb_a.features.shape[:-4], emb_b.features.shape[:-4], pose_a.shape[:-1],
                                          pose_b.shape[:-1])
            cross = tuple(self._cross_grouped(own, other, p_own, p_other, keep, lead, kind) for kind in self._kinds
                          for own, other, p_own, p_other, keep in ((emb_a, emb_b, pose_a, pose_b, w_a > 0),
                                                                   (emb_b, emb_a, pose_b, pose_a, w_b > 0)))
        if self.surface_depth:
            cross = (*cross, self._surface_depth_grouped(emb_a, emb_b, pose_a, pose_b))
        return self._head(crop_a, crop_b, pose_a, pose_b, (where_a, frac_a), (where_b, frac_b), cross, with_distance,
                          self._contained(emb_a, emb_b, pose_a, pose_b))

    def project_table(self, table: ShapeEmbedding) -> TableProjection:
        """The table's projections that `predict_indexed` reads, for every batch against `table`
        (the query / key maps are applied once per embedding, not per query)."""
        m = self.encoder.grid
        rows = self._rows(table.features)
        depth = ()
        if self.surface_depth:
            self._depth_inputs(table, "table")
            depth = (*sort_by_cell(table.points, table.normals, table.aabb, DEPTH_GRID),
                     self._spacing(table).to(table.points.dtype))
        if not self.cross_features:
            return TableProjection(rows, None, None, None, None, *depth)
        queries = self.query(rows).view(-1, m**3, self.cross_features)
        points = self._point_queries(table).contiguous() if "points" in self._kinds else None
        occupancy = None if table.occupancy is None else table.occupancy.reshape(-1, 1).to(rows.dtype)
        return TableProjection(rows, queries, self.key(rows), points, occupancy, *depth)

    def _predict_indexed(self, table: ShapeEmbedding, ids_a: torch.Tensor, ids_b: torch.Tensor,
                         pose_a: torch.Tensor, pose_b: torch.Tensor, with_distance: bool = False,
                         projection: TableProjection | None = None):
        """Logits of queries (ids_a, ids_b, poses) against an embedding table. projection:
        `project_table(table)`, computed here when not given; pass it when sending many batches
        against one table, since computing it costs a pass over the whole table.

        The surface-point term runs fused (`locc_point_cooccupancy`, with its gradients); where the
        weights need no gradient (`torch.no_grad()`, or a frozen net such as the checker's, its
        poses needing one or not) the crop is pooled from the kept cells' rows (`locc_crop_pool`),
        else by an embedding bag; the containment test stops at a query's first probe outside
        (`dipoles_enclose`). Same logits and gradients as the torch composition, up to rounding."""
        m = self.encoder.grid
        cells = m**3
        if projection is None:
            projection = self.project_table(table)
        rows = projection.rows
        box_a, box_b = table.aabb[ids_a], table.aabb[ids_b]
        crop_dtype = torch.promote_types(table.aabb.dtype, torch.promote_types(pose_a.dtype, pose_b.dtype))
        if ("cells" not in self._kinds and rows.dtype == crop_dtype
                and not (torch.is_grad_enabled() and rows.requires_grad)):
            # Each query reads only its kept cells' rows (`locc_crop_pool`); the cell masks are
            # not formed (no co-occupancy term reads them). The ids have indexed the boxes: no
            # second check (a host sync on a GPU).
            with trusted_indices():
                crop_a, where_a, frac_a = local_crop(box_a, m, pose_a, pose_b, box_b, pool=(rows, ids_a))
                crop_b, where_b, frac_b = local_crop(box_b, m, pose_b, pose_a, box_a, pool=(rows, ids_b))
            keep_a = keep_b = None
        else:
            # Masked mean pooling as an embedding bag over the table's cells: (N·C, F) rows, each
            # query summing its kept cells with their weights — no per-query copy of an embedding.
            offsets = torch.arange(cells, device=ids_a.device)
            w_a, where_a, frac_a = local_crop(box_a, m, pose_a, pose_b, box_b)
            w_b, where_b, frac_b = local_crop(box_b, m, pose_b, pose_a, box_a)
            crop_a = F.embedding_bag(ids_a[:, None] * cells + offsets, rows, per_sample_weights=w_a.to(rows.dtype), mode="sum")
            crop_b = F.embedding_bag(ids_b[:, None] * cells + offsets, rows, per_sample_weights=w_b.to(rows.dtype), mode="sum")
            keep_a, keep_b = w_a > 0, w_b > 0
        cross = ()
        if self.cross_features:
            # Projected once per table (`projection`); each query samples its other's grid in place
            # in the table (`grid_sample_rows`), never a copy of it.
            queries, keys, point_queries = projection.queries, projection.keys, projection.point_queries
            # Slices of CROSS_CHUNK queries bound the memory of the sites' samples whatever the
            # caller's batch (a fixed number of slices for a given batch).
            sides = ((ids_a, ids_b, pose_a, pose_b, keep_a), (ids_b, ids_a, pose_b, pose_a, keep_b))
            occupancy = self._occupancy(table, "table")

            def one_slice(kind, e, i_own, i_other, p_own, p_other, keep):
                count = self._count(kind)
                if kind == "points":
                    coords = point_coordinates(table.points[i_own[e]], p_own[e], p_other[e], table.aabb[i_other[e]])
                    keep, k = (coords.abs() <= 1).all(-1), point_queries.shape[1]
                    # With a count, only the chosen points' queries are read from the table.
                    own = (lambda sites: point_queries.reshape(-1, point_queries.shape[-1])[(i_own[e] * k)[:, None] + sites]) \
                        if count else point_queries[i_own[e]]
                    own_occupancy = coords.new_ones(coords.shape[-2])
                else:
                    coords = grid_coordinates(table.aabb[i_own[e]], m, p_own[e], p_other[e], table.aabb[i_other[e]])
                    own, keep = queries[i_own[e]], keep[e]
                    own_occupancy = occupancy[i_own[e]] if count else None
                ranks = (own_occupancy, _row_sampler(projection.occupancy, m, i_other[e])) if count else None
                return self._cross(own, _row_sampler(keys, m, i_other[e]), coords[:, None], keep, ranks, count)

            def one_term(kind, side):
                if kind == "points" and self._fused_points(table.points, table.aabb, projection.occupancy, pose_a,
                                                           pose_b, projection.point_queries, projection.keys):
                    i_own, i_other, p_own, p_other = side[:4]
                    return self._point_cross_fused(table.points.contiguous(), projection.point_queries,
                                                   projection.keys, projection.occupancy.reshape(-1), i_own, i_other,
                                                   p_own, p_other, table.aabb[i_other])
                return torch.cat([one_slice(kind, e, *side)
                                  for e in (slice(s, s + CROSS_CHUNK) for s in range(0, max(len(side[0]), 1), CROSS_CHUNK))])

            cross = tuple(one_term(kind, side) for kind in self._kinds for side in sides)
        if self.surface_depth:
            cross = (*cross, self._surface_depth(projection.depth_points, projection.depth_normals,
                                                 projection.depth_starts, projection.spacing, table.aabb, ids_a,
                                                 ids_b, pose_a, pose_b))
        return self._head(crop_a, crop_b, pose_a, pose_b, (where_a, frac_a), (where_b, frac_b), cross, with_distance,
                          self._contained_indexed(table, ids_a, ids_b, pose_a, pose_b))

    @staticmethod
    def _depth_inputs(emb: ShapeEmbedding, arg: str) -> None:
        for name in ("points", "normals", "dipoles"):
            if getattr(emb, name) is None:
                raise ValueError(f"{arg}.{name}: surface_depth reads the encoded points, their normals and the "
                                 f"dipoles' areas; got an embedding without {name} (pass the encoder's "
                                 f"ShapeEmbedding along whole)")

    @staticmethod
    def _spacing(emb: ShapeEmbedding) -> torch.Tensor:
        """(...,) each object's point spacing: the square root of its area per point (the surface's
        area summed over its dipoles' patches)."""
        area = emb.dipoles[..., 3:6].norm(dim=-1).sum(-1)
        return (area / emb.points.shape[-2]).sqrt()

    def _surface_depth(self, points, normals, starts, spacing, aabb, ids_a, ids_b, pose_a, pose_b) -> torch.Tensor:
        """(Q, 2) the surface depths of A into B and B into A, in units of the query's radius
        (depth_radius × the larger of the two objects' point spacings: a sparse own cloud needs
        the reach to have a point near the other's surface), for queries (ids, poses (Q, 7))
        against a table: points, normals (N, K, 3) and starts (N, M³ + 1) from `sort_by_cell` over
        the boxes aabb (N, 2, 3), spacing (N,)."""
        radius = self.depth_radius * torch.maximum(spacing[ids_a], spacing[ids_b])
        out = []
        for own, other, p_own, p_other in ((ids_a, ids_b, pose_a, pose_b), (ids_b, ids_a, pose_b, pose_a)):
            rotation, translation = frame_into(p_own, p_other)
            with trusted_indices():  # ids that have indexed the table, or made here
                depth = cloud_depth(points, normals, starts, own, other, radius,
                                    rotation.to(points.dtype).contiguous(), translation.to(points.dtype).contiguous(),
                                    aabb[other].contiguous(), self.depth_neighbours)
            out.append(depth / radius)
        return torch.stack(out, -1)

    def _surface_depth_grouped(self, emb_a: ShapeEmbedding, emb_b: ShapeEmbedding, pose_a, pose_b) -> torch.Tensor:
        """(*lead, 2) `_surface_depth` for embeddings that broadcast against the poses: both
        embeddings' objects as one table, each query's ids broadcast from it."""
        self._depth_inputs(emb_a, "emb_a"), self._depth_inputs(emb_b, "emb_b")
        k = emb_a.points.shape[-2]
        if emb_b.points.shape[-2] != k:
            raise ValueError(f"emb_a.points, emb_b.points: surface_depth reads both objects as one table, so expected "
                             f"the same number of points, got {k} and {emb_b.points.shape[-2]}")
        shape_a, shape_b = emb_a.points.shape[:-2], emb_b.points.shape[:-2]
        lead = torch.broadcast_shapes(shape_a, shape_b, pose_a.shape[:-1], pose_b.shape[:-1])
        n_a, n_b = math.prod(shape_a), math.prod(shape_b)
        both = lambda name, width: torch.cat([getattr(emb_a, name).reshape(n_a, *width),
                                              getattr(emb_b, name).reshape(n_b, *width)])
        aabb = both("aabb", (2, 3))
        points, normals, starts = sort_by_cell(both("points", (k, 3)), both("normals", (k, 3)), aabb, DEPTH_GRID)
        spacing = torch.cat([self._spacing(emb_a).reshape(n_a), self._spacing(emb_b).reshape(n_b)])
        device = points.device
        ids_a = torch.arange(n_a, device=device).reshape(shape_a).expand(lead).reshape(-1)
        ids_b = (n_a + torch.arange(n_b, device=device)).reshape(shape_b).expand(lead).reshape(-1)
        depth = self._surface_depth(points, normals, starts, spacing.to(points.dtype), aabb, ids_a, ids_b,
                                    pose_a.expand(*lead, 7).reshape(-1, 7), pose_b.expand(*lead, 7).reshape(-1, 7))
        return depth.reshape(*lead, 2)

    @staticmethod
    def _fused_points(points, aabb, occupancy, *others) -> bool:
        """Whether the surface-point term can run fused (`locc_point_cooccupancy`): one dtype, and no
        gradient wanted for the points, boxes or occupancy (the op gives the poses, the point
        queries and the keys theirs)."""
        return (occupancy is not None
                and all(x.dtype == points.dtype for x in (aabb, occupancy, *others))
                and not (torch.is_grad_enabled() and any(x.requires_grad for x in (points, aabb, occupancy))))

    def _point_cross_fused(self, points, point_queries, keys, occupancy, ids_own, ids_other, pose_own, pose_other,
                           aabb_other) -> torch.Tensor:
        """(Q, D) the surface-point co-occupancy of queries against a table (points (N, K, 3),
        point_queries (N, K, D), keys (N·M³, D), occupancy (N·M³,); ids, poses (Q, 7) and the other
        boxes (Q, 2, 3) per query), by the fused op in slices of FUSED_CHUNK."""
        count = self.cross_points or points.shape[-2]  # 0: every kept point
        out = []
        for s in range(0, max(len(ids_own), 1), FUSED_CHUNK):
            e = slice(s, s + FUSED_CHUNK)
            rotation, translation = frame_into(pose_own[e], pose_other[e])
            with trusted_indices():  # ids made here, or that have already indexed the table
                out.append(locc_point_cooccupancy(points, point_queries, keys, occupancy, self.encoder.grid,
                                                  ids_own[e], ids_other[e], rotation.contiguous(),
                                                  translation.contiguous(), aabb_other[e].contiguous(), count))
        return torch.cat(out)

    def _point_cross_grouped_fused(self, own, other, pose_own, pose_other, lead) -> torch.Tensor:
        """(*lead, D) `_cross_grouped`'s surface-point term by the fused op: the embeddings as one
        table (their common leading dimensions flattened; an embedding that broadcasts against
        the other's is expanded to them), each query's id broadcast from it."""
        m, d = self.encoder.grid, self.cross_features
        k = own.points.shape[-2]
        table = torch.broadcast_shapes(own.points.shape[:-2], other.features.shape[:-4])
        n = math.prod(table)
        ids = torch.arange(n, device=pose_own.device).reshape(table).expand(lead).reshape(-1)
        keys = self.key(other.features.flatten(-3).transpose(-1, -2)).expand(*table, m**3, d).reshape(n * m**3, d)
        occupancy = other.occupancy.expand(*table, m**3).reshape(-1).to(keys.dtype)
        points = own.points.expand(*table, k, 3).reshape(n, k, 3)
        queries = self._point_queries(own).expand(*table, k, d).reshape(n, k, d)
        out = self._point_cross_fused(
            points.contiguous(), queries.contiguous(), keys.contiguous(), occupancy.contiguous(), ids, ids,
            pose_own.expand(*lead, 7).reshape(-1, 7), pose_other.expand(*lead, 7).reshape(-1, 7),
            other.aabb.expand(*lead, 2, 3).reshape(-1, 2, 3))
        return out.reshape(*lead, d)


class GlobalOCN(CollisionNet):
    """Global-OCN (the LOCC paper's SceneCollisionNet-style baseline): each embedding is averaged
    over all cells; an MLP reads both with the boxes' relative placement (centre offset in A's
    frame and rotation) and sizes, lengths in units of the pair's mean box diagonal."""

    def __init__(self, encoder: ShapeEncoder, head_hidden: int = 256, containment: bool = False):
        super().__init__(encoder, containment)
        self.head = _mlp(2 * encoder.features + 12 + 6, head_hidden)

    def _predict_indexed(self, table: ShapeEmbedding, ids_a: torch.Tensor, ids_b: torch.Tensor,
                         pose_a: torch.Tensor, pose_b: torch.Tensor, projection: None = None) -> torch.Tensor:
        pooled = table.features.flatten(-3).mean(-1, keepdim=True)[..., None, None]
        logits = self._logits(ShapeEmbedding(pooled[ids_a], table.aabb[ids_a]),
                              ShapeEmbedding(pooled[ids_b], table.aabb[ids_b]), pose_a, pose_b)
        return containment.lift(logits, self._contained_indexed(table, ids_a, ids_b, pose_a, pose_b))

    def _predict(self, emb_a: ShapeEmbedding, emb_b: ShapeEmbedding, pose_a: torch.Tensor, pose_b: torch.Tensor):
        return containment.lift(self._logits(emb_a, emb_b, pose_a, pose_b), self._contained(emb_a, emb_b, pose_a, pose_b))

    def _logits(self, emb_a: ShapeEmbedding, emb_b: ShapeEmbedding, pose_a: torch.Tensor, pose_b: torch.Tensor):
        ga = emb_a.features.flatten(-3).mean(-1)
        gb = emb_b.features.flatten(-3).mean(-1)
        # Raw metres (a few cm) would leave the MLP's inputs, and so its logits, nearly constant at
        # initialisation, and Adam had not left chance after hundreds of steps.
        placement = box_placement_features(emb_a.aabb, emb_b.aabb, pose_a, pose_b)
        shape = placement.shape[:-1]
        x = torch.cat([ga.expand(*shape, -1), gb.expand(*shape, -1), placement], -1)
        return self.head(x).squeeze(-1)

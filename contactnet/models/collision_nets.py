"""Collision networks over shape embeddings: LOCC (local crops) and Global-OCN (global pooling).

Both share the inference API: `encode(points, normals, aabb)` once per object, then
- `predict(emb_a, emb_b, pose_a, pose_b) -> logits`: embeddings broadcast against the poses'
  leading dimensions, e.g. embeddings (B, 1, ...) with poses (B, G, 7) score G poses per object
  pair without copying (training);
- `predict_indexed(table, ids_a, ids_b, pose_a, pose_b) -> logits`: a table of N cached
  embeddings and (Q,) object ids per query, never copying an embedding per query (planners).
Logit > 0 means "colliding".
"""

import torch
import torch.nn.functional as F
from torch import nn

from contactnet.models.encoder import ShapeEmbedding, ShapeEncoder
from contactnet.models.geometry import grid_coordinates, local_crop, relative_pose_features, trilinear_corners


def _mlp(cin: int, hidden: int, outputs: int = 1) -> nn.Sequential:
    return nn.Sequential(nn.Linear(cin, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                         nn.Linear(hidden, outputs))


def _masked_max(values: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """Max over the cell axis (-2) of values (..., C, D) where keep (..., C) holds; 0 if none does."""
    lowest = torch.finfo(values.dtype).min
    best = torch.where(keep[..., None], values, lowest).amax(-2)
    return torch.where(keep.any(-1, keepdim=True), best, torch.zeros_like(best))


class CollisionNet(nn.Module):
    def __init__(self, encoder: ShapeEncoder):
        super().__init__()
        self.encoder = encoder

    def encode(self, points: torch.Tensor, normals: torch.Tensor, aabb: torch.Tensor | None = None) -> ShapeEmbedding:
        return self.encoder(points, normals, aabb)

    def forward(self, emb_a: ShapeEmbedding, emb_b: ShapeEmbedding, pose_a: torch.Tensor, pose_b: torch.Tensor):
        return self.predict(emb_a, emb_b, pose_a, pose_b)


class LOCC(CollisionNet):
    """Local object crop collision net (LOCC §III): each object keeps the cells of its embedding
    that may overlap the other object's box, averages their features (a fixed-shape masked mean),
    and an MLP reads both crops with the relative pose and the kept cells' mean positions.

    Two additions for the contact boundary, both off by default (the paper's LOCC):
    - `cross_features` D > 0: a co-occupancy term. Each kept cell of A is looked up in B's
      embedding at the same place (B's grid trilinearly interpolated at the cell centre moved into
      B's frame); the max over kept cells of (query(A's cell) ⊙ key(B there)), D features per
      side, tells the head whether some place holds geometry of both objects — the existential
      question collision asks, which a mean over a crop dilutes. query / key are linear maps of
      the F features (D ≪ F keeps the lookups cheap: they commute with interpolation, so a
      planner's embedding table is projected once).
    - `distance_head`: a second output regressing the clamped signed distance (trained jointly,
      see CollisionModule.beta), so the shared features must resolve how far the objects are
      from touching, not only which side they are on.
    """

    def __init__(self, encoder: ShapeEncoder, head_hidden: int = 256, cross_features: int = 0,
                 distance_head: bool = False):
        super().__init__(encoder)
        f = encoder.features
        self.cross_features, self.distance_head = int(cross_features), bool(distance_head)
        if self.cross_features < 0:
            raise ValueError(f"cross_features: expected a count >= 0, got {cross_features}")
        if self.cross_features:
            self.query = nn.Linear(f, self.cross_features, bias=False)
            self.key = nn.Linear(f, self.cross_features, bias=False)
        # crops (2F) + relative pose (12) + mean kept-cell centres in the other's box units (6)
        # + kept fractions (2) + co-occupancy (2D)
        self.head = _mlp(2 * f + 12 + 6 + 2 + 2 * self.cross_features, head_hidden, 2 if self.distance_head else 1)

    def _head(self, crop_a, crop_b, pose_a, pose_b, extra_a, extra_b, cross=(), with_distance=False):
        rel = relative_pose_features(pose_a, pose_b)
        out = self.head(torch.cat([crop_a, crop_b, rel, extra_a[0], extra_b[0], extra_a[1], extra_b[1], *cross], -1))
        if with_distance:
            if not self.distance_head:
                raise ValueError("with_distance: this network was built without distance_head")
            return out[..., 0], out[..., 1]
        return out[..., 0]

    def _cells(self, features: torch.Tensor, projection: nn.Linear) -> torch.Tensor:
        """(..., F, M, M, M) -> (..., M³, D) projected cell features."""
        return projection(features.flatten(-3).transpose(-1, -2))

    def _cross_broadcast(self, emb_own, emb_other, pose_own, pose_other, keep):
        """Co-occupancy of the own object's kept cells, leading dimensions broadcast (training)."""
        coords = grid_coordinates(emb_own.aabb, self.encoder.grid, pose_own, pose_other, emb_other.aabb)
        index, weight = trilinear_corners(coords, self.encoder.grid)  # (..., C, 8)
        keys = self._cells(emb_other.features, self.key)  # (..., C, D)
        shape = (*index.shape[:-1], self.cross_features)
        keys = keys.expand(*torch.broadcast_shapes(keys.shape[:-2], index.shape[:-2]), *keys.shape[-2:])
        sampled = sum(weight[..., k, None] * keys.gather(-2, index[..., k, None].expand(shape)) for k in range(8))
        return _masked_max(self._cells(emb_own.features, self.query) * sampled, keep)

    def predict(self, emb_a: ShapeEmbedding, emb_b: ShapeEmbedding, pose_a: torch.Tensor, pose_b: torch.Tensor,
                with_distance: bool = False):
        m = self.encoder.grid
        w_a, where_a, frac_a = local_crop(emb_a.aabb, m, pose_a, pose_b, emb_b.aabb)
        w_b, where_b, frac_b = local_crop(emb_b.aabb, m, pose_b, pose_a, emb_a.aabb)
        crop_a = torch.einsum("...fc,...c->...f", emb_a.features.flatten(-3), w_a)
        crop_b = torch.einsum("...fc,...c->...f", emb_b.features.flatten(-3), w_b)
        cross = ()
        if self.cross_features:
            cross = (self._cross_broadcast(emb_a, emb_b, pose_a, pose_b, w_a > 0),
                     self._cross_broadcast(emb_b, emb_a, pose_b, pose_a, w_b > 0))
        return self._head(crop_a, crop_b, pose_a, pose_b, (where_a, frac_a), (where_b, frac_b), cross, with_distance)

    def _cross_indexed(self, queries, keys, table, ids_own, ids_other, pose_own, pose_other, keep):
        """Co-occupancy from a table: queries / keys are the table's projected cells as (N·C, D)
        rows, gathered per query with an embedding bag (no per-query copy of an embedding)."""
        m = self.encoder.grid
        cells = m**3
        coords = grid_coordinates(table.aabb[ids_own], m, pose_own, pose_other, table.aabb[ids_other])
        index, weight = trilinear_corners(coords, m)  # (Q, C, 8)
        rows = (ids_other[:, None, None] * cells + index).reshape(-1, 8)
        sampled = F.embedding_bag(rows, keys, per_sample_weights=weight.reshape(-1, 8).to(keys.dtype), mode="sum")
        own = F.embedding(ids_own[:, None] * cells + torch.arange(cells, device=ids_own.device), queries)
        return _masked_max(own * sampled.view(*own.shape), keep)

    def predict_indexed(self, table: ShapeEmbedding, ids_a: torch.Tensor, ids_b: torch.Tensor,
                        pose_a: torch.Tensor, pose_b: torch.Tensor, with_distance: bool = False):
        # Masked mean pooling as an embedding bag over the table's cells: (N·C, F) rows, each
        # query summing its kept cells with their weights — no per-query copy of an embedding.
        m = self.encoder.grid
        cells = m**3
        rows = table.features.flatten(-3).transpose(1, 2).reshape(-1, self.encoder.features)
        offsets = torch.arange(cells, device=ids_a.device)
        w_a, where_a, frac_a = local_crop(table.aabb[ids_a], m, pose_a, pose_b, table.aabb[ids_b])
        w_b, where_b, frac_b = local_crop(table.aabb[ids_b], m, pose_b, pose_a, table.aabb[ids_a])
        crop_a = F.embedding_bag(ids_a[:, None] * cells + offsets, rows, per_sample_weights=w_a.to(rows.dtype), mode="sum")
        crop_b = F.embedding_bag(ids_b[:, None] * cells + offsets, rows, per_sample_weights=w_b.to(rows.dtype), mode="sum")
        cross = ()
        if self.cross_features:
            queries = self.query(rows)  # projected once per call: the table is N·C rows
            keys = self.key(rows)
            cross = (self._cross_indexed(queries, keys, table, ids_a, ids_b, pose_a, pose_b, w_a > 0),
                     self._cross_indexed(queries, keys, table, ids_b, ids_a, pose_b, pose_a, w_b > 0))
        return self._head(crop_a, crop_b, pose_a, pose_b, (where_a, frac_a), (where_b, frac_b), cross, with_distance)


class GlobalOCN(CollisionNet):
    """Global-OCN (the LOCC paper's SceneCollisionNet-style baseline): each embedding is averaged
    over all cells; an MLP reads both with the relative pose and both boxes' sizes."""

    def __init__(self, encoder: ShapeEncoder, head_hidden: int = 256):
        super().__init__(encoder)
        self.head = _mlp(2 * encoder.features + 12 + 6, head_hidden)

    def predict_indexed(self, table: ShapeEmbedding, ids_a: torch.Tensor, ids_b: torch.Tensor,
                        pose_a: torch.Tensor, pose_b: torch.Tensor) -> torch.Tensor:
        pooled = ShapeEmbedding(table.features.flatten(-3).mean(-1, keepdim=True)[..., None, None], table.aabb)
        return self.predict(ShapeEmbedding(pooled.features[ids_a], table.aabb[ids_a]),
                            ShapeEmbedding(pooled.features[ids_b], table.aabb[ids_b]), pose_a, pose_b)

    def predict(self, emb_a: ShapeEmbedding, emb_b: ShapeEmbedding, pose_a: torch.Tensor, pose_b: torch.Tensor):
        ga = emb_a.features.flatten(-3).mean(-1)
        gb = emb_b.features.flatten(-3).mean(-1)
        size_a = emb_a.aabb[..., 1, :] - emb_a.aabb[..., 0, :]
        size_b = emb_b.aabb[..., 1, :] - emb_b.aabb[..., 0, :]
        rel = relative_pose_features(pose_a, pose_b)
        shape = rel.shape[:-1]
        x = torch.cat([ga.expand(*shape, -1), gb.expand(*shape, -1), rel, size_a.expand(*shape, -1),
                       size_b.expand(*shape, -1)], -1)
        return self.head(x).squeeze(-1)

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
from contactnet.models.geometry import local_crop, relative_pose_features


def _mlp(cin: int, hidden: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(cin, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))


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
    and an MLP reads both crops with the relative pose and the kept cells' mean positions."""

    def __init__(self, encoder: ShapeEncoder, head_hidden: int = 256):
        super().__init__(encoder)
        f = encoder.features
        # crops (2F) + relative pose (12) + mean kept-cell centres in the other's box units (6)
        # + kept fractions (2)
        self.head = _mlp(2 * f + 12 + 6 + 2, head_hidden)

    def _head(self, crop_a, crop_b, pose_a, pose_b, extra_a, extra_b):
        rel = relative_pose_features(pose_a, pose_b)
        return self.head(torch.cat([crop_a, crop_b, rel, extra_a[0], extra_b[0], extra_a[1], extra_b[1]], -1)).squeeze(-1)

    def predict(self, emb_a: ShapeEmbedding, emb_b: ShapeEmbedding, pose_a: torch.Tensor, pose_b: torch.Tensor):
        m = self.encoder.grid
        w_a, where_a, frac_a = local_crop(emb_a.aabb, m, pose_a, pose_b, emb_b.aabb)
        w_b, where_b, frac_b = local_crop(emb_b.aabb, m, pose_b, pose_a, emb_a.aabb)
        crop_a = torch.einsum("...fc,...c->...f", emb_a.features.flatten(-3), w_a)
        crop_b = torch.einsum("...fc,...c->...f", emb_b.features.flatten(-3), w_b)
        return self._head(crop_a, crop_b, pose_a, pose_b, (where_a, frac_a), (where_b, frac_b))

    def predict_indexed(self, table: ShapeEmbedding, ids_a: torch.Tensor, ids_b: torch.Tensor,
                        pose_a: torch.Tensor, pose_b: torch.Tensor) -> torch.Tensor:
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
        return self._head(crop_a, crop_b, pose_a, pose_b, (where_a, frac_a), (where_b, frac_b))


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

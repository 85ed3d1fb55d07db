"""Embedding tables of an object set for indexed queries, in its own frame and in test-time frames.

A collision net scores queries against a table of cached embeddings (`predict_indexed`). With
test-time frames, each object is also encoded turned by the fixed rotations `frame_quaternions`
(`reframe_object`) and a query's logit is the mean over the frames, its poses moved into each
frame. `CollisionChecker(frames=F)` and the paper benchmarks' `--frames F` both score this way.
"""

from typing import NamedTuple

import torch

from contactnet.geometry.frames import reframe_object
from contactnet.geometry.poses import compose_poses
from contactnet.models.collision_nets import CollisionNet, TableProjection
from contactnet.models.encoder import ShapeEmbedding

__all__ = ["FrameTable", "encode_table", "frame_logits", "frame_tables"]

ENCODE_CHUNK = 64  # objects per encoder pass


class FrameTable(NamedTuple):
    """One frame's table: the embeddings, the net's `project_table` of them, and the (N, 7) poses
    that move a query's object poses into this frame (None: the objects' own frame)."""

    table: ShapeEmbedding
    projection: TableProjection | None
    inverse: torch.Tensor | None


@torch.no_grad()
def encode_table(net: CollisionNet, points: torch.Tensor, normals: torch.Tensor, aabb: torch.Tensor) -> ShapeEmbedding:
    """points, normals (N, K, 3) and aabb (N, 2, 3) of N objects -> their (N, ...) embedding table."""
    parts = [net.encode(points[i:i + ENCODE_CHUNK], normals[i:i + ENCODE_CHUNK], aabb[i:i + ENCODE_CHUNK])
             for i in range(0, points.shape[0], ENCODE_CHUNK)]
    return ShapeEmbedding(*(None if x[0] is None else torch.cat(x) for x in zip(*parts)))


@torch.no_grad()
def frame_tables(net: CollisionNet, points: torch.Tensor, normals: torch.Tensor, aabb: torch.Tensor,
                 vertices: list[torch.Tensor], quaternions: torch.Tensor) -> list[FrameTable]:
    """One table per frame of `quaternions` (F, 4) (`frame_quaternions(F)`, whose first is the
    identity): the objects as given, then turned by the others. points, normals (N, K, 3), aabb
    (N, 2, 3) and each object's mesh vertices (V_i, 3), all in the objects' frames, one dtype and
    device."""
    out = []
    for i, q in enumerate(quaternions):
        inverse = None
        if i:
            turned = [reframe_object(p, n, v, q.to(points)) for p, n, v in zip(points, normals, vertices)]
            p, n, box, inverse = (torch.stack(t) for t in zip(*turned))
        else:
            p, n, box = points, normals, aabb
        table = encode_table(net, p, n, box)
        out.append(FrameTable(table, net.project_table(table), inverse))
    return out


def frame_logits(net: CollisionNet, tables: list[FrameTable], ids_a: torch.Tensor, ids_b: torch.Tensor,
                 poses_a: torch.Tensor, poses_b: torch.Tensor, chunk: int) -> torch.Tensor:
    """(Q,) logits, each the mean over `tables` of the net's logit in that frame, in chunks of
    `chunk` queries."""
    total = 0.0
    for table, projection, inverse in tables:
        pa, pb = (poses_a, poses_b) if inverse is None else \
            (compose_poses(poses_a, inverse[ids_a]), compose_poses(poses_b, inverse[ids_b]))
        outs = [net.predict_indexed(table, ids_a[s:s + chunk], ids_b[s:s + chunk], pa[s:s + chunk], pb[s:s + chunk],
                                    projection=projection)
                for s in range(0, ids_a.shape[0], chunk)]
        total = total + (outs[0] if len(outs) == 1 else torch.cat(outs))
    return total / len(tables)

"""UCF-GJK (LOCC §IV): each object a set of convex pieces, a fixed-iteration GJK on every pair of
pieces of the two objects, collision if any pair collides. Cost grows with pieces² × iterations,
and so does accuracy: the baseline's trade-off that Fig. 6 sweeps."""

import torch

from contactnet.baselines.convex_pieces import ConvexPieces
from contactnet.baselines.gjk import gjk_piece_pairs
from contactnet.geometry.poses import compose_poses, invert_poses, normalize_poses, transform_points


class UcfGjk:
    """Batched UCF-GJK over an object set's padded convex pieces.

    pieces: ConvexPieces (N, P, V, 3) in the objects' frames; iterations: GJK rounds per piece
    pair; chunk: queries per pass (bounds memory at Q·P²·V floats).
    """

    def __init__(self, pieces: ConvexPieces, iterations: int = 16, chunk: int = 2048):
        if int(iterations) < 1 or int(chunk) < 1:
            raise ValueError(f"iterations, chunk: expected >= 1, got {iterations}, {chunk}")
        self.pieces, self.iterations, self.chunk = pieces, int(iterations), int(chunk)

    def to(self, device) -> "UcfGjk":
        return UcfGjk(self.pieces.to(device), self.iterations, self.chunk)

    @torch.no_grad()
    def __call__(self, ids_a: torch.Tensor, ids_b: torch.Tensor, poses_a: torch.Tensor,
                 poses_b: torch.Tensor) -> torch.Tensor:
        """ids (Q,) object ids, poses (Q, 7) world poses -> (Q,) bool collision."""
        verts = self.pieces.vertices
        out = torch.empty(len(ids_a), dtype=torch.bool, device=verts.device)
        rel = compose_poses(invert_poses(normalize_poses(poses_a.to(verts), "poses_a")),
                            normalize_poses(poses_b.to(verts), "poses_b"))  # B in A's frame
        ids_a, ids_b = ids_a.to(verts.device), ids_b.to(verts.device)
        for s in range(0, len(ids_a), self.chunk):
            e = slice(s, s + self.chunk)
            a = verts[ids_a[e]]  # (q, P, V, 3)
            b = transform_points(rel[e, None, None, :], verts[ids_b[e]])
            hit = gjk_piece_pairs(a, b, self.iterations)  # (q, P, P)
            out[e] = hit.flatten(1).any(1)
        return out

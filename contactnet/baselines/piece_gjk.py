"""The CPU way to run the convex-pieces baseline: CoACD pieces as for UCF-GJK, but the piece pairs
whose bounding spheres are apart are skipped, and the others go to a branching GJK that stops as
soon as it separates them or finds them overlapping (`ops.hulls_separated`, C++, float64). It pads
nothing, so the pieces' hulls need no vertex cap (a cap shrinks thin parts' hulls, which then miss
collisions). UCF-GJK's fixed shapes suit a GPU batch; on a CPU core this is what a collision library
does with a convex decomposition, and it is the peer a CPU user compares against."""

import torch

from contactnet.baselines.convex_pieces import ConvexPieces
from contactnet.geometry.convex_hulls import build_convex_hulls
from contactnet.geometry.poses import normalize_poses, quaternion_to_matrix
from contactnet.ops import hulls_separated
from contactnet.ops._checks import pair_query_args


class PieceGjk:
    """Collision of two objects given as unions of convex pieces: some pair of their pieces is not
    certified apart. pieces: ConvexPieces (N, P, V, 3) (object frames, padded; counts (N,) real pieces).

    A pair GJK cannot separate within `max_iterations` counts as colliding, as in UCF-GJK. Its errors
    are the pieces': hulls fatter than the object give false alarms near contact, and CoACD pieces
    (capped in vertices) that do not cover a thin part miss collisions there."""

    def __init__(self, pieces: ConvexPieces, max_iterations: int = 64):
        verts, counts = pieces.vertices.detach().cpu().double(), pieces.counts.cpu()
        n, p = verts.shape[:2]
        self.hulls = build_convex_hulls([verts[i, j] for i in range(n) for j in range(int(counts[i]))])
        self.max_iterations = int(max_iterations)
        # (N, P) hull row of each object's piece (-1 past its count), and each piece's bounding
        # sphere (centre of its box, radius to its farthest vertex).
        first = torch.cumsum(counts, 0) - counts
        slot = torch.arange(p)
        self.piece_hull = torch.where(slot < counts[:, None], first[:, None] + slot, -1)
        lo, hi = verts.amin(2), verts.amax(2)
        self.centre = (lo + hi) / 2
        self.radius = (verts - self.centre[:, :, None]).norm(dim=-1).amax(2)

    def to(self, device) -> "PieceGjk":
        """A copy on `device` (the GJK has a CUDA kernel too, a thread per piece pair)."""
        out = object.__new__(PieceGjk)
        out.hulls, out.max_iterations = self.hulls.to(device), self.max_iterations
        out.piece_hull, out.centre, out.radius = (t.to(device) for t in (self.piece_hull, self.centre, self.radius))
        return out

    @torch.no_grad()
    def __call__(self, ids_a: torch.Tensor, ids_b: torch.Tensor, poses_a: torch.Tensor,
                 poses_b: torch.Tensor) -> torch.Tensor:
        """ids (Q,) object rows, poses (Q, 7) world poses -> (Q,) bool collision, on this
        checker's device."""
        device, n = self.centre.device, self.piece_hull.shape[0]
        ids_a, ids_b, pa, pb = pair_query_args(n, device, torch.float64, ids_a, ids_b, poses_a, poses_b)
        pa, pb = normalize_poses(pa, "poses_a"), normalize_poses(pb, "poses_b")
        # The rows index tables here, before any op could check them.
        for name, ids in (("ids_a", ids_a), ("ids_b", ids_b)):
            if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= n):
                raise ValueError(f"{name}: object rows must lie in [0, {n}), got [{int(ids.min())}, {int(ids.max())}]")

        def world_centres(ids, poses):
            R = quaternion_to_matrix(poses[:, 3:])
            return torch.einsum("qij,qpj->qpi", R, self.centre[ids]) + poses[:, None, :3]

        gap = torch.cdist(world_centres(ids_a, pa), world_centres(ids_b, pb))  # (Q, P, P)
        near = gap <= self.radius[ids_a][:, :, None] + self.radius[ids_b][:, None, :]
        near &= (self.piece_hull[ids_a] >= 0)[:, :, None] & (self.piece_hull[ids_b] >= 0)[:, None, :]
        q, i, j = near.nonzero(as_tuple=True)
        apart = hulls_separated(self.hulls, self.piece_hull[ids_a[q], i], self.piece_hull[ids_b[q], j],
                                pa[q], pb[q], min_gap=0.0, max_iterations=self.max_iterations)
        return torch.zeros(len(ids_a), dtype=torch.bool, device=device).index_fill_(0, q[~apart], True)

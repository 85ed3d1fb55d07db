"""IS-CD (LOCC §IV, after [10]): collision as "some query point lies inside both objects".

N points are drawn in the overlap of the two posed boxes (A's box, in A's frame, cut by the
A-axis box around B's posed box) and each is tested against both objects with the exact generalised
winding number (inside at >= 0.5): the perfect implicit function, so the accuracy is an upper
bound on what a learned occupancy network with N query points can reach. The points are a fixed
set in the unit cube (seeded), stretched onto each pair's overlap box: the same flow for every
pair. A pair whose boxes do not overlap is free. Misses come from overlaps thinner than the
point spacing; there are no false positives (a point inside both is a witness).
"""

import torch

from contactnet.geometry.boxes import box_corners
from contactnet.geometry.poses import compose_poses, invert_poses, normalize_poses, transform_points
from contactnet.geometry.triangles import winding_numbers as triangle_winding_numbers

def pad_triangles(vertices: list, faces: list, dtype=torch.float32) -> torch.Tensor:
    """Every mesh's triangles (F_i, 3, 3) padded to (N, F_max, 3, 3) with collapsed triangles at
    the origin (solid angle 0: they add nothing to a winding number)."""
    tris = [torch.as_tensor(v, dtype=torch.float64)[torch.as_tensor(f, dtype=torch.int64)] for v, f in zip(vertices, faces)]
    out = torch.zeros(len(tris), max(len(t) for t in tris), 3, 3, dtype=torch.float64)
    for i, t in enumerate(tris):
        out[i, : len(t)] = t
    return out.to(dtype)


def winding_numbers(points: torch.Tensor, tris: torch.Tensor, face_chunk: int = 4096) -> torch.Tensor:
    """points (Q, P, 3), tris (Q, F, 3, 3) in the same frame -> (Q, P) generalised winding numbers
    (Van Oosterom–Strackee solid angles summed over the faces, in chunks of faces)."""
    total = torch.zeros(points.shape[:2], dtype=points.dtype, device=points.device)
    for s in range(0, tris.shape[1], face_chunk):
        total += triangle_winding_numbers(points, tris[:, None, s : s + face_chunk])
    return total


class ImplicitSurfaceCD:
    """Batched IS-CD over an object set.

    tris: (N, F, 3, 3) padded triangles (`pad_triangles`), object frames; aabb: (N, 2, 3) boxes;
    num_points: N query points per pair; chunk: pairs per pass (bounds memory at
    chunk · num_points · face_chunk · 9 floats).
    """

    def __init__(self, tris: torch.Tensor, aabb: torch.Tensor, num_points: int = 64, seed: int = 0,
                 chunk: int = 64, face_chunk: int = 512):
        if int(num_points) < 1 or int(chunk) < 1 or int(face_chunk) < 1:
            raise ValueError(f"num_points, chunk, face_chunk: expected >= 1, got {num_points}, {chunk}, {face_chunk}")
        if tris.dim() != 4 or tris.shape[-2:] != (3, 3) or aabb.shape != (tris.shape[0], 2, 3):
            raise ValueError(f"tris, aabb: expected (N, F, 3, 3) and (N, 2, 3), got {tuple(tris.shape)}, {tuple(aabb.shape)}")
        self.tris, self.aabb = tris, aabb.to(tris)
        self.num_points, self.seed, self.chunk, self.face_chunk = int(num_points), int(seed), int(chunk), int(face_chunk)
        self.unit_points = torch.rand(self.num_points, 3, generator=torch.Generator().manual_seed(self.seed),
                                      dtype=torch.float64).to(tris)

    def to(self, device) -> "ImplicitSurfaceCD":
        return ImplicitSurfaceCD(self.tris.to(device), self.aabb.to(device), self.num_points, self.seed,
                                 self.chunk, self.face_chunk)

    def _posed_box(self, ids: torch.Tensor, poses: torch.Tensor) -> torch.Tensor:
        """(q, 2, 3) the axis box around each object's box placed at `poses`."""
        box = self.aabb[ids]  # (q, 2, 3)
        posed = transform_points(poses[:, None], box_corners(box))  # (q, 8, 3)
        return torch.stack([posed.amin(1), posed.amax(1)], 1)

    @torch.no_grad()
    def __call__(self, ids_a: torch.Tensor, ids_b: torch.Tensor, poses_a: torch.Tensor,
                 poses_b: torch.Tensor) -> torch.Tensor:
        """ids (Q,) object ids, poses (Q, 7) world poses -> (Q,) bool collision."""
        device = self.tris.device
        poses_a = normalize_poses(poses_a.to(self.tris), "poses_a")
        poses_b = normalize_poses(poses_b.to(self.tris), "poses_b")
        ids_a, ids_b = ids_a.to(device), ids_b.to(device)
        b_in_a = compose_poses(invert_poses(poses_a), poses_b)
        a_in_b = invert_poses(b_in_a)
        out = torch.empty(len(ids_a), dtype=torch.bool, device=device)
        for s in range(0, len(ids_a), self.chunk):
            e = slice(s, s + self.chunk)
            box_a, box_b = self.aabb[ids_a[e]], self._posed_box(ids_b[e], b_in_a[e])  # A's frame
            lo, hi = torch.maximum(box_a[:, 0], box_b[:, 0]), torch.minimum(box_a[:, 1], box_b[:, 1])
            overlap = (hi >= lo).all(-1)
            points = lo[:, None] + self.unit_points * (hi - lo).clamp_min(0)[:, None]  # (q, N, 3) A's frame
            inside = winding_numbers(points, self.tris[ids_a[e]], self.face_chunk) >= 0.5
            in_b = transform_points(a_in_b[e, None], points)
            inside &= winding_numbers(in_b, self.tris[ids_b[e]], self.face_chunk) >= 0.5
            out[e] = overlap & inside.any(1)
        return out

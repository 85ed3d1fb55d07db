"""An independent labeller for data tests and benchmarks: python-fcl surface collision (its own
BVH and triangle tests) plus warp-lang's generalised winding number (threshold 0.5) for one vertex
of each object inside the other. Nothing of contactnet's kernels is used."""

import numpy as np
import torch

from contactnet.geometry.poses import invert_poses, pose_to_matrix, transform_points


class FclLabeller:
    def __init__(self, vertices: list[np.ndarray], faces: list[np.ndarray]):
        import fcl

        from tests.ops.warp_winding import WarpContainment

        self.fcl = fcl
        self.models, self.containment, self.first_vertex = [], [], []
        for v, f in zip(vertices, faces):
            m = fcl.BVHModel()
            m.beginModel(len(v), len(f))
            m.addSubModel(np.asarray(v, np.float64), np.asarray(f, np.int32))
            m.endModel()
            self.models.append(m)
            self.containment.append(WarpContainment(v, f))
            self.first_vertex.append(torch.as_tensor(np.asarray(v[:1], np.float64)))

    def _object(self, i: int, pose: torch.Tensor):
        mat = pose_to_matrix(pose.double()).numpy()
        return self.fcl.CollisionObject(self.models[i], self.fcl.Transform(mat[:3, :3], mat[:3, 3]))

    def surfaces_intersect(self, ia: int, ib: int, pa: torch.Tensor, pb: torch.Tensor) -> bool:
        return self.fcl.collide(self._object(ia, pa), self._object(ib, pb), self.fcl.CollisionRequest(),
                                self.fcl.CollisionResult()) > 0

    def contains(self, outer: int, pose_outer: torch.Tensor, inner: int, pose_inner: torch.Tensor) -> bool:
        v = self.first_vertex[inner]
        local = transform_points(invert_poses(pose_outer.double()), transform_points(pose_inner.double(), v))
        return bool(self.containment[outer].contains(local.numpy())[0])

    def label(self, ia: int, ib: int, pa: torch.Tensor, pb: torch.Tensor) -> bool:
        return (self.surfaces_intersect(ia, ib, pa, pb) or self.contains(ib, pb, ia, pa)
                or self.contains(ia, pa, ib, pb))

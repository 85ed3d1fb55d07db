"""An independent labeller for the data and mesh-query tests and the benchmarks: python-fcl surface
collision (its own BVH and triangle tests) plus warp-lang's generalised winding number (threshold
0.5) for one vertex of each object inside the other. Nothing of contactnet's kernels is used."""

import numpy as np
import torch

from contactnet.geometry.poses import invert_poses, pose_to_matrix, transform_points


class FclLabeller:
    def __init__(self, vertices: list[np.ndarray], faces: list[np.ndarray]):
        import fcl

        from tests.ops.warp_winding import WarpContainment

        self.fcl = fcl
        self.models, self.containment = [], []
        for v, f in zip(vertices, faces):
            m = fcl.BVHModel()
            m.beginModel(len(v), len(f))
            m.addSubModel(np.asarray(v, np.float64), np.asarray(f, np.int32))
            m.endModel()
            self.models.append(m)
            self.containment.append(WarpContainment(v, f))
        self.first_vertex = torch.stack([torch.as_tensor(np.asarray(v[0], np.float64)) for v in vertices])

    def _object(self, i: int, pose: torch.Tensor):
        return self._placed(i, pose_to_matrix(pose.double()).numpy())

    def _placed(self, i: int, mat: np.ndarray):
        return self.fcl.CollisionObject(self.models[i], self.fcl.Transform(mat[:3, :3], mat[:3, 3]))

    def surfaces_intersect(self, ids_a, ids_b, poses_a: torch.Tensor, poses_b: torch.Tensor) -> np.ndarray:
        """(Q,) bool: the surfaces of Q pairs intersect (python-fcl has no batched pair query: one
        collide per pair, the poses converted to matrices all at once)."""
        mat_a, mat_b = pose_to_matrix(poses_a.double()).numpy(), pose_to_matrix(poses_b.double()).numpy()
        request = self.fcl.CollisionRequest()
        hit = np.zeros(len(mat_a), dtype=bool)
        for k, (ia, ib) in enumerate(zip(np.asarray(ids_a).tolist(), np.asarray(ids_b).tolist())):
            hit[k] = self.fcl.collide(self._placed(ia, mat_a[k]), self._placed(ib, mat_b[k]), request,
                                      self.fcl.CollisionResult()) > 0
        return hit

    def contains_all(self, outer, pose_outer: torch.Tensor, inner, pose_inner: torch.Tensor) -> np.ndarray:
        """(Q,) bool: object inner[k]'s first vertex lies inside object outer[k] (one winding-number
        launch per outer object)."""
        outer = np.asarray(outer)
        world = transform_points(pose_inner.double(), self.first_vertex[torch.as_tensor(np.asarray(inner))])
        local = transform_points(invert_poses(pose_outer.double()), world).numpy()
        inside = np.zeros(len(outer), dtype=bool)
        for i in np.unique(outer).tolist():
            rows = outer == i
            inside[rows] = self.containment[i].contains(local[rows])
        return inside

    def contains(self, outer: int, pose_outer: torch.Tensor, inner: int, pose_inner: torch.Tensor) -> bool:
        return bool(self.contains_all([outer], pose_outer[None], [inner], pose_inner[None])[0])

    def labels(self, ids_a, ids_b, poses_a: torch.Tensor, poses_b: torch.Tensor) -> np.ndarray:
        """(Q,) bool collision labels of Q pairs: surfaces intersect or either contains the other."""
        return (self.surfaces_intersect(ids_a, ids_b, poses_a, poses_b)
                | self.contains_all(ids_b, poses_b, ids_a, poses_a) | self.contains_all(ids_a, poses_a, ids_b, poses_b))

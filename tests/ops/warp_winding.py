"""Independent containment test for tests and benchmarks: warp-lang's
`mesh_query_point_sign_winding_number` (generalised winding number, threshold 0.5), run on the
CPU. Imports warp lazily; warp compiles the kernel on first use (a few seconds, then cached)."""

from __future__ import annotations

import numpy as np

_kernel = None


def _get_kernel():
    global _kernel
    if _kernel is None:
        import warp as wp

        wp.config.quiet = True
        wp.init()

        @wp.kernel
        def inside_kernel(mesh: wp.uint64, pts: wp.array(dtype=wp.vec3d),
                          out: wp.array(dtype=wp.float64)):  # fmt: skip
            i = wp.tid()
            p = wp.vec3(wp.float32(pts[i][0]), wp.float32(pts[i][1]), wp.float32(pts[i][2]))
            q = wp.mesh_query_point_sign_winding_number(mesh, p, 1.0e6, 2.0, 0.5)
            out[i] = wp.float64(q.sign)

        _kernel = inside_kernel
    return _kernel


class WarpContainment:
    """Winding-number containment of points in one mesh (mesh frame)."""

    def __init__(self, vertices: np.ndarray, faces: np.ndarray):
        import warp as wp

        self._kernel = _get_kernel()
        self._points = wp.array(np.asarray(vertices, np.float32), dtype=wp.vec3, device="cpu")
        self._indices = wp.array(np.asarray(faces, np.int32).reshape(-1), dtype=wp.int32,
                                 device="cpu")  # fmt: skip
        self._mesh = wp.Mesh(points=self._points, indices=self._indices)

    def contains(self, points: np.ndarray) -> np.ndarray:
        """(P, 3) points -> (P,) bool: winding number >= 0.5 (warp's sign < 0 means inside)."""
        import warp as wp

        pts = wp.array(np.asarray(points, np.float64).reshape(-1, 3), dtype=wp.vec3d, device="cpu")
        out = wp.zeros(pts.shape[0], dtype=wp.float64, device="cpu")
        wp.launch(self._kernel, dim=pts.shape[0], inputs=[self._mesh.id, pts, out], device="cpu")
        return out.numpy() < 0

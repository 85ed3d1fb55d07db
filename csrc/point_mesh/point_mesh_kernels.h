// Per-query functor of point_mesh_distance: the same code is the CPU loop body and the CUDA
// thread body. A query is a point in the frame of one library mesh.
#pragma once

#include <cstdint>
#include <limits>

#include "common/bvh.h"
#include "common/point_bvh.h"

namespace contactnet {

template <typename T>
struct PointMeshFunctor {
  BvhView<T> bvh;
  const int64_t* ids;         // (Q,) mesh id, or -1: a padding query
  const T* points;            // (Q, 3) mesh frame
  const T* max_distance;      // (Q,) > 0 (may be +inf): search bound for points outside
  T winding_threshold;        // 0.5: inside when the winding number reaches it
  T beta;                     // far-field acceptance of the fast winding number
  T* distance;                // (Q,)
  int64_t* tri;               // (Q,) face id, -1 when none (padding, cut off, non-finite point)
  T* winding;                 // (Q,)
  bool* inside;               // (Q,)

  CN_HD void operator()(int64_t q) const {
    const int64_t id = ids[q];
    const Vec3<T> p = load3(points + 3 * q);
    if (id < 0 || !is_finite(p)) {  // padding: nothing there; non-finite: NaN out, as primitives
      const T value = id < 0 ? std::numeric_limits<T>::infinity()
                             : std::numeric_limits<T>::quiet_NaN();
      distance[q] = value;
      tri[q] = -1;
      winding[q] = id < 0 ? T(0) : value;
      inside[q] = false;
      return;
    }
    const MeshBvh<T> m = mesh_bvh(bvh, id);
    // The sign first: a point inside is searched without the cut-off (its penetration depth is
    // what a planner needs however deep it is).
    const T w = winding_number(m, p, beta);
    const bool in = w >= winding_threshold;
    const T bound = in ? std::numeric_limits<T>::infinity() : max_distance[q];
    const ClosestTriangle<T> c = closest_triangle(m, p, bound);
    distance[q] = c.row < 0 ? bound : sqrt(c.dist2);
    tri[q] = c.row < 0 ? int64_t(-1) : int64_t(m.tri_ids[c.row]);
    winding[q] = w;
    inside[q] = in;
  }
};

}  // namespace contactnet

// Per-query functor of hulls_separated: the same code is the CPU loop body and the CUDA thread
// body. A query is a pair of library hulls at world poses.
#pragma once

#include <cstdint>

#include "common/gjk.h"
#include "common/rigid.h"

namespace contactnet {

template <typename T>
struct HullSeparationFunctor {
  const T* vertices;                  // (V, 3) every hull's vertices, object frames
  const int64_t* vertex_offsets;      // (M + 1,) hull m owns rows vertex_offsets[m] .. [m + 1)
  const int64_t* neighbours;          // (E,) hull-local vertex indices
  const int64_t* neighbour_offsets;   // (V + 1,) vertex i's neighbours: rows [i] .. [i + 1)
  const int64_t* ids_a;               // (Q,) hull ids
  const int64_t* ids_b;
  const T* poses_a;                   // (Q, 7) world poses [x, y, z, qw, qx, qy, qz]
  const T* poses_b;
  T min_gap;
  int64_t max_iterations;
  bool* separated;                    // (Q,)

  CN_HD HullView<T> hull(int64_t id) const {
    const int64_t v0 = vertex_offsets[id];
    return {vertices + 3 * v0, neighbour_offsets + v0, neighbours, vertex_offsets[id + 1] - v0};
  }

  CN_HD void operator()(int64_t q) const {
    const Rigid<T> rel =
        relative(load_pose_normalized(poses_a + 7 * q), load_pose_normalized(poses_b + 7 * q));
    separated[q] = hulls_separated(hull(ids_a[q]), hull(ids_b[q]), rel, min_gap, max_iterations);
  }
};

}  // namespace contactnet

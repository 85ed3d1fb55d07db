// Per-pair functors of the primitive-distance ops: the same code runs in the CPU loop and as the
// body of the CUDA kernel.
#pragma once

#include <cstdint>
#include <limits>

#include "common/distance.h"
#include "common/tri_intersect.h"

namespace contactnet {

template <typename T>
CN_HD T quiet_nan() {
  return std::numeric_limits<T>::quiet_NaN();
}

// Loads pair i of (N, 3, 3) triangle arrays; false when a coordinate is not finite.
template <typename T>
CN_HD bool load_triangle_pair(const T* tri_a, const T* tri_b, int64_t i, Vec3<T> (&A)[3],
                              Vec3<T> (&B)[3]) {
  bool finite = true;
  for (int k = 0; k < 3; ++k) {
    A[k] = load3(tri_a + 9 * i + 3 * k);
    B[k] = load3(tri_b + 9 * i + 3 * k);
    finite = finite && is_finite(A[k]) && is_finite(B[k]);
  }
  return finite;
}

template <typename T>
struct TriangleDistanceFunctor {
  const T* tri_a;  // (N, 3, 3)
  const T* tri_b;  // (N, 3, 3)
  T* distance;     // (N,)
  T* point_a;      // (N, 3)
  T* point_b;      // (N, 3)
  T* weights_a;    // (N, 3)
  T* weights_b;    // (N, 3)

  CN_HD void operator()(int64_t i) const {
    Vec3<T> A[3], B[3];
    const bool finite = load_triangle_pair(tri_a, tri_b, i, A, B);
    if (!finite) {
      const T nan = quiet_nan<T>();
      distance[i] = nan;
      for (int k = 0; k < 3; ++k) {
        point_a[3 * i + k] = point_b[3 * i + k] = nan;
        weights_a[3 * i + k] = weights_b[3 * i + k] = nan;
      }
      return;
    }
    const TriangleTriangleResult<T> r = triangle_triangle_closest(A, B);
    distance[i] = sqrt(r.dist2);
    Vec3<T> pa, pb;  // on an intersection both are the same crossing point
    triangle_pair_points(r, A, B, pa, pb);
    store3(point_a + 3 * i, pa);
    store3(point_b + 3 * i, pb);
    for (int k = 0; k < 3; ++k) {
      weights_a[3 * i + k] = r.wa[k];
      weights_b[3 * i + k] = r.wb[k];
    }
  }
};

// Boolean intersection (common/tri_intersect.h); false when a coordinate is not finite.
template <typename T>
struct TriangleIntersectFunctor {
  const T* tri_a;   // (N, 3, 3)
  const T* tri_b;   // (N, 3, 3)
  bool* intersect;  // (N,)

  CN_HD void operator()(int64_t i) const {
    Vec3<T> A[3], B[3];
    const bool finite = load_triangle_pair(tri_a, tri_b, i, A, B);
    intersect[i] = finite && triangles_intersect(A, B);
  }
};

template <typename T>
struct PointTriangleDistanceFunctor {
  const T* points;     // (N, 3)
  const T* triangles;  // (N, 3, 3)
  T* distance;         // (N,)
  T* closest;          // (N, 3)
  int8_t* type;        // (N,)
  T* weights;          // (N, 3)

  CN_HD void operator()(int64_t i) const {
    const Vec3<T> p = load3(points + 3 * i);
    const Vec3<T> t0 = load3(triangles + 9 * i);
    const Vec3<T> t1 = load3(triangles + 9 * i + 3);
    const Vec3<T> t2 = load3(triangles + 9 * i + 6);
    if (!(is_finite(p) && is_finite(t0) && is_finite(t1) && is_finite(t2))) {
      const T nan = quiet_nan<T>();
      distance[i] = nan;
      store3(closest + 3 * i, make_vec3(nan, nan, nan));
      store3(weights + 3 * i, make_vec3(nan, nan, nan));
      type[i] = -1;
      return;
    }
    const PointTriangleResult<T> r = point_triangle_closest(p, t0, t1, t2);
    distance[i] = sqrt(r.dist2);
    store3(closest + 3 * i, r.w0 * t0 + r.w1 * t1 + r.w2 * t2);
    store3(weights + 3 * i, make_vec3(r.w0, r.w1, r.w2));
    type[i] = r.type;
  }
};

template <typename T>
struct SegmentSegmentDistanceFunctor {
  const T* seg_a;  // (N, 2, 3)
  const T* seg_b;  // (N, 2, 3)
  T* distance;     // (N,)
  T* point_a;      // (N, 3)
  T* point_b;      // (N, 3)
  int8_t* type;    // (N,)
  T* params;       // (N, 2)

  CN_HD void operator()(int64_t i) const {
    const Vec3<T> a0 = load3(seg_a + 6 * i);
    const Vec3<T> a1 = load3(seg_a + 6 * i + 3);
    const Vec3<T> b0 = load3(seg_b + 6 * i);
    const Vec3<T> b1 = load3(seg_b + 6 * i + 3);
    if (!(is_finite(a0) && is_finite(a1) && is_finite(b0) && is_finite(b1))) {
      const T nan = quiet_nan<T>();
      distance[i] = params[2 * i] = params[2 * i + 1] = nan;
      store3(point_a + 3 * i, make_vec3(nan, nan, nan));
      store3(point_b + 3 * i, make_vec3(nan, nan, nan));
      type[i] = -1;
      return;
    }
    const SegmentSegmentResult<T> r = segment_segment_closest(a0, a1, b0, b1);
    distance[i] = sqrt(r.dist2);
    store3(point_a + 3 * i, lerp(a0, a1, r.s));
    store3(point_b + 3 * i, lerp(b0, b1, r.t));
    params[2 * i] = r.s;
    params[2 * i + 1] = r.t;
    type[i] = r.type;
  }
};

}  // namespace contactnet

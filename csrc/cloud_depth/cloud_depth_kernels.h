// How deep a query's own surface points reach into the other object, read from the other's point
// cloud alone (the CPU loop body and the CUDA thread body): at each own point x near the other's
// box, the other's nearest cloud points b_i (n_i their normals) within a radius r give the
// inverse-distance weighted point-to-plane distance sum w_i (x - b_i)·n_i / sum w_i, w_i =
// 1 / (|x - b_i| + r/32) (negative: x lies behind the other's surface); the query keeps the least.
// The other's points are sorted by the cells of a grid over its box (`sort_by_cell`), so the search
// reads only the cells the ball of radius r meets.
#pragma once

#include <cmath>
#include <cstdint>

#include "common/macros.h"

namespace contactnet {

constexpr int kCloudDepthMaxNeighbours = 8;

template <typename T>
struct CloudDepthFunctor {
  const T* points;         // (N, K, 3) each object's points, its frame, sorted by their grid cell
  const T* normals;        // (N, K, 3) their unit normals
  const int32_t* starts;   // (N, M³ + 1) each cell's first point (the cell order), then K
  const T* radius;         // (Q,) each query's search radius
  const int64_t* ids_own;  // (Q,)
  const int64_t* ids_other;
  const T* rotation;     // (Q, 3, 3) own frame -> other's frame
  const T* translation;  // (Q, 3)
  const T* aabb_other;   // (Q, 2, 3) the other's grid box, its frame (whose cells sort its points)
  int64_t k, m, neighbours;
  T* depth;             // (Q,) the least weighted distance; the radius where none is found
  int32_t* own_point;   // (Q,) the own point it came from (-1: none)
  int32_t* neighbour;   // (Q, neighbours) that point's neighbours in the other's cloud, nearest first (-1: fewer)

  // The other's points within r of x (its frame), the nearest `neighbours` of them in dist2 / idx,
  // nearest first; returns how many. lo: the other's box corner, scale: M / its extent per axis,
  // st / pts: the other's cell starts and points.
  CN_HD int nearest(const T x[3], T r, const T lo[3], const T scale[3], const int32_t* st, const T* pts, T* dist2,
                    int32_t* idx) const {
    int64_t first[3], last[3];
    for (int a = 0; a < 3; ++a) {
      // The cells the ball meets, widened by a ten-thousandth of a cell against rounding at a
      // cell's face (the sort's cell of a point on it is computed in its own float order).
      const T u0 = (x[a] - r - lo[a]) * scale[a] - T(1e-4), u1 = (x[a] + r - lo[a]) * scale[a] + T(1e-4);
      if (!(u1 >= T(0)) || !(u0 < T(m))) return 0;  // NaN too
      first[a] = u0 <= T(0) ? 0 : static_cast<int64_t>(u0);
      last[a] = u1 >= T(m - 1) ? m - 1 : static_cast<int64_t>(u1);
    }
    const T r2 = r * r;
    int found = 0;
    for (int64_t i = first[0]; i <= last[0]; ++i)
      for (int64_t j = first[1]; j <= last[1]; ++j) {
        const int64_t row = (i * m + j) * m;  // the cells (i, j, first[2]..last[2]) are one run of points
        for (int32_t b = st[row + first[2]], end = st[row + last[2] + 1]; b < end; ++b) {
          const T dx = x[0] - pts[3 * b], dy = x[1] - pts[3 * b + 1], dz = x[2] - pts[3 * b + 2];
          const T d2 = dx * dx + dy * dy + dz * dz;
          if (!(d2 <= r2) || (found == neighbours && d2 >= dist2[found - 1])) continue;
          int at = found < neighbours ? found++ : found - 1;  // insertion into the sorted few
          for (; at > 0 && dist2[at - 1] > d2; --at) {
            dist2[at] = dist2[at - 1];
            idx[at] = idx[at - 1];
          }
          dist2[at] = d2;
          idx[at] = b;
        }
      }
    return found;
  }

  CN_HD void operator()(int64_t q) const {
    const int64_t other = ids_other[q];
    const T r = radius[q], soft = r / T(32);
    const T* box = aabb_other + 6 * q;
    T lo[3], scale[3], near_lo[3], near_hi[3];
    for (int a = 0; a < 3; ++a) {
      T e = box[3 + a] - box[a];
      e = e > T(1e-6) ? e : T(1e-6);  // sort_by_cell's clamp
      lo[a] = box[a];
      scale[a] = T(m) / e;
      near_lo[a] = box[a] - r;
      near_hi[a] = box[3 + a] + r;
    }
    const T* pts = points + 3 * ids_own[q] * k;
    const T* rr = rotation + 9 * q;
    const T r0 = rr[0], r1 = rr[1], r2 = rr[2], r3 = rr[3], r4 = rr[4], r5 = rr[5], r6 = rr[6], r7 = rr[7], r8 = rr[8];
    const T t0 = translation[3 * q], t1 = translation[3 * q + 1], t2 = translation[3 * q + 2];
    const int32_t* st = starts + other * (m * m * m + 1);
    const T* other_pts = points + 3 * other * k;
    const T* other_nrm = normals + 3 * other * k;
    T best = r;
    int32_t best_point = -1;
    int32_t* nb = neighbour + neighbours * q;
    for (int64_t i = 0; i < neighbours; ++i) nb[i] = -1;
    T dist2[kCloudDepthMaxNeighbours];
    int32_t idx[kCloudDepthMaxNeighbours];
    // Blocks of points: the near test is one branch-free loop (vectorised on a CPU), then the
    // near points search the other's cells.
    constexpr int64_t kBlock = 64;
    for (int64_t j0 = 0; j0 < k; j0 += kBlock) {
      const int64_t n = k - j0 < kBlock ? k - j0 : kBlock;
      const T* p = pts + 3 * j0;
      int32_t near[kBlock];
      int32_t any = 0;
      for (int64_t b = 0; b < n; ++b) {
        const T x = r0 * p[3 * b] + r1 * p[3 * b + 1] + r2 * p[3 * b + 2] + t0;
        const T y = r3 * p[3 * b] + r4 * p[3 * b + 1] + r5 * p[3 * b + 2] + t1;
        const T z = r6 * p[3 * b] + r7 * p[3 * b + 1] + r8 * p[3 * b + 2] + t2;
        near[b] = int32_t(x >= near_lo[0]) & int32_t(x <= near_hi[0]) & int32_t(y >= near_lo[1]) &
                  int32_t(y <= near_hi[1]) & int32_t(z >= near_lo[2]) & int32_t(z <= near_hi[2]);  // NaN: not near
        any |= near[b];
      }
      if (!any) continue;
      for (int64_t b = 0; b < n; ++b) {
        if (!near[b]) continue;
        const T* pb = p + 3 * b;
        const T x[3] = {r0 * pb[0] + r1 * pb[1] + r2 * pb[2] + t0, r3 * pb[0] + r4 * pb[1] + r5 * pb[2] + t1,
                        r6 * pb[0] + r7 * pb[1] + r8 * pb[2] + t2};
        const int found = nearest(x, r, lo, scale, st, other_pts, dist2, idx);
        if (found == 0) continue;
        T num = T(0), den = T(0);
        for (int i = 0; i < found; ++i) {
          const T* c = other_pts + 3 * idx[i];
          const T* nrm = other_nrm + 3 * idx[i];
          const T w = T(1) / (sqrt(dist2[i]) + soft);
          num += w * ((x[0] - c[0]) * nrm[0] + (x[1] - c[1]) * nrm[1] + (x[2] - c[2]) * nrm[2]);
          den += w;
        }
        const T s = num / den;
        if (s < best) {
          best = s;
          best_point = static_cast<int32_t>(j0 + b);
          for (int i = 0; i < neighbours; ++i) nb[i] = i < found ? idx[i] : -1;
        }
      }
    }
    depth[q] = best;
    own_point[q] = best_point;
  }
};

}  // namespace contactnet

// How deep a query's own surface points reach into the other object, read from the other's point
// cloud alone (the CPU loop body and the CUDA thread body): at each own point x near the other's
// box, the other's nearest cloud points b_i (n_i their normals) within a radius r give the
// inverse-distance weighted point-to-plane distance sum w_i (x - b_i)·n_i / sum w_i, w_i =
// 1 / (|x - b_i| + r/32) (negative: x lies behind the other's surface); the query keeps the least.
// The other's points are sorted by its grid cells (the encoder's order), so the search reads only
// the cells the ball of radius r meets.
#pragma once

#include <cmath>
#include <cstdint>

#include "common/macros.h"

namespace contactnet {

constexpr int kCloudDepthMaxNeighbours = 8;

template <typename T>
struct CloudDepthFunctor {
  const T* points;         // (N, K, 3) each object's points, its frame, sorted by its grid cell
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
  // nearest first; returns how many.
  CN_HD int nearest(int64_t q, const T x[3], T r, T* dist2, int32_t* idx) const {
    const int64_t other = ids_other[q];
    const T* lo = aabb_other + 6 * q;
    int64_t first[3], last[3];
    for (int a = 0; a < 3; ++a) {
      T e = lo[3 + a] - lo[a];
      e = e > T(1e-6) ? e : T(1e-6);  // the encoder's clamp
      // The cells the ball meets, widened by a ten-thousandth of a cell against rounding at a
      // cell's face (the encoder's cell of a point on it is computed in its own float order).
      const T u0 = (x[a] - r - lo[a]) / e * T(m) - T(1e-4), u1 = (x[a] + r - lo[a]) / e * T(m) + T(1e-4);
      if (!(u1 >= T(0)) || !(u0 < T(m))) return 0;  // NaN too
      first[a] = u0 <= T(0) ? 0 : static_cast<int64_t>(u0);
      last[a] = u1 >= T(m - 1) ? m - 1 : static_cast<int64_t>(u1);
    }
    const int32_t* st = starts + other * (m * m * m + 1);
    const T* pts = points + 3 * other * k;
    const T r2 = r * r;
    int found = 0;
    for (int64_t i = first[0]; i <= last[0]; ++i)
      for (int64_t j = first[1]; j <= last[1]; ++j) {
        const int64_t row = (i * m + j) * m;  // the cells (i, j, first[2]..last[2]) are one run of points
        for (int32_t b = st[row + first[2]]; b < st[row + last[2] + 1]; ++b) {
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
    const T* lo = aabb_other + 6 * q;
    T near_lo[3], near_hi[3];
    for (int a = 0; a < 3; ++a) {
      near_lo[a] = lo[a] - r;
      near_hi[a] = lo[3 + a] + r;
    }
    const T* pts = points + 3 * ids_own[q] * k;
    const T* rr = rotation + 9 * q;
    const T* t = translation + 3 * q;
    const T* other_pts = points + 3 * other * k;
    const T* other_nrm = normals + 3 * other * k;
    T best = r;
    int32_t best_point = -1;
    int32_t* nb = neighbour + neighbours * q;
    for (int64_t i = 0; i < neighbours; ++i) nb[i] = -1;
    T dist2[kCloudDepthMaxNeighbours];
    int32_t idx[kCloudDepthMaxNeighbours];
    for (int64_t j = 0; j < k; ++j) {
      const T* p = pts + 3 * j;
      T x[3];
      bool near = true;
      for (int a = 0; a < 3; ++a) {
        x[a] = rr[3 * a] * p[0] + rr[3 * a + 1] * p[1] + rr[3 * a + 2] * p[2] + t[a];
        near = near && x[a] >= near_lo[a] && x[a] <= near_hi[a];
      }
      if (!near) continue;
      const int found = nearest(q, x, r, dist2, idx);
      if (found == 0) continue;
      T num = T(0), den = T(0);
      for (int i = 0; i < found; ++i) {
        const T* b = other_pts + 3 * idx[i];
        const T* n = other_nrm + 3 * idx[i];
        const T w = T(1) / (sqrt(dist2[i]) + soft);
        num += w * ((x[0] - b[0]) * n[0] + (x[1] - b[1]) * n[1] + (x[2] - b[2]) * n[2]);
        den += w;
      }
      const T s = num / den;
      if (s < best) {
        best = s;
        best_point = static_cast<int32_t>(j);
        for (int i = 0; i < neighbours; ++i) nb[i] = i < found ? idx[i] : -1;
      }
    }
    depth[q] = best;
    own_point[q] = best_point;
  }
};

}  // namespace contactnet

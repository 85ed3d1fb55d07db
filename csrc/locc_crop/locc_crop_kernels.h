// LOCC's local crop of one object's M^3 embedding cells against the other object's box.
//
// A cell centre is lo + ((i, j, k) + 0.5) / M * size along the object's own axes, so its position
// in the other box's frame is offset + R[:, 0] a_i + R[:, 1] b_j + R[:, 2] c_k: three per-axis
// tables of M entries each replace M^3 matrix-vector products. A cell is kept when that position
// lies within `reach` (the other box's half-size grown by the cell half-diagonal) on every axis.
// Sums are formed ((offset + a) + b) + c, the order of the pure-torch reference, so the masks
// agree exactly.
#pragma once

#include <cmath>
#include <cstdint>

#include "common/macros.h"

namespace contactnet {

constexpr int64_t kCropMaxGrid = 16;  // documented bound of `grid` (per-thread tables of 3 x M)

template <typename T>
struct LoccCropFunctor {
  const T* aabb;      // (Q, 2, 3) own box: min, max corners
  const T* rotation;  // (Q, 3, 3) own frame -> other box's frame
  const T* offset;    // (Q, 3) own origin in the other box's frame, relative to its centre
  const T* reach;     // (Q, 3) other half-size + own cell half-diagonal
  int64_t grid;
  T* weights;   // (Q, M^3) kept / count, x-major cells
  T* mean_own;  // (Q, 3) mean kept-cell centre in the own frame (0 when none)
  T* count;     // (Q,) kept cells

  CN_HD void operator()(int64_t q) const {
    const int64_t m = grid, cells = m * m * m;
    const T* lo = aabb + 6 * q;
    const T* r = rotation + 9 * q;
    const T* o = offset + 3 * q;
    const T* h = reach + 3 * q;
    T axis[3][kCropMaxGrid];          // cell-centre coordinate along each own axis
    T term[3][3][kCropMaxGrid];       // term[out][own][i] = R[out][own] * axis[own][i]
    for (int a = 0; a < 3; ++a) {
      const T size = lo[3 + a] - lo[a];
      for (int64_t i = 0; i < m; ++i) {
        axis[a][i] = lo[a] + size * ((T(i) + T(0.5)) / T(m));
        for (int out = 0; out < 3; ++out) term[out][a][i] = r[3 * out + a] * axis[a][i];
      }
    }
    T* w = weights + cells * q;
    int64_t kept = 0;
    T marginal[3][kCropMaxGrid] = {};
    for (int64_t i = 0; i < m; ++i) {
      const T si[3] = {o[0] + term[0][0][i], o[1] + term[1][0][i], o[2] + term[2][0][i]};
      for (int64_t j = 0; j < m; ++j) {
        const T sij[3] = {si[0] + term[0][1][j], si[1] + term[1][1][j], si[2] + term[2][1][j]};
        T* row = w + (i * m + j) * m;
        int64_t row_kept = 0;
        for (int64_t k = 0; k < m; ++k) {
          // Bitwise &: the three tests are cheap, a mispredicted branch per cell is not.
          const bool keep = (fabs(sij[0] + term[0][2][k]) <= h[0]) &
                            (fabs(sij[1] + term[1][2][k]) <= h[1]) &
                            (fabs(sij[2] + term[2][2][k]) <= h[2]);
          row[k] = keep ? T(1) : T(0);
          row_kept += keep;
          marginal[2][k] += row[k];
        }
        kept += row_kept;
        marginal[0][i] += T(row_kept);
        marginal[1][j] += T(row_kept);
      }
    }
    const T scale = T(1) / T(kept > 0 ? kept : 1);
    if (kept > 0)
      for (int64_t c = 0; c < cells; ++c) w[c] *= scale;
    for (int a = 0; a < 3; ++a) {
      T sum = T(0);
      for (int64_t i = 0; i < m; ++i) sum += marginal[a][i] * axis[a][i];
      mean_own[3 * q + a] = sum * scale;
    }
    count[q] = T(kept);
  }
};

}  // namespace contactnet

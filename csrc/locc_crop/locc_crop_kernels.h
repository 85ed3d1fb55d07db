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

// The cells of query q, x-major, a row (i, j) at a time: keep_row(c0, keep, row_kept) with keep[k]
// 0 or 1 for the row's cells c0 + k (k < M) and their count; returns the kept count and the kept
// cells' centre sums along each own axis (sum[3]: the mean's numerators). A row's tests are one
// branch-free loop over k, counts in integers, so the compiler vectorises it.
template <typename T, typename KeepRow>
CN_HD int64_t crop_cells(const T* aabb, const T* rotation, const T* offset, const T* reach, int64_t m, int64_t q,
                         T sum[3], const KeepRow& keep_row) {
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
  int64_t kept = 0;
  int32_t marginal[3][kCropMaxGrid] = {};
  for (int64_t i = 0; i < m; ++i) {
    const T si[3] = {o[0] + term[0][0][i], o[1] + term[1][0][i], o[2] + term[2][0][i]};
    for (int64_t j = 0; j < m; ++j) {
      const T sij[3] = {si[0] + term[0][1][j], si[1] + term[1][1][j], si[2] + term[2][1][j]};
      int32_t keep[kCropMaxGrid];
      int32_t row_kept = 0;
      for (int64_t k = 0; k < m; ++k) {
        // Bitwise &: the three tests are cheap, a mispredicted branch per cell is not.
        keep[k] = int32_t(fabs(sij[0] + term[0][2][k]) <= h[0]) & int32_t(fabs(sij[1] + term[1][2][k]) <= h[1]) &
                  int32_t(fabs(sij[2] + term[2][2][k]) <= h[2]);
        row_kept += keep[k];
        marginal[2][k] += keep[k];
      }
      keep_row((i * m + j) * m, keep, row_kept);
      kept += row_kept;
      marginal[0][i] += row_kept;
      marginal[1][j] += row_kept;
    }
  }
  for (int a = 0; a < 3; ++a) {
    sum[a] = T(0);
    for (int64_t i = 0; i < m; ++i) sum[a] += T(marginal[a][i]) * axis[a][i];
  }
  return kept;
}

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
    const int64_t cells = grid * grid * grid;
    T* w = weights + cells * q;
    T sum[3];
    const int64_t kept = crop_cells(aabb, rotation, offset, reach, grid, q, sum,
                                    [&](int64_t c0, const int32_t* keep, int32_t) {
                                      for (int64_t k = 0; k < grid; ++k) w[c0 + k] = T(keep[k]);
                                    });
    const T scale = T(1) / T(kept > 0 ? kept : 1);
    if (kept > 0)
      for (int64_t c = 0; c < cells; ++c) w[c] *= scale;
    finish(q, kept, scale, sum);
  }

  CN_HD void finish(int64_t q, int64_t kept, T scale, const T sum[3]) const {
    for (int a = 0; a < 3; ++a) mean_own[3 * q + a] = sum[a] * scale;
    count[q] = T(kept);
  }
};

// The crop pooled: the kept cells' mean feature read from a table of embeddings stored as rows
// (what an embedding bag over the M^3 weights of LoccCropFunctor gives, up to rounding: the kept
// rows are summed in cell order, then scaled), without the weights: a query reads only its kept
// cells' rows, as their grid rows are tested.
template <typename T>
struct LoccCropPoolFunctor {
  LoccCropFunctor<T> crop;  // its weights unused
  const T* rows;            // (N·M^3, F) embedding n's cell c at row n·M^3 + c
  const int64_t* ids;       // (Q,) each query's embedding
  int64_t f;                // F
  T* pooled;                // (Q, F)

  CN_HD void operator()(int64_t q) const {
    const int64_t cells = crop.grid * crop.grid * crop.grid;
    T* out = pooled + f * q;
    for (int64_t i = 0; i < f; ++i) out[i] = T(0);
    const T* first = rows + f * cells * ids[q];
    T sum[3];
    const int64_t kept = crop_cells(crop.aabb, crop.rotation, crop.offset, crop.reach, crop.grid, q, sum,
                                    [&](int64_t c0, const int32_t* keep, int32_t row_kept) {
                                      if (row_kept == 0) return;
                                      for (int64_t k = 0; k < crop.grid; ++k) {
                                        if (!keep[k]) continue;
                                        const T* row = first + f * (c0 + k);
                                        for (int64_t i = 0; i < f; ++i) out[i] += row[i];
                                      }
                                    });
    const T scale = T(1) / T(kept > 0 ? kept : 1);
    for (int64_t i = 0; i < f; ++i) out[i] *= scale;
    crop.finish(q, kept, scale, sum);
  }
};

}  // namespace contactnet

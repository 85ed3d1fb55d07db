// Per-sample functors of grid_sample_rows: the same code is the CPU loop body and the CUDA thread
// body. A sample is a point of a query in its grid's box units; the grid is M³ rows of a table.
#pragma once

#include <cmath>
#include <cstdint>

#include "common/macros.h"

namespace contactnet {

// Trilinear corners of one sample: for each axis the lower cell index and the fraction towards
// the upper one (align_corners=False units: cell i's centre at (2 i + 1) / M - 1). False when the
// sample is NaN or farther than a cell outside the grid, where every corner reads zero.
template <typename T>
CN_HD bool sample_corners(const T* c, int64_t m, int64_t base[3], T frac[3]) {
  for (int a = 0; a < 3; ++a) {
    const T x = ((c[a] + T(1)) * T(m) - T(1)) / T(2);
    if (!(x > T(-1) && x < T(m))) return false;
    const T f = floor(x);
    base[a] = static_cast<int64_t>(f);
    frac[a] = x - f;
  }
  return true;
}

// Corner `corner` of a sample (bit 2 - a: the upper cell along axis a): its cell within the grid,
// its weight factor per axis, and whether it lies in the grid (outside it reads zero).
template <typename T>
CN_HD bool sample_corner(int corner, int64_t m, const int64_t base[3], const T frac[3], int64_t& cell,
                         T w[3]) {
  bool inside = true;
  cell = 0;
  for (int a = 0; a < 3; ++a) {
    const int bit = (corner >> (2 - a)) & 1;
    const int64_t i = base[a] + bit;
    inside = inside && i >= 0 && i < m;
    cell = cell * m + i;
    w[a] = bit ? frac[a] : T(1) - frac[a];
  }
  return inside;
}

template <typename T>
struct GridSampleRowsFunctor {
  const T* rows;        // (N·M³, D) grid n's cell (i, j, k) at row n·M³ + (i·M + j)·M + k
  const int64_t* ids;   // (Q,) grid of each query
  const T* coords;      // (Q, P, 3) samples in their grid's box units, coords[..., 0] along i
  int64_t m, d, p;      // M, D, P
  T* out;               // (Q, P, D) zero padding outside the grid

  CN_HD void operator()(int64_t s) const {
    T* o = out + d * s;
    for (int64_t k = 0; k < d; ++k) o[k] = T(0);
    int64_t base[3];
    T frac[3];
    if (!sample_corners(coords + 3 * s, m, base, frac)) return;
    const int64_t first = ids[s / p] * m * m * m;
    for (int corner = 0; corner < 8; ++corner) {
      int64_t cell;
      T w[3];
      if (!sample_corner(corner, m, base, frac, cell, w)) continue;
      const T weight = w[0] * w[1] * w[2];
      const T* r = rows + d * (first + cell);
      for (int64_t k = 0; k < d; ++k) o[k] += weight * r[k];
    }
  }
};

// d loss / d coords of one sample, given d loss / d out (Q, P, D).
template <typename T>
struct GridSampleRowsBackwardFunctor {
  const T* rows;
  const int64_t* ids;
  const T* coords;
  const T* grad_out;  // (Q, P, D)
  int64_t m, d, p;
  T* grad_coords;     // (Q, P, 3)

  CN_HD void operator()(int64_t s) const {
    T* g = grad_coords + 3 * s;
    g[0] = g[1] = g[2] = T(0);
    int64_t base[3];
    T frac[3];
    if (!sample_corners(coords + 3 * s, m, base, frac)) return;
    const int64_t first = ids[s / p] * m * m * m;
    const T* go = grad_out + d * s;
    for (int corner = 0; corner < 8; ++corner) {
      int64_t cell;
      T w[3];
      if (!sample_corner(corner, m, base, frac, cell, w)) continue;
      const T* r = rows + d * (first + cell);
      T dot = T(0);
      for (int64_t k = 0; k < d; ++k) dot += go[k] * r[k];
      // d w / d x_a = ±(product of the other two weights); d x_a / d c_a = M / 2.
      for (int a = 0; a < 3; ++a) {
        const int bit = (corner >> (2 - a)) & 1;
        const T others = w[(a + 1) % 3] * w[(a + 2) % 3];
        g[a] += (bit ? T(1) : T(-1)) * others * dot * T(m) / T(2);
      }
    }
  }
};

}  // namespace contactnet

// LOCC's co-occupancy term probed at surface points, one query per index (the CPU loop body and
// the CUDA thread body): the torch composition in contactnet/models/collision_nets.py
// (`LOCC._cross` with cross_sites "points") reads every one of the own object's K points per query
// through a dozen (Q, K, ·) tensors and a top-k, though a query keeps few of them (the points
// inside the other box: a median of 3 to 26 of 1,500 on near-contact and uniform pairs). Here a
// query moves its points into the other box once, and only the kept ones are ranked and sampled.
#pragma once

#include <cstdint>
#include <cstring>

#include "common/macros.h"
#include "grid_sample_rows/grid_sample_rows_kernels.h"

namespace contactnet {

// The bits of a non-negative float as an unsigned integer: they order as the values do.
CN_HD uint32_t ordered_bits(float v) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(v);
#else
  uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  return u;
#endif
}
CN_HD uint64_t ordered_bits(double v) {
#if defined(__CUDA_ARCH__)
  return static_cast<uint64_t>(__double_as_longlong(v));
#else
  uint64_t u;
  std::memcpy(&u, &v, sizeof u);
  return u;
#endif
}

template <typename T>
struct LoccPointCooccupancyFunctor {
  const T* points;         // (N, K, 3) each object's encoded points, its own frame
  const T* point_queries;  // (N, K, D) the co-occupancy queries at those points
  const T* keys;           // (N·M³, D) key grids as rows (grid_sample_rows' layout)
  const T* occupancy;      // (N·M³,) points per cell, as rows
  const int64_t* ids_own;  // (Q,)
  const int64_t* ids_other;
  const T* rotation;     // (Q, 3, 3) own frame -> other's frame
  const T* translation;  // (Q, 3)
  const T* aabb_other;   // (Q, 2, 3) the other's box, its frame
  int64_t k, d, m, count;  // K, D, M, sites read per query (>= 1)
  T lowest;                // the dtype's lowest value (the masked max's start)
  T* priority;             // (Q, K) scratch: the kept points' ranks (queries that keep > count)
  int32_t* site;           // (Q, K) scratch: the kept points' indices
  T* out;                  // (Q, D)
  int32_t* arg;            // (Q, D) the point each channel's max came from (-1: none kept)

  // The other box's extent along axis a, clamped as contactnet.models.geometry.point_coordinates
  // clamps it.
  CN_HD T extent(int64_t q, int a) const {
    const T e = aabb_other[6 * q + 3 + a] - aabb_other[6 * q + a];
    return e > T(1e-6) ? e : T(1e-6);
  }

  // Coordinate a of own point p in the other's frame: R p + t.
  CN_HD T local(int64_t q, const T* p, int a) const {
    const T* r = rotation + 9 * q + 3 * a;
    return r[0] * p[0] + r[1] * p[1] + r[2] * p[2] + translation[3 * q + a];
  }

  // Point j of the query's own object in the other box's units ([-1, 1] across it), as
  // point_coordinates computes it; whether it lies inside the box (NaN: outside).
  CN_HD bool inside(int64_t q, int64_t j, T c[3]) const {
    const T* p = points + 3 * (ids_own[q] * k + j);
    const T* lo = aabb_other + 6 * q;
    bool in = true;
    for (int a = 0; a < 3; ++a) {
      c[a] = T(2) * (local(q, p, a) - lo[a]) / extent(q, a) - T(1);
      in = in && (c[a] <= T(1) && c[a] >= T(-1));
    }
    return in;
  }

  // The site's rank (LOCC._cells, for a surface point: own occupancy counts as present): 4 + the
  // other's points per cell interpolated there, squashed to [0, 2) + nearness to its box centre.
  CN_HD T rank(int64_t q, const T c[3]) const {
    T near = T(0);
    int64_t base[3];
    T frac[3];
    if (sample_corners(c, m, base, frac)) {
      const int64_t first = ids_other[q] * m * m * m;
      for (int corner = 0; corner < 8; ++corner) {
        int64_t cell;
        T w[3];
        if (sample_corner(corner, m, base, frac, cell, w)) near += w[0] * w[1] * w[2] * occupancy[first + cell];
      }
    }
    const T centre = c[0] * c[0] + c[1] * c[1] + c[2] * c[2];
    return T(4) + T(2) * near / (T(1) + near) + T(1) / (T(1) + centre);
  }

  // o = max(o, query(site j) ⊙ key(other's grid at c)), channel by channel (NaN propagates),
  // a[ch] = j where the max moved.
  CN_HD void take(int64_t q, int64_t j, const T c[3], T* o, int32_t* a) const {
    int64_t base[3];
    T frac[3];
    const T* rows[8];
    T weights[8];
    int corners = 0;
    if (sample_corners(c, m, base, frac)) {
      const int64_t first = ids_other[q] * m * m * m;
      for (int corner = 0; corner < 8; ++corner) {
        int64_t cell;
        T w[3];
        if (!sample_corner(corner, m, base, frac, cell, w)) continue;
        rows[corners] = keys + d * (first + cell);
        weights[corners++] = w[0] * w[1] * w[2];
      }
    }
    const T* own = point_queries + d * (ids_own[q] * k + j);
    // Blocks of channels, each summed corner by corner as grid_sample_rows sums them.
    constexpr int64_t kBlock = 16;
    for (int64_t c0 = 0; c0 < d; c0 += kBlock) {
      const int64_t nb = d - c0 < kBlock ? d - c0 : kBlock;
      T key[kBlock];
      for (int64_t i = 0; i < kBlock; ++i) key[i] = T(0);
      for (int s = 0; s < corners; ++s) {
        const T* row = rows[s] + c0;
        const T w = weights[s];
        for (int64_t i = 0; i < nb; ++i) key[i] += w * row[i];
      }
      for (int64_t i = 0; i < nb; ++i) {
        const T v = own[c0 + i] * key[i];
        if (v > o[c0 + i] || v != v) {
          o[c0 + i] = v;
          a[c0 + i] = static_cast<int32_t>(j);
        }
      }
    }
  }

  CN_HD void operator()(int64_t q) const {
    T* o = out + d * q;
    int32_t* a = arg + d * q;
    for (int64_t ch = 0; ch < d; ++ch) {
      o[ch] = lowest;
      a[ch] = -1;
    }
    // The kept points' indices, in order. Most points lie far outside the box: the box grown by
    // a margin far above rounding (a thousandth of it and a millionth of its coordinates) turns
    // them away without the division; the rest take the exact test.
    int32_t* st = site + q * k;
    const T* lo = aabb_other + 6 * q;
    T near_lo[3], near_hi[3];
    for (int a = 0; a < 3; ++a) {
      const T e = extent(q, a), hi = lo[a] + e, slack = T(1e-3) * e + T(1e-6) * (fabs(lo[a]) + fabs(hi));
      near_lo[a] = lo[a] - slack;
      near_hi[a] = hi + slack;
    }
    const T* pts = points + 3 * ids_own[q] * k;
    const T* r = rotation + 9 * q;
    const T* t = translation + 3 * q;
    const T r0 = r[0], r1 = r[1], r2 = r[2], r3 = r[3], r4 = r[4], r5 = r[5], r6 = r[6], r7 = r[7], r8 = r[8];
    const T t0 = t[0], t1 = t[1], t2 = t[2];
    T c[3];
    int64_t kept = 0;
    // Blocks of points: the near test is one branch-free loop (vectorised on a CPU), then the
    // few near points take the exact test.
    constexpr int64_t kBlock = 64;
    for (int64_t j0 = 0; j0 < k; j0 += kBlock) {
      const int64_t nb = k - j0 < kBlock ? k - j0 : kBlock;
      const T* p = pts + 3 * j0;
      int32_t near[kBlock];
      int32_t any = 0;
      for (int64_t b = 0; b < nb; ++b) {
        const T x = r0 * p[3 * b] + r1 * p[3 * b + 1] + r2 * p[3 * b + 2] + t0;
        const T y = r3 * p[3 * b] + r4 * p[3 * b + 1] + r5 * p[3 * b + 2] + t1;
        const T z = r6 * p[3 * b] + r7 * p[3 * b + 1] + r8 * p[3 * b + 2] + t2;
        near[b] = int32_t(x >= near_lo[0]) & int32_t(x <= near_hi[0]) & int32_t(y >= near_lo[1]) &
                  int32_t(y <= near_hi[1]) & int32_t(z >= near_lo[2]) & int32_t(z <= near_hi[2]);  // NaN: not near
        any |= near[b];
      }
      if (!any) continue;
      for (int64_t b = 0; b < nb; ++b)
        if (near[b] && inside(q, j0 + b, c)) st[kept++] = static_cast<int32_t>(j0 + b);
    }
    if (kept <= count) {  // every kept point is read
      for (int64_t i = 0; i < kept; ++i) {
        inside(q, st[i], c);
        take(q, st[i], c, o, a);
      }
    } else {
      select_and_take(q, kept, o, a);
    }
    if (kept == 0)
      for (int64_t ch = 0; ch < d; ++ch) o[ch] = T(0);
  }

  // More kept points than sites: the `count` of highest rank (ties by index), found by a radix
  // select over the ranks' bits (all positive), then read.
  CN_HD void select_and_take(int64_t q, int64_t n, T* o, int32_t* a) const {
    using Bits = decltype(ordered_bits(T(0)));
    constexpr int kBits = 8 * sizeof(Bits);
    T* pr = priority + q * k;
    const int32_t* st = site + q * k;
    T c[3];
    for (int64_t i = 0; i < n; ++i) {
      inside(q, st[i], c);
      pr[i] = rank(q, c);
    }
    // The count-th largest rank's bits, 8 bits at a time from the top.
    Bits prefix = 0, mask = 0;
    int64_t wanted = count;  // ranks still to place at or below the prefix
    for (int shift = kBits - 8; shift >= 0; shift -= 8) {
      int32_t hist[256];
      for (int b = 0; b < 256; ++b) hist[b] = 0;
      for (int64_t i = 0; i < n; ++i) {
        const Bits u = ordered_bits(pr[i]);
        if ((u & mask) == prefix) ++hist[(u >> shift) & 255];
      }
      int digit = 255;
      for (; digit > 0 && hist[digit] < wanted; --digit) wanted -= hist[digit];
      prefix |= static_cast<Bits>(digit) << shift;
      mask |= static_cast<Bits>(255) << shift;
    }
    // Above the threshold all are read; at it, the first `wanted` in index order.
    for (int64_t i = 0; i < n; ++i) {
      const Bits u = ordered_bits(pr[i]);
      if (u > prefix || (u == prefix && wanted-- > 0)) {
        inside(q, st[i], c);
        take(q, st[i], c, o, a);
      }
    }
  }
};

// The term's gradient: each channel's max is its argmax point's query ⊙ key, the key trilinear in
// the point's coordinates c = 2 (R p + t − lo) / extent − 1. Per query: d/d R and t; and, where
// the table needs them (grad_point_queries non-null), d/d the point's query and d/d the key
// grid's corner rows, added into the table's gradients (serially on the CPU, atomically on a GPU:
// queries share rows).
template <typename T>
struct LoccPointCooccupancyBackwardFunctor {
  LoccPointCooccupancyFunctor<T> fwd;  // its scratch and outputs unused
  const int32_t* arg;                  // (Q, D) from the forward
  const T* grad_out;                   // (Q, D)
  T* grad_rotation;                    // (Q, 3, 3)
  T* grad_translation;                 // (Q, 3)
  T* grad_point_queries;               // (N, K, D), zeroed, or null: not wanted
  T* grad_keys;                        // (N·M³, D), zeroed (with grad_point_queries)

  static CN_HD void add(T* p, T v) {
#if defined(__CUDA_ARCH__)
    atomicAdd(p, v);
#else
    *p += v;
#endif
  }

  CN_HD void operator()(int64_t q) const {
    T gr[9] = {}, gt[3] = {};
    const int64_t d = fwd.d, m = fwd.m;
    for (int64_t ch = 0; ch < d; ++ch) {
      const int32_t j = arg[d * q + ch];
      const T up = grad_out[d * q + ch];
      if (j < 0 || up == T(0)) continue;
      const int64_t own_row = fwd.ids_own[q] * fwd.k + j;
      const T own = fwd.point_queries[d * own_row + ch];
      T c[3];
      fwd.inside(q, j, c);
      int64_t base[3];
      T frac[3];
      if (!sample_corners(c, m, base, frac)) continue;
      const int64_t first = fwd.ids_other[q] * m * m * m;
      T key = T(0), dkey[3] = {};  // the key and d key / d c, as grid_sample_rows forms them
      for (int corner = 0; corner < 8; ++corner) {
        int64_t cell;
        T w[3];
        if (!sample_corner(corner, m, base, frac, cell, w)) continue;
        const T row = fwd.keys[d * (first + cell) + ch];
        key += w[0] * w[1] * w[2] * row;
        for (int a = 0; a < 3; ++a) {
          const int bit = (corner >> (2 - a)) & 1;
          dkey[a] += (bit ? T(1) : T(-1)) * w[(a + 1) % 3] * w[(a + 2) % 3] * row * T(m) / T(2);
        }
        if (grad_point_queries) add(grad_keys + d * (first + cell) + ch, up * own * (w[0] * w[1] * w[2]));
      }
      if (grad_point_queries) add(grad_point_queries + d * own_row + ch, up * key);
      const T g = up * own;
      const T* p = fwd.points + 3 * own_row;
      for (int a = 0; a < 3; ++a) {
        const T gl = g * dkey[a] * T(2) / fwd.extent(q, a);  // d / d local[a]
        gt[a] += gl;
        for (int b = 0; b < 3; ++b) gr[3 * a + b] += gl * p[b];
      }
    }
    for (int i = 0; i < 9; ++i) grad_rotation[9 * q + i] = gr[i];
    for (int a = 0; a < 3; ++a) grad_translation[3 * q + a] = gt[a];
  }
};

}  // namespace contactnet

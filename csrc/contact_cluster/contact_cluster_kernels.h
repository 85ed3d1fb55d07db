// Contact clustering (Hauser, BLEM §3.4): each contact on body A is a 7-D point
// (x, wn * n, wp * p) -- position, axis-weighted normal and depth -- and at most k clusters are
// kept per query. Small sets use agglomerative (centroid-linkage) clustering, which the paper
// found marginally stabler; large sets use k-means with a deterministic farthest-point
// initialisation seeded at the deepest contact (no random noise injected into a simulation)
// and at most k Lloyd iterations (the paper's s = k), stopping early when no label changes.
// Lloyd runs on a deterministic stride sample of at most `kmeans_sample` contacts, after which
// every contact joins its nearest centre in one pass: O(k^2 S + k N) instead of O(k^2 N) for N
// contacts and sample size S, for a few-percent higher within-cluster cost (the centres of S
// evenly spread contacts, 64 per cluster by default, are those of the whole set up to sampling
// noise; measured -3% .. +8% on the benchmark contact sets). The Lloyd
// assignments skip, by Hamerly's bounds, the contacts whose nearest centre provably has not
// changed (see kmeans()).
//
// A cluster becomes one contact: mean position, normalised mean normal (the deepest member's
// normal if the mean vanishes), the maximum depth of its members (so clustering never hides
// penetration), and `source` = the deepest member's row, whose triangle ids it inherits.
#pragma once

#include <cstdint>
#include <limits>

#include "common/box.h"
#include "common/vec3.h"

namespace contactnet {

// A k-means centre in the scratch: 7 features, how far its last update moved it, half its
// distance to the nearest other centre, and its members' feature sum (7) and count during Lloyd,
// then its output cluster's accumulators (11, see add_member()).
constexpr int kCentreStride = 20;
constexpr int kAccumulators = 9;  // first slot of the Lloyd sums and the output accumulators

template <typename T>
struct ClusterFunctor {
  const T* points;          // (N, 3) packed contacts
  const T* normals;         // (N, 3)
  const T* depths;          // (N,)
  const int64_t* offsets;   // (Q + 1,)
  int64_t k;                // max clusters per query
  T wn, wp;                 // axis weights of the normal and the depth
  int64_t hierarchical_max; // sets of at most this size use agglomerative clustering
  int64_t kmeans_sample;    // larger sets run Lloyd on a stride sample of this many contacts
  T* sums;                  // scratch (N, 8): feature sums and member count per contact when
                            // merging; each contact's features in k-means
  int32_t* labels;          // scratch (N,)
  T* mind;                  // scratch (N,): distance to the nearest centre, then Hamerly's upper
                            // bound on the distance to the assigned centre
  T* lower;                 // scratch (N,): Hamerly's lower bound on the distance to any other
  T* centroids;             // scratch (Q * k, kCentreStride)
  T* out_points;            // (Q, k, 3)
  T* out_normals;           // (Q, k, 3)
  T* out_depths;            // (Q, k)
  int64_t* out_source;      // (Q, k), -1 for padding
  int64_t* out_counts;      // (Q,)

  CN_HD void feature(int64_t i, T f[7]) const {
    f[0] = points[3 * i];
    f[1] = points[3 * i + 1];
    f[2] = points[3 * i + 2];
    f[3] = wn * normals[3 * i];
    f[4] = wn * normals[3 * i + 1];
    f[5] = wn * normals[3 * i + 2];
    f[6] = wp * depths[i];
  }
  CN_HD static T dist2(const T a[7], const T* b) {
    T s = T(0);
    for (int d = 0; d < 7; ++d) s += (a[d] - b[d]) * (a[d] - b[d]);
    return s;
  }

  // Writes cluster `slot` of query q from the members i (rows base + i) with labels[base+i] == l.
  CN_HD void emit(int64_t q, int64_t slot, int64_t base, int64_t n, int32_t l) const {
    Vec3<T> x = make_vec3(T(0), T(0), T(0)), nsum = x;
    T depth = T(0);
    int64_t deepest = -1, members = 0;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t r = base + i;
      if (labels[r] != l) continue;
      x = x + load3(points + 3 * r);
      nsum = nsum + load3(normals + 3 * r);
      if (deepest < 0 || depths[r] > depth) {
        depth = depths[r];
        deepest = r;
      }
      ++members;
    }
    write_cluster(q, slot, x, nsum, members, depth, deepest);
  }
  // Writes cluster `slot` of query q from its members' point and normal sums, count, maximum
  // depth and deepest row.
  CN_HD void write_cluster(int64_t q, int64_t slot, const Vec3<T>& x, const Vec3<T>& nsum,
                           int64_t members, T depth, int64_t deepest) const {
    const int64_t o = q * k + slot;
    store3(out_points + 3 * o, (T(1) / T(members)) * x);
    const T len = norm(nsum);
    store3(out_normals + 3 * o,
           len > T(0) ? (T(1) / len) * nsum : load3(normals + 3 * deepest));
    out_depths[o] = depth;
    out_source[o] = deepest;
  }


  // Adds contact i (row base + i) to the output accumulators `a` of its cluster, in row order as
  // emit() does: point sum (0-2), normal sum (3-5), maximum depth (6), and the deepest member's
  // index and the member count as exact (high, low) pairs in base 2^20 (7-8, 9-10), exact in
  // float32 too.
  CN_HD void add_member(T* a, int64_t base, int64_t i) const {
    const int64_t r = base + i;
    for (int d = 0; d < 3; ++d) a[d] += points[3 * r + d];
    for (int d = 0; d < 3; ++d) a[3 + d] += normals[3 * r + d];
    if ((a[9] == T(0) && a[10] == T(0)) || depths[r] > a[6]) {
      a[6] = depths[r];
      a[7] = T(i >> 20);
      a[8] = T(i & ((1 << 20) - 1));
    }
    a[10] += T(1);
    if (a[10] == T(1 << 20)) {
      a[10] = T(0);
      a[9] += T(1);
    }
  }

  // Nearest and second-nearest centre of feature f (ties to the lower index, as a plain scan).
  CN_HD int32_t nearest(const T f[7], const T* cent, T& d2_best, T& d2_second) const {
    int32_t best = 0;
    d2_best = dist2(f, cent);
    d2_second = T(INFINITY);
    for (int64_t c = 1; c < k; ++c) {
      const T d2 = dist2(f, cent + kCentreStride * c);
      if (d2 < d2_best) {
        d2_second = d2_best;
        d2_best = d2;
        best = static_cast<int32_t>(c);
      } else if (d2 < d2_second) {
        d2_second = d2;
      }
    }
    return best;
  }

  // k-means of query q's n > k contacts (rows base ..); returns the clusters emitted. Lloyd
  // runs on m = min(n, kmeans_sample) of them, the stride sample rows base + (j n) / m, j < m (all
  // of them when m = n), from a deterministic farthest-point initialisation over the sample seeded
  // at the deepest of all n contacts, for at most k iterations, stopping when no label changes.
  // When m < n every contact then joins its nearest final centre (ties to the lower index).
  //
  // Each iteration assigns every contact its nearest centre, but a contact whose upper bound u on
  // the distance to its centre a is below both its lower bound l on the distance to every other
  // centre and half the distance from a to the nearest other centre keeps a without a scan
  // (Hamerly, "Making k-means even faster", 2010): after a centre update, u grows by a's shift
  // and l shrinks by the largest other shift. A contact is only skipped when the inequality
  // holds with a margin `tol` above the rounding of the bounds (relative to the feature set's
  // diameter), so every skipped contact's scan would have returned a as well: the labels, and
  // hence the clusters, are those of the plain scan.
  CN_HD int64_t kmeans(int64_t q, int64_t base, int64_t n) const {
    T* cent = centroids + kCentreStride * q * k;
    const int64_t m = n < kmeans_sample ? n : kmeans_sample;
    // Farthest-point initialisation from the deepest contact (lowest row on ties). The same
    // passes track each sampled contact's nearest centre (labels, ties to the lower index), its
    // squared distance (mind) and a lower bound on the distance to every other centre (lower):
    // the first Lloyd assignment, without a scan. A contact nearer than half-way to its nearest
    // centre c_l from a new centre c skips c's distance, which is then at least d(c, c_l) / 2 >
    // its own. Scratch row base + j holds sample j.
    int64_t first = 0;
    for (int64_t i = 1; i < n; ++i)
      if (depths[base + i] > depths[base + first]) first = i;
    feature(base + first, cent);
    T lo[7], hi[7];
    for (int d = 0; d < 7; ++d) lo[d] = hi[d] = cent[d];
    int64_t far = 0;
    for (int64_t i = 0; i < m; ++i) {
      T* f = sums + 8 * (base + i);  // computed once, read by every pass below
      feature(base + (m == n ? i : i * n / m), f);
      for (int d = 0; d < 7; ++d) {
        lo[d] = min_(lo[d], f[d]);
        hi[d] = max_(hi[d], f[d]);
      }
      mind[base + i] = dist2(f, cent);
      if (mind[base + i] > mind[base + far]) far = i;
      labels[base + i] = 0;
      lower[base + i] = T(INFINITY);
    }
    T diameter2 = T(0);
    for (int d = 0; d < 7; ++d) diameter2 += (hi[d] - lo[d]) * (hi[d] - lo[d]);
    const T tol = sqrt(diameter2) * std::numeric_limits<T>::epsilon() * T(32) * T(k + 8);
    for (int64_t c = 1; c < k; ++c) {
      T* cc = cent + kCentreStride * c;
      for (int d = 0; d < 7; ++d) cc[d] = sums[8 * (base + far) + d];
      // Per earlier centre j (slots 7, 8 are free until the first update): contacts of j with
      // squared distance below slot 7 skip cc; slot 8 is their lower bound on d(f, cc).
      for (int64_t j = 0; j < c; ++j) {
        T* cj = cent + kCentreStride * j;
        const T half = T(0.5) * (sqrt(dist2(cc, cj)) - tol);
        cj[7] = half > T(0) ? half * half : T(-1);
        cj[8] = half;
      }
      int64_t next = 0;
      for (int64_t i = 0; i < m; ++i) {
        const int64_t r = base + i;
        const T* cl = cent + kCentreStride * labels[r];
        if (mind[r] < cl[7]) {
          lower[r] = min_(lower[r], cl[8]);
        } else {
          const T d2 = dist2(sums + 8 * r, cc);
          if (d2 < mind[r]) {
            lower[r] = min_(lower[r], sqrt(mind[r]));
            mind[r] = d2;
            labels[r] = static_cast<int32_t>(c);
          } else {
            lower[r] = min_(lower[r], sqrt(d2));
          }
        }
        if (mind[r] > mind[base + next]) next = i;
      }
      far = next;
    }

    T* upper = mind;
    for (int64_t i = 0; i < m; ++i) upper[base + i] = sqrt(upper[base + i]);
    for (int64_t it = 0; it < k; ++it) {
      bool changed = it == 0;  // the initialisation made the first assignment
      // The two largest centre shifts of the last update (none before the first).
      T shift1 = T(0), shift2 = T(0);
      int64_t arg1 = -1;
      if (it > 0) {
        for (int64_t c = 0; c < k; ++c) {
          const T s = cent[kCentreStride * c + 7];
          if (s > shift1) {
            shift2 = shift1;
            shift1 = s;
            arg1 = c;
          } else if (s > shift2) {
            shift2 = s;
          }
        }
      }
      // The assignment pass also accumulates every cluster's feature sum and count in its
      // centre's scratch row (allocation-free and device-generic; each cluster's sum adds its
      // members in row order), so the contacts are streamed once per iteration.
      for (int64_t c = 0; c < k; ++c)
        for (int d = kAccumulators; d < kAccumulators + 8; ++d) cent[kCentreStride * c + d] = T(0);
      for (int64_t i = 0; i < m; ++i) {
        const int64_t r = base + i;
        const T* f = sums + 8 * r;
        if (it > 0) {
          const int32_t a = labels[r];
          const T* ca = cent + kCentreStride * a;
          upper[r] += ca[7];
          lower[r] -= a == arg1 ? shift2 : shift1;
          const T z = max_(lower[r], ca[8]);
          if (!(upper[r] + tol < z)) {
            upper[r] = sqrt(dist2(f, ca));  // tighten, then test again
            if (!(upper[r] + tol < z)) {
              T d2_best, d2_second;
              const int32_t best = nearest(f, cent, d2_best, d2_second);
              upper[r] = sqrt(d2_best);
              lower[r] = sqrt(d2_second);
              if (labels[r] != best) {
                labels[r] = best;
                changed = true;
              }
            }
          }
        }
        T* acc = cent + kCentreStride * labels[r] + kAccumulators;
        for (int d = 0; d < 7; ++d) acc[d] += f[d];
        acc[7] += T(1);
      }
      if (!changed) break;
      for (int64_t c = 0; c < k; ++c) {
        T* cc = cent + kCentreStride * c;
        const T* acc = cc + kAccumulators;
        const T m = acc[7];
        T moved2 = T(0);
        if (m > T(0)) {  // an emptied cluster keeps its previous centre
          for (int d = 0; d < 7; ++d) {
            const T v = acc[d] / m;
            moved2 += (v - cc[d]) * (v - cc[d]);
            cc[d] = v;
          }
        }
        cc[7] = sqrt(moved2);
      }
      for (int64_t c = 0; c < k; ++c) {
        T gap2 = T(INFINITY);
        for (int64_t e = 0; e < k; ++e)
          if (e != c) gap2 = min_(gap2, dist2(cent + kCentreStride * c, cent + kCentreStride * e));
        cent[kCentreStride * c + 8] = T(0.5) * sqrt(gap2);
      }
    }
    // Every cluster is accumulated in one pass over the contacts (emit() per cluster would take
    // k passes), into the centre rows' accumulators.
    for (int64_t c = 0; c < k; ++c)
      for (int d = kAccumulators; d < kCentreStride; ++d) cent[kCentreStride * c + d] = T(0);
    if (m == n) {
      for (int64_t i = 0; i < n; ++i)
        add_member(cent + kCentreStride * labels[base + i] + kAccumulators, base, i);
    } else {
      assign_all(cent, base, n);
    }
    int64_t count = 0;
    for (int64_t c = 0; c < k; ++c) {
      const T* a = cent + kCentreStride * c + kAccumulators;
      const int64_t members = (static_cast<int64_t>(a[9]) << 20) + static_cast<int64_t>(a[10]);
      if (members == 0) continue;
      const int64_t deepest = (static_cast<int64_t>(a[7]) << 20) + static_cast<int64_t>(a[8]);
      write_cluster(q, count++, make_vec3(a[0], a[1], a[2]), make_vec3(a[3], a[4], a[5]),
                    members, a[6], base + deepest);
    }
    return count;
  }

  // Every contact of a query (rows base .. base + n) joins its nearest final centre (ties to the
  // lower index, as nearest()), straight into that cluster's accumulators. The scan runs over a
  // transposed copy of the centres in the contacts' scratch (7 k <= 8 n values, free by now), in
  // blocks of 16 centres, so that the compiler vectorises it across centres; each centre's
  // squared distance still adds its 7 terms in order, so the labels are bitwise those of
  // dist2(). On the benchmark sets this beat pruning the scan by the centres' distances
  // (Elkan), whose branches and scalar distances cost more than the skipped ones.
  CN_HD void assign_all(T* cent, int64_t base, int64_t n) const {
    T* ct = sums + 8 * base;  // (7, k): feature d of centre c at d * k + c
    for (int d = 0; d < 7; ++d)
      for (int64_t c = 0; c < k; ++c) ct[d * k + c] = cent[kCentreStride * c + d];
    for (int64_t i = 0; i < n; ++i) {
      T f[7];
      feature(base + i, f);
      int64_t best = 0;
      T d2_best = T(INFINITY);
      for (int64_t c0 = 0; c0 < k; c0 += 16) {
        const int64_t nc = k - c0 < 16 ? k - c0 : 16;
        T d2[16];
        for (int j = 0; j < 16; ++j) d2[j] = T(0);
        for (int d = 0; d < 7; ++d) {
          const T* row = ct + d * k + c0;
          const T fd = f[d];
          for (int64_t j = 0; j < nc; ++j) d2[j] += (fd - row[j]) * (fd - row[j]);
        }
        for (int64_t j = 0; j < nc; ++j) {  // branch-free: the winner is data-dependent
          const bool nearer = d2[j] < d2_best;
          d2_best = nearer ? d2[j] : d2_best;
          best = nearer ? c0 + j : best;
        }
      }
      add_member(cent + kCentreStride * best + kAccumulators, base, i);
    }
  }

  CN_HD void operator()(int64_t q) const {
    const int64_t base = offsets[q], n = offsets[q + 1] - base;
    int64_t count = 0;
    if (n <= k) {
      for (int64_t i = 0; i < n; ++i) labels[base + i] = static_cast<int32_t>(i);
      for (int64_t i = 0; i < n; ++i) emit(q, count++, base, n, static_cast<int32_t>(i));
    } else if (n <= hierarchical_max) {
      for (int64_t i = 0; i < n; ++i) {
        T* s = sums + 8 * (base + i);
        feature(base + i, s);
        s[7] = T(1);
        labels[base + i] = static_cast<int32_t>(i);  // parent pointer during merging
      }
      for (int64_t active = n; active > k; --active) {
        T best = T(-1);
        int64_t bi = -1, bj = -1;
        for (int64_t i = 0; i < n; ++i) {
          const T* si = sums + 8 * (base + i);
          if (si[7] == T(0)) continue;
          T ci[7];
          for (int d = 0; d < 7; ++d) ci[d] = si[d] / si[7];
          for (int64_t j = i + 1; j < n; ++j) {
            const T* sj = sums + 8 * (base + j);
            if (sj[7] == T(0)) continue;
            T cj[7];
            for (int d = 0; d < 7; ++d) cj[d] = sj[d] / sj[7];
            const T d2 = dist2(ci, cj);
            if (best < T(0) || d2 < best) {
              best = d2;
              bi = i;
              bj = j;
            }
          }
        }
        T* si = sums + 8 * (base + bi);
        T* sj = sums + 8 * (base + bj);
        for (int d = 0; d < 8; ++d) si[d] += sj[d];
        sj[7] = T(0);
        labels[base + bj] = static_cast<int32_t>(bi);
      }
      // Resolve parent pointers to roots (parents have smaller indices, so one forward pass).
      for (int64_t i = 0; i < n; ++i) {
        const int32_t p = labels[base + i];
        if (p != i) labels[base + i] = labels[base + p];
      }
      for (int64_t i = 0; i < n; ++i)
        if (labels[base + i] == i) emit(q, count++, base, n, static_cast<int32_t>(i));
    } else {
      count = kmeans(q, base, n);
    }
    out_counts[q] = count;
    for (int64_t s = count; s < k; ++s) {
      const int64_t o = q * k + s;
      store3(out_points + 3 * o, make_vec3(T(0), T(0), T(0)));
      store3(out_normals + 3 * o, make_vec3(T(0), T(0), T(0)));
      out_depths[o] = T(0);
      out_source[o] = -1;
    }
  }
};

}  // namespace contactnet

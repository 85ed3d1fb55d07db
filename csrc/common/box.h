// Oriented bounding boxes (OBBs) of BVH nodes and the two tests the mesh queries prune with:
//  - obb_disjoint: the full 15-axis separating-axis test (Gottschalk, Lin & Manocha, "OBBTree",
//    SIGGRAPH 1996): 3 face normals of each box and the 9 cross products of their edges. Exact
//    for boxes (two convex polytopes are disjoint iff one of these axes separates them).
//  - obb_distance_lower_bound: the largest gap of the boxes' projections on the 6 face normals and
//    on the direction between approximate closest points of the boxes. Projection on a unit axis
//    is 1-Lipschitz, so every gap is <= the distance between the boxes; along the direction of
//    the true closest points it equals it.
//    (Adding the 9 normalised edge-pair axes was measured: it prunes too little for its cost,
//    mesh_distance got ~1.4x slower on 100k-triangle pairs.)
// Both take box a in A's frame and box b already moved into A's frame (obb_to_frame).
//
// Rounding: stored axes are unit and orthogonal only to within the storage precision, boxes are
// fitted in double and inflated (csrc/mesh_bvh), and a relative slack is subtracted from every
// gap, so a pair whose true gap is 0 (or equals a distance threshold) is never pruned.
#pragma once

#include "rigid.h"

namespace contactnet {

template <typename T>
struct BoxSlack;
// Relative slack subtracted from a gap so that rounding in the transforms never prunes a pair
// whose true distance equals the threshold.
template <>
struct BoxSlack<float> {
  static constexpr float rel = 1e-5f;
};
template <>
struct BoxSlack<double> {
  static constexpr double rel = 1e-12;
};

template <typename T>
CN_HD T abs_(T v) {
  return v < T(0) ? -v : v;
}
template <typename T>
CN_HD T max_(T a, T b) {
  return a > b ? a : b;
}
template <typename T>
CN_HD T min_(T a, T b) {
  return a < b ? a : b;
}

// The box {c + s0 ax[0] + s1 ax[1] + s2 ax[2] : |sk| <= h[k]} (ax orthonormal).
template <typename T>
struct Obb {
  Vec3<T> ax[3];
  Vec3<T> c;
  Vec3<T> h;
};

// Stored as 15 consecutive scalars: the three axes (rows), the centre, the half extents.
constexpr int kObbScalars = 15;

template <typename T>
CN_HD Obb<T> load_obb(const T* p) {
  return {{load3(p), load3(p + 3), load3(p + 6)}, load3(p + 9), load3(p + 12)};
}

template <typename T>
CN_HD Obb<T> obb_to_frame(const Obb<T>& b, const Rigid<T>& f) {
  return {{mul(f.R, b.ax[0]), mul(f.R, b.ax[1]), mul(f.R, b.ax[2])}, apply(f, b.c), b.h};
}

// Size used to decide which node of a pair to split (the larger box is split first), read from
// a stored box.
template <typename T>
CN_HD T box_size_at(const T* p) {
  return p[12] + p[13] + p[14];
}

// Relative rotation and translation of b in a's box frame: C[i][j] = a_i . b_j,
// ta[i] = a_i . (cb - ca), tb[j] = b_j . (cb - ca); plus the rounding slack of the pair.
template <typename T>
struct ObbPair {
  T C[3][3], absC[3][3];
  T ta[3], tb[3];
  T d2;     // |cb - ca|^2
  T slack;
};

template <typename T>
CN_HD ObbPair<T> obb_pair(const Obb<T>& a, const Obb<T>& b, const Rigid<T>& f) {
  ObbPair<T> p;
  const Vec3<T> d = b.c - a.c;
  const T ha[3] = {a.h.x, a.h.y, a.h.z}, hb[3] = {b.h.x, b.h.y, b.h.z};
  T scale = abs_(f.t.x) + abs_(f.t.y) + abs_(f.t.z);
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) {
      p.C[i][j] = dot(a.ax[i], b.ax[j]);
      p.absC[i][j] = abs_(p.C[i][j]);
    }
    p.ta[i] = dot(a.ax[i], d);
    p.tb[i] = dot(b.ax[i], d);
    scale += abs_(p.ta[i]) + ha[i] + hb[i];
  }
  p.d2 = norm2(d);
  p.slack = BoxSlack<T>::rel * scale;
  return p;
}

// True when a separating axis with a gap beyond the slack exists (then the boxes are disjoint).
// Axes are tried in the order that usually separates first (a's faces, b's faces, edge pairs),
// each as soon as its data is computed.
template <typename T>
CN_HD bool obb_disjoint(const Obb<T>& a, const Obb<T>& b, const Rigid<T>& f) {
  const Vec3<T> d = b.c - a.c;
  const T ha[3] = {a.h.x, a.h.y, a.h.z}, hb[3] = {b.h.x, b.h.y, b.h.z};
  // Same slack as obb_pair's, bounding sum |ta_i| by 2 |d|_1 so it is known up front.
  const T slack = BoxSlack<T>::rel *
                  (abs_(f.t.x) + abs_(f.t.y) + abs_(f.t.z) +
                   T(2) * (abs_(d.x) + abs_(d.y) + abs_(d.z)) + ha[0] + ha[1] + ha[2] + hb[0] +
                   hb[1] + hb[2]);
  T C[3][3], X[3][3], ta[3];
  // a's face normals: |ta_i| > ha_i + sum_j hb_j |C_ij|
  for (int i = 0; i < 3; ++i) {
    ta[i] = dot(a.ax[i], d);
    for (int j = 0; j < 3; ++j) {
      C[i][j] = dot(a.ax[i], b.ax[j]);
      X[i][j] = abs_(C[i][j]);
    }
    if (abs_(ta[i]) - ha[i] - (hb[0] * X[i][0] + hb[1] * X[i][1] + hb[2] * X[i][2]) > slack)
      return true;
  }
  // b's face normals
  for (int j = 0; j < 3; ++j)
    if (abs_(dot(b.ax[j], d)) - hb[j] - (ha[0] * X[0][j] + ha[1] * X[1][j] + ha[2] * X[2][j]) >
        slack)
      return true;
  // a_i x b_j (unnormalised, length <= 1, so a gap > slack is a true gap > slack / |L|).
  // With (i, i1, i2) and (j, j1, j2) cyclic: (a_i x b_j) . t = ta_i2 C_i1j - ta_i1 C_i2j, and
  // the supports are ha_i1 |C_i2j| + ha_i2 |C_i1j| and hb_j1 |C_ij2| + hb_j2 |C_ij1|.
  for (int i = 0; i < 3; ++i) {
    const int i1 = (i + 1) % 3, i2 = (i + 2) % 3;
    for (int j = 0; j < 3; ++j) {
      const int j1 = (j + 1) % 3, j2 = (j + 2) % 3;
      const T t = abs_(ta[i2] * C[i1][j] - ta[i1] * C[i2][j]);
      const T ra = ha[i1] * X[i2][j] + ha[i2] * X[i1][j];
      const T rb = hb[j1] * X[i][j2] + hb[j2] * X[i][j1];
      if (t - ra - rb > slack) return true;
    }
  }
  return false;
}

// Lower bound on the distance between the boxes (0: they may overlap). Once the face axes give
// more than `enough` (the caller's pruning threshold), that bound is returned as is.
template <typename T>
CN_HD T obb_distance_lower_bound(const Obb<T>& a, const Obb<T>& b, const Rigid<T>& f,
                                 T enough = T(INFINITY)) {
  const ObbPair<T> p = obb_pair(a, b, f);
  const T ha[3] = {a.h.x, a.h.y, a.h.z}, hb[3] = {b.h.x, b.h.y, b.h.z};
  const T (&X)[3][3] = p.absC;
  T gap = T(0);
  for (int i = 0; i < 3; ++i) {
    gap = max_(gap, abs_(p.ta[i]) - ha[i] - (hb[0] * X[i][0] + hb[1] * X[i][1] + hb[2] * X[i][2]));
    gap = max_(gap, abs_(p.tb[i]) - hb[i] - (ha[0] * X[0][i] + ha[1] * X[1][i] + ha[2] * X[2][i]));
  }
  if (gap - p.slack > enough) return gap - p.slack;
  // The direction between (approximate) closest points of the two boxes. By duality the gap along
  // the direction of the true closest points IS the distance; any other unit direction still
  // gives a valid bound. Alternating projections (a point of one box projected onto the other
  // and back) approach a closest pair; two rounds, in a's box coordinates (a's axes = identity,
  // b's axis j = column j of C, b's centre = ta), give most of the gain where the face axes are
  // loose: thin tilted boxes whose closest points lie off each other's faces.
  const T (&C)[3][3] = p.C;
  T pa[3], q[3];
  for (int i = 0; i < 3; ++i) pa[i] = max_(-ha[i], min_(ha[i], p.ta[i]));
  for (int round = 0; round < 2; ++round) {
    T s[3];
    for (int j = 0; j < 3; ++j) {
      const T sj = C[0][j] * (pa[0] - p.ta[0]) + C[1][j] * (pa[1] - p.ta[1]) +
                   C[2][j] * (pa[2] - p.ta[2]);
      s[j] = max_(-hb[j], min_(hb[j], sj));
    }
    for (int i = 0; i < 3; ++i) {
      q[i] = p.ta[i] + C[i][0] * s[0] + C[i][1] * s[1] + C[i][2] * s[2];
      pa[i] = max_(-ha[i], min_(ha[i], q[i]));
    }
  }
  const T n[3] = {q[0] - pa[0], q[1] - pa[1], q[2] - pa[2]};
  const T n2 = n[0] * n[0] + n[1] * n[1] + n[2] * n[2];
  if (n2 > T(0)) {
    T support = ha[0] * abs_(n[0]) + ha[1] * abs_(n[1]) + ha[2] * abs_(n[2]);
    for (int j = 0; j < 3; ++j) support += hb[j] * abs_(n[0] * C[0][j] + n[1] * C[1][j] + n[2] * C[2][j]);
    const T along = n[0] * p.ta[0] + n[1] * p.ta[1] + n[2] * p.ta[2] - support;
    if (along > gap * sqrt(n2)) gap = along / sqrt(n2);
  }
  gap -= p.slack;
  return gap > T(0) ? gap : T(0);
}

}  // namespace contactnet

// Oriented bounding boxes (OBBs) of BVH nodes and the two tests the mesh queries prune with, on
// box b (a node of mesh B) expressed in the box frame of box a (a node of mesh A):
//  - obb_separation / obb_disjoint: the full 15-axis separating-axis test (Gottschalk, Lin &
//    Manocha, "OBBTree", SIGGRAPH 1996): 3 face normals of each box and the 9 cross products of
//    their edges. Exact for boxes (two convex polytopes are disjoint iff one of these axes
//    separates them).
//  - obb_distance_lower_bound: the largest gap of the boxes' projections on the 6 face normals and
//    on the direction between approximate closest points of the boxes. Projection on a unit axis
//    is 1-Lipschitz, so every gap is <= the distance between the boxes; along the direction of
//    the true closest points it equals it. (The 9 normalised edge-pair axes and the centre line
//    were measured too: they prune too little for their cost.)
//
// A traversal step tests the two children of one node against the other, fixed node, so the
// fixed node's part of the relative frame is computed once (FixedA / FixedB) and each child costs
// one 3x3 product (ObbRel).
//
// Storage and rounding: boxes are stored in float32 whatever the query precision T (a node is one
// 64-byte cache line, common/bvh.h), and the traversals test them in float32 arithmetic
// (common/bvh.h box_frame). They are fitted in double around their axes and centre as
// rounded to float32, half extents rounded up (csrc/mesh_bvh), so they contain their triangles
// exactly; but the stored axes are unit and orthogonal only to within float32 rounding (a few
// 1e-8), which moves every projection by at most ~3e-7 of the pair's scale (offsets and extents).
// A slack of 1e-5 of that scale is subtracted from every gap, which also covers float32
// arithmetic (~1e-6 of the scale), so a pair whose true gap is 0 (or equals a distance
// threshold) is never pruned.
#pragma once

#include "rigid.h"

namespace contactnet {

template <typename T>
struct BoxSlack;
// Relative slack subtracted from a gap computed from data stored in T, so that rounding never
// prunes a pair whose true distance equals the threshold. Box tests use BoxSlack<float> (boxes
// are stored in float32); triangle culls use their own precision's.
template <>
struct BoxSlack<float> {
  static constexpr float rel = 1e-5f;
};
template <>
struct BoxSlack<double> {
  static constexpr double rel = 1e-12;
};

// fabs, not `v < 0 ? -v : v`: that one returns -0.0 for -0.0, so compilers cannot reduce it to
// a sign-bit mask and emit a compare-and-blend or a branch; a box test takes a dozen of them
// (mesh_collide ran 2x slower with it). Gaps only, so the sign of a zero never matters.
CN_HD float abs_(float v) { return fabsf(v); }
CN_HD double abs_(double v) { return fabs(v); }
template <typename T>
CN_HD T max_(T a, T b) {
  return a > b ? a : b;
}
template <typename T>
CN_HD T min_(T a, T b) {
  return a < b ? a : b;
}

// A box {c + s0 ax[0] + s1 ax[1] + s2 ax[2] : |sk| <= h[k]} (ax orthonormal) is stored as 15
// consecutive float32: the three axes (rows), the centre, the half extents. Tests read it into
// the query precision T.
constexpr int kObbScalars = 15;

// Size used to decide which node of a pair to split (the larger box is split first).
CN_HD float box_size_at(const float* p) { return p[12] + p[13] + p[14]; }

template <typename T>
CN_HD Vec3<T> load3_as(const float* p) {
  return make_vec3(T(p[0]), T(p[1]), T(p[2]));
}

// Box b in box a's frame: C[i][j] = a_i . b_j, ta[i] = a_i . (cb - ca), half extents, and the
// rounding slack of the pair.
template <typename T>
struct ObbRel {
  T C[3][3];
  T ta[3];
  T ha[3], hb[3];
  T slack;
};

// |p|_1 of a stored centre: the mesh-frame offsets of the boxes, which the relative frame adds
// and cancels (t - ca + R cb), belong to the rounding scale.
CN_HD float l1_at(const float* p) { return fabsf(p[0]) + fabsf(p[1]) + fabsf(p[2]); }

// The relative frame's scale: |t| of the mesh transform, the boxes' centres in their mesh frames,
// their offset and sizes.
template <typename T>
CN_HD void finish_rel(ObbRel<T>& r, T tscale) {
  T s = tscale;
  for (int i = 0; i < 3; ++i) s += abs_(r.ta[i]) + r.ha[i] + r.hb[i];
  r.slack = T(BoxSlack<float>::rel) * s;
}

// A's node fixed, B's children tested: M = A_axes R (rows a_i^T R), u = A_axes (t - ca), so that
// for a box b of mesh B, C = M B_axes^T and ta = M cb + u.
template <typename T>
struct FixedA {
  T M[3][3];
  T u[3];
  T ha[3];
  T tscale;
};
template <typename T>
CN_HD FixedA<T> fixed_a(const float* a, const Rigid<T>& f) {
  FixedA<T> fa;
  const Vec3<T> tc = f.t - load3_as<T>(a + 9);
  for (int i = 0; i < 3; ++i) {
    const Vec3<T> ai = load3_as<T>(a + 3 * i);
    for (int k = 0; k < 3; ++k)
      fa.M[i][k] = ai.x * f.R.m[0][k] + ai.y * f.R.m[1][k] + ai.z * f.R.m[2][k];
    fa.u[i] = dot(ai, tc);
    fa.ha[i] = a[12 + i];
  }
  fa.tscale = abs_(f.t.x) + abs_(f.t.y) + abs_(f.t.z) + l1_at(a + 9);
  return fa;
}
template <typename T>
CN_HD ObbRel<T> obb_rel(const FixedA<T>& fa, const float* b) {
  ObbRel<T> r;
  const float* cb = b + 9;
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j)
      r.C[i][j] = fa.M[i][0] * b[3 * j] + fa.M[i][1] * b[3 * j + 1] + fa.M[i][2] * b[3 * j + 2];
    r.ta[i] = fa.M[i][0] * cb[0] + fa.M[i][1] * cb[1] + fa.M[i][2] * cb[2] + fa.u[i];
    r.ha[i] = fa.ha[i];
    r.hb[i] = b[12 + i];
  }
  finish_rel(r, fa.tscale + l1_at(cb));
  return r;
}

// B's node fixed, A's children tested: B's box moved into A's frame once.
template <typename T>
struct FixedB {
  Vec3<T> ax[3];
  Vec3<T> c;
  T hb[3];
  T tscale;
};
template <typename T>
CN_HD FixedB<T> fixed_b(const float* b, const Rigid<T>& f) {
  FixedB<T> fb;
  for (int j = 0; j < 3; ++j) {
    fb.ax[j] = mul(f.R, load3_as<T>(b + 3 * j));
    fb.hb[j] = b[12 + j];
  }
  fb.c = apply(f, load3_as<T>(b + 9));
  fb.tscale = abs_(f.t.x) + abs_(f.t.y) + abs_(f.t.z) + l1_at(b + 9);
  return fb;
}
template <typename T>
CN_HD ObbRel<T> obb_rel(const FixedB<T>& fb, const float* a) {
  ObbRel<T> r;
  const Vec3<T> d = fb.c - load3_as<T>(a + 9);
  for (int i = 0; i < 3; ++i) {
    const Vec3<T> ai = load3_as<T>(a + 3 * i);
    for (int j = 0; j < 3; ++j) r.C[i][j] = dot(ai, fb.ax[j]);
    r.ta[i] = dot(ai, d);
    r.ha[i] = a[12 + i];
    r.hb[i] = fb.hb[i];
  }
  finish_rel(r, fb.tscale + l1_at(a + 9));
  return r;
}

template <typename T>
CN_HD void abs_matrix(const T (&C)[3][3], T (&X)[3][3]) {
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) X[i][j] = abs_(C[i][j]);
}

// Gap between the boxes along a's face normal k: |ta_k| - ha_k - sum_j hb_j |C_kj| (X = |C|).
template <typename T>
CN_HD T face_gap_a(const ObbRel<T>& r, const T (&X)[3][3], int k) {
  return abs_(r.ta[k]) - r.ha[k] - (r.hb[0] * X[k][0] + r.hb[1] * X[k][1] + r.hb[2] * X[k][2]);
}

// Gap along b's face normal k, with tb_k = b_k . d = sum_i C_ik ta_i.
template <typename T>
CN_HD T face_gap_b(const ObbRel<T>& r, const T (&X)[3][3], int k) {
  const T tb = r.C[0][k] * r.ta[0] + r.C[1][k] * r.ta[1] + r.C[2][k] * r.ta[2];
  return abs_(tb) - r.hb[k] - (r.ha[0] * X[0][k] + r.ha[1] * X[1][k] + r.ha[2] * X[2][k]);
}

// The boxes' separation along the 15 axes: the first gap found beyond the slack (then the boxes
// are disjoint), else the largest gap along the 6 face axes (<= slack, more negative the
// deeper the boxes overlap: the boolean traversal enters the deepest pair first, where the
// surfaces are likeliest to cross). Face axes are tried thinnest first: node boxes of surface
// patches are slabs (the build orders axes by decreasing spread), and facing slabs are usually
// separated along a normal.
template <typename T>
CN_HD T obb_separation(const ObbRel<T>& r) {
  const T (&C)[3][3] = r.C;
  const T* ha = r.ha;
  const T* hb = r.hb;
  T X[3][3];
  abs_matrix(C, X);
  T deepest = -T(INFINITY);
  for (int k = 2; k >= 0; --k) {
    const T ga = face_gap_a(r, X, k);
    if (ga > r.slack) return ga;
    const T gb = face_gap_b(r, X, k);
    if (gb > r.slack) return gb;
    deepest = max_(deepest, max_(ga, gb));
  }
  // a_i x b_j (unnormalised, length <= 1, so a gap > slack is a true gap > slack / |L|).
  // With (i, i1, i2) and (j, j1, j2) cyclic: (a_i x b_j) . t = ta_i2 C_i1j - ta_i1 C_i2j, and
  // the supports are ha_i1 |C_i2j| + ha_i2 |C_i1j| and hb_j1 |C_ij2| + hb_j2 |C_ij1|.
  for (int i = 0; i < 3; ++i) {
    const int i1 = (i + 1) % 3, i2 = (i + 2) % 3;
    for (int j = 0; j < 3; ++j) {
      const int j1 = (j + 1) % 3, j2 = (j + 2) % 3;
      const T t = abs_(r.ta[i2] * C[i1][j] - r.ta[i1] * C[i2][j]);
      const T ra = ha[i1] * X[i2][j] + ha[i2] * X[i1][j];
      const T rb = hb[j1] * X[i][j2] + hb[j2] * X[i][j1];
      if (t - ra - rb > r.slack) return t - ra - rb;
    }
  }
  return deepest;
}

// True when a separating axis with a gap beyond the slack exists (then the boxes are disjoint).
template <typename T>
CN_HD bool obb_disjoint(const ObbRel<T>& r) {
  return obb_separation(r) > r.slack;
}

// Lower bound on the distance between the boxes (0: they may overlap). Once the face axes give
// more than `enough` (the caller's pruning threshold), that bound is returned as is.
template <typename T>
CN_HD T obb_distance_lower_bound(const ObbRel<T>& r, T enough = T(INFINITY)) {
  const T (&C)[3][3] = r.C;
  const T* ha = r.ha;
  const T* hb = r.hb;
  T X[3][3];
  abs_matrix(C, X);
  T gap = T(0);
  for (int i = 0; i < 3; ++i) gap = max_(gap, max_(face_gap_a(r, X, i), face_gap_b(r, X, i)));
  if (gap - r.slack > enough) return gap - r.slack;
  // The direction between (approximate) closest points of the two boxes. By duality the gap along
  // the direction of the true closest points IS the distance; any other unit direction still
  // gives a valid bound. Alternating projections (a point of one box projected onto the other
  // and back) approach a closest pair; two rounds, in a's box coordinates (a's axes = identity,
  // b's axis j = column j of C, b's centre = ta), give most of the gain where the face axes are
  // loose: thin tilted boxes whose closest points lie off each other's faces.
  T pa[3], q[3];
  for (int i = 0; i < 3; ++i) pa[i] = max_(-ha[i], min_(ha[i], r.ta[i]));
  for (int round = 0; round < 2; ++round) {
    T s[3];
    for (int j = 0; j < 3; ++j) {
      const T sj = C[0][j] * (pa[0] - r.ta[0]) + C[1][j] * (pa[1] - r.ta[1]) +
                   C[2][j] * (pa[2] - r.ta[2]);
      s[j] = max_(-hb[j], min_(hb[j], sj));
    }
    for (int i = 0; i < 3; ++i) {
      q[i] = r.ta[i] + C[i][0] * s[0] + C[i][1] * s[1] + C[i][2] * s[2];
      pa[i] = max_(-ha[i], min_(ha[i], q[i]));
    }
  }
  const T n[3] = {q[0] - pa[0], q[1] - pa[1], q[2] - pa[2]};
  const T n2 = n[0] * n[0] + n[1] * n[1] + n[2] * n[2];
  if (n2 > T(0)) {
    T support = ha[0] * abs_(n[0]) + ha[1] * abs_(n[1]) + ha[2] * abs_(n[2]);
    for (int j = 0; j < 3; ++j)
      support += hb[j] * abs_(n[0] * C[0][j] + n[1] * C[1][j] + n[2] * C[2][j]);
    const T along = n[0] * r.ta[0] + n[1] * r.ta[1] + n[2] * r.ta[2] - support;
    if (along > gap * sqrt(n2)) gap = along / sqrt(n2);
  }
  gap -= r.slack;
  return gap > T(0) ? gap : T(0);
}

}  // namespace contactnet

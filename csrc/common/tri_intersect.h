// Boolean triangle–triangle intersection for collision queries: do two triangles intersect or
// touch? Same answer as `triangle_triangle_closest(A, B).dist2 == 0` (distance.h), at a fraction
// of its cost.
//
// Guigue & Devillers, "Fast and robust triangle-triangle overlap test using orientation
// predicates" (J. Graphics Tools 8(1), 2003), which recasts Möller's interval test (1997) without
// divisions:
//  1. Each triangle's vertices are classified against the other's plane by orientation
//     determinants [a, b, c, d] = ((b - a) x (c - a)) . (d - a). All three strictly on one side:
//     a plane separates the triangles.
//  2. Otherwise each triangle has one vertex alone on its side. Rotate the vertex order (which
//     keeps the orientation) so that it comes first: T1 = (p1, q1, r1), T2 = (p2, q2, r2); swap
//     q2, r2 if p1 lies below T2's plane and q1, r1 if p2 lies below T1's, so that p1 is above
//     plane(T2) and p2 above plane(T1). The planes then meet in a line L oriented by
//     n1 x n2, on which T1 cuts the interval [j, i] (j on edge p1r1, i on edge p1q1) and T2 cuts
//     [k, l] (k on p2q2, l on p2r2). The intervals overlap iff k <= i and j <= l, which are the
//     signs of two determinants: [p1, q1, p2, q2] <= 0 and [p1, r1, r2, p2] <= 0.
//
// Robustness: every decision is the sign of one orientation determinant, whose rounding error is
// a few ulps of the product of its three edge lengths. A determinant within kTriBand of that
// product (a vertex on or near the other's plane, coplanar triangles, touching edges) is not
// trusted: the pair is handed to the exact distance instead. So is a degenerate triangle (no
// usable plane). Away from those bands the predicates decide what exact arithmetic decides.
#pragma once

#include <cfloat>

#include "distance.h"

namespace contactnet {

// |det| <= band * |x| |y| |z| (x, y, z the determinant's three edge vectors) is "maybe zero".
// Shewchuk's orient3d error bound is ~8 ulps of the permanent (<= sqrt(6) |x||y||z|); 64 ulps
// leave ample room for the rounding of the vertices themselves.
template <typename T>
struct TriBand;
template <>
struct TriBand<float> {
  static constexpr float rel2 = (64.0f * FLT_EPSILON) * (64.0f * FLT_EPSILON);
};
template <>
struct TriBand<double> {
  static constexpr double rel2 = (64.0 * DBL_EPSILON) * (64.0 * DBL_EPSILON);
};

// Orientation determinant [a, b, c, d] and whether its sign can be trusted.
template <typename T>
CN_HD T orient3d(const Vec3<T>& a, const Vec3<T>& b, const Vec3<T>& c, const Vec3<T>& d,
                 bool& sure) {
  const Vec3<T> x = b - a, y = c - a, z = d - a;
  const T det = dot(cross(x, y), z);
  sure = det * det > TriBand<T>::rel2 * norm2(x) * norm2(y) * norm2(z);
  return det;
}

// The closest-points distance's answer (slow), used where the predicates are not sure. It is
// exact up to that distance's rounding: a pair that touches at a point no float holds (or whose
// float32 distance rounds to a few ulps) can come out either way.
template <typename T>
CN_HD bool triangles_intersect_by_distance(const Vec3<T> A[3], const Vec3<T> B[3]) {
  return !(triangle_triangle_closest(A, B).dist2 > T(0));
}

// Index of the vertex whose sign differs from the other two (all three signs nonzero and not
// all equal).
CN_HD int lone_vertex(bool pos0, bool pos1, bool pos2) {
  return pos1 == pos2 ? 0 : (pos0 == pos2 ? 1 : 2);
}

template <typename T>
CN_HD bool triangles_intersect(const Vec3<T> A[3], const Vec3<T> B[3]) {
  const Vec3<T> a1 = A[1] - A[0], a2 = A[2] - A[0];
  const Vec3<T> b1 = B[1] - B[0], b2 = B[2] - B[0];
  const Vec3<T> nA = cross(a1, a2), nB = cross(b1, b2);
  const T nnA = norm2(nA), nnB = norm2(nB);
  const T la = norm2(a1) * norm2(a2), lb = norm2(b1) * norm2(b2);
  if (nnA <= Eps<T>::degenerate * la || nnB <= Eps<T>::degenerate * lb)
    return triangles_intersect_by_distance(A, B);

  // Step 1: A's vertices against B's plane. The separating case is by far the commonest in a
  // BVH leaf, so test it before paying for the bands.
  T sA[3];
  for (int i = 0; i < 3; ++i) sA[i] = dot(nB, A[i] - B[0]);
  if (same_strict_side(sA[0], sA[1], sA[2])) {
    // Sure unless the nearest vertex is within the band of the plane.
    bool sure = true;
    for (int i = 0; i < 3; ++i) sure = sure && sA[i] * sA[i] > TriBand<T>::rel2 * lb * norm2(A[i] - B[0]);
    return sure ? false : triangles_intersect_by_distance(A, B);
  }
  T sB[3];
  for (int i = 0; i < 3; ++i) sB[i] = dot(nA, B[i] - A[0]);
  if (same_strict_side(sB[0], sB[1], sB[2])) {
    bool sure = true;
    for (int i = 0; i < 3; ++i) sure = sure && sB[i] * sB[i] > TriBand<T>::rel2 * la * norm2(B[i] - A[0]);
    return sure ? false : triangles_intersect_by_distance(A, B);
  }
  // Both triangles straddle the other's plane. Every vertex must be surely off the other plane,
  // else (touching, coplanar) the exact test decides.
  for (int i = 0; i < 3; ++i) {
    if (!(sA[i] * sA[i] > TriBand<T>::rel2 * lb * norm2(A[i] - B[0])) ||
        !(sB[i] * sB[i] > TriBand<T>::rel2 * la * norm2(B[i] - A[0])))
      return triangles_intersect_by_distance(A, B);
  }

  // Step 2: canonical order (see the header comment).
  const int ia = lone_vertex(sA[0] > T(0), sA[1] > T(0), sA[2] > T(0));
  const int ib = lone_vertex(sB[0] > T(0), sB[1] > T(0), sB[2] > T(0));
  const Vec3<T> p1 = A[ia];
  Vec3<T> q1 = A[(ia + 1) % 3], r1 = A[(ia + 2) % 3];
  const Vec3<T> p2 = B[ib];
  Vec3<T> q2 = B[(ib + 1) % 3], r2 = B[(ib + 2) % 3];
  if (sA[ia] < T(0)) {  // flip T2 so that p1 is above it
    const Vec3<T> t = q2;
    q2 = r2;
    r2 = t;
  }
  if (sB[ib] < T(0)) {  // flip T1 so that p2 is above it
    const Vec3<T> t = q1;
    q1 = r1;
    r1 = t;
  }
  bool sure1, sure2;
  const T k_vs_i = orient3d(p1, q1, p2, q2, sure1);
  if (sure1 && k_vs_i > T(0)) return false;  // T2's interval starts after T1's ends
  const T j_vs_l = orient3d(p1, r1, r2, p2, sure2);
  if (sure2 && j_vs_l > T(0)) return false;  // T1's interval starts after T2's ends
  if (sure1 && sure2) return true;
  return triangles_intersect_by_distance(A, B);
}

}  // namespace contactnet

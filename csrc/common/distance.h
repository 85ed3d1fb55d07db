// Exact closest points between geometric primitives, shared by every op (triangle distances, BVH
// mesh distance, BLEM contacts, IPC barriers) on both devices.
//
// Every function first decides the closest-feature type, then evaluates a closed form for it.
// "dist2" is always the SQUARED Euclidean distance. Closest points are returned as barycentric
// weights / segment parameters of their primitive, so callers can both rebuild the points and
// chain-rule gradients onto the primitive's vertices.
//
// Feature-type numbering matches IPC Toolkit's PointTriangleDistanceType / EdgeEdgeDistanceType
// (edges of triangle (t0, t1, t2): E0 = t0t1, E1 = t1t2, E2 = t2t0).
#pragma once

#include <cstdint>

#include "vec3.h"

namespace contactnet {

enum PointEdgeType : int8_t { PE_P_E0 = 0, PE_P_E1 = 1, PE_P_E = 2 };

enum PointTriangleType : int8_t {
  PT_P_T0 = 0,
  PT_P_T1 = 1,
  PT_P_T2 = 2,
  PT_P_E0 = 3,
  PT_P_E1 = 4,
  PT_P_E2 = 5,
  PT_P_T = 6,
};

enum EdgeEdgeType : int8_t {
  EE_EA0_EB0 = 0,
  EE_EA0_EB1 = 1,
  EE_EA1_EB0 = 2,
  EE_EA1_EB1 = 3,
  EE_EA_EB0 = 4,
  EE_EA_EB1 = 5,
  EE_EA0_EB = 6,
  EE_EA1_EB = 7,
  EE_EA_EB = 8,
};

// ---------------------------------------------------------------------------------------------
// Point–segment. Closest point = a + t (b - a).
template <typename T>
struct PointSegmentResult {
  T dist2;
  T t;
  int8_t type;  // PointEdgeType
};

template <typename T>
CN_HD PointSegmentResult<T> point_segment_closest(const Vec3<T>& p, const Vec3<T>& a,
                                                  const Vec3<T>& b) {
  const Vec3<T> ab = b - a;
  const T len2 = norm2(ab);
  T t = len2 > T(0) ? dot(p - a, ab) / len2 : T(0);
  int8_t type = PE_P_E;
  if (!(t > T(0))) {  // also catches a zero-length segment
    t = T(0);
    type = PE_P_E0;
  } else if (t >= T(1)) {
    t = T(1);
    type = PE_P_E1;
  }
  const T d2 = norm2(p - (a + t * ab));
  return {d2, t, type};
}

// ---------------------------------------------------------------------------------------------
// Point–triangle. Closest point = w0 t0 + w1 t1 + w2 t2.
template <typename T>
struct PointTriangleResult {
  T dist2;
  T w0, w1, w2;
  int8_t type;  // PointTriangleType
};

// A triangle whose area is negligible against its edge lengths (collinear or repeated vertices)
// has no usable plane; its distance is then that of its three edges.
template <typename T>
CN_HD bool triangle_is_degenerate(const Vec3<T>& ab, const Vec3<T>& ac, const Vec3<T>& n) {
  return norm2(n) <= Eps<T>::degenerate * norm2(ab) * norm2(ac);
}

template <typename T>
CN_HD PointTriangleResult<T> point_degenerate_triangle_closest(const Vec3<T>& p,
                                                               const Vec3<T>& t0,
                                                               const Vec3<T>& t1,
                                                               const Vec3<T>& t2) {
  // Edges E0 = t0t1, E1 = t1t2, E2 = t2t0, each mapped back onto triangle weights and types.
  const PointSegmentResult<T> e0 = point_segment_closest(p, t0, t1);
  const PointSegmentResult<T> e1 = point_segment_closest(p, t1, t2);
  const PointSegmentResult<T> e2 = point_segment_closest(p, t2, t0);
  const int8_t vertex_of[3][2] = {{PT_P_T0, PT_P_T1}, {PT_P_T1, PT_P_T2}, {PT_P_T2, PT_P_T0}};
  const PointSegmentResult<T>* best = &e0;
  int edge = 0;
  if (e1.dist2 < best->dist2) {
    best = &e1;
    edge = 1;
  }
  if (e2.dist2 < best->dist2) {
    best = &e2;
    edge = 2;
  }
  T w[3] = {T(0), T(0), T(0)};
  w[edge] = T(1) - best->t;
  w[(edge + 1) % 3] = best->t;
  int8_t type = best->type == PE_P_E ? int8_t(PT_P_E0 + edge) : vertex_of[edge][best->type];
  return {best->dist2, w[0], w[1], w[2], type};
}

// Voronoi-region walk (Ericson, Real-Time Collision Detection §5.1.5) with an explicit
// degenerate-triangle branch so no division can be by zero.
template <typename T>
CN_HD PointTriangleResult<T> point_triangle_closest(const Vec3<T>& p, const Vec3<T>& t0,
                                                    const Vec3<T>& t1, const Vec3<T>& t2) {
  const Vec3<T> ab = t1 - t0;
  const Vec3<T> ac = t2 - t0;
  const Vec3<T> n = cross(ab, ac);
  if (triangle_is_degenerate(ab, ac, n)) return point_degenerate_triangle_closest(p, t0, t1, t2);

  const Vec3<T> ap = p - t0;
  const T d1 = dot(ab, ap);
  const T d2 = dot(ac, ap);
  if (d1 <= T(0) && d2 <= T(0)) return {norm2(ap), T(1), T(0), T(0), PT_P_T0};

  const Vec3<T> bp = p - t1;
  const T d3 = dot(ab, bp);
  const T d4 = dot(ac, bp);
  if (d3 >= T(0) && d4 <= d3) return {norm2(bp), T(0), T(1), T(0), PT_P_T1};

  const T vc = d1 * d4 - d3 * d2;
  if (vc <= T(0) && d1 >= T(0) && d3 <= T(0)) {
    const T v = d1 / (d1 - d3);  // d1 - d3 = |ab|^2 > 0
    return {norm2(p - (t0 + v * ab)), T(1) - v, v, T(0), PT_P_E0};
  }

  const Vec3<T> cp = p - t2;
  const T d5 = dot(ab, cp);
  const T d6 = dot(ac, cp);
  if (d6 >= T(0) && d5 <= d6) return {norm2(cp), T(0), T(0), T(1), PT_P_T2};

  const T vb = d5 * d2 - d1 * d6;
  if (vb <= T(0) && d2 >= T(0) && d6 <= T(0)) {
    const T w = d2 / (d2 - d6);  // d2 - d6 = |ac|^2 > 0
    return {norm2(p - (t0 + w * ac)), T(1) - w, T(0), w, PT_P_E2};
  }

  const T va = d3 * d6 - d5 * d4;
  if (va <= T(0) && (d4 - d3) >= T(0) && (d5 - d6) >= T(0)) {
    const T w = (d4 - d3) / ((d4 - d3) + (d5 - d6));  // denominator = |bc|^2 > 0
    return {norm2(p - (t1 + w * (t2 - t1))), T(0), T(1) - w, w, PT_P_E1};
  }

  // Face interior: the plane distance (n.ap)^2 / |n|^2 is more accurate than |p - closest|^2
  // when p is near the plane.
  const T inv = T(1) / (va + vb + vc);
  const T v = vb * inv;
  const T w = vc * inv;
  const T np = dot(n, ap);
  return {np * np / norm2(n), T(1) - v - w, v, w, PT_P_T};
}

// ---------------------------------------------------------------------------------------------
// Segment–segment. Closest points: a0 + s (a1 - a0) and b0 + t (b1 - b0).
template <typename T>
struct SegmentSegmentResult {
  T dist2;
  T s, t;
  int8_t type;  // EdgeEdgeType
};

template <typename T>
CN_HD int8_t edge_edge_type_from_params(T s, T t) {
  // 0: at the first end, 1: at the second end, 2: interior.
  const int sa = s <= T(0) ? 0 : (s >= T(1) ? 1 : 2);
  const int tb = t <= T(0) ? 0 : (t >= T(1) ? 1 : 2);
  const int8_t table[3][3] = {{EE_EA0_EB0, EE_EA0_EB1, EE_EA0_EB},
                              {EE_EA1_EB0, EE_EA1_EB1, EE_EA1_EB},
                              {EE_EA_EB0, EE_EA_EB1, EE_EA_EB}};
  return table[sa][tb];
}

// Ericson §5.1.9 with relative (scale-free) tests for zero-length and parallel segments.
// d1 = a1 - a0, d2 = b1 - b0, and their squared lengths a, e are passed in so that callers
// testing many edge pairs compute them once per edge.
template <typename T>
CN_HD SegmentSegmentResult<T> segment_segment_closest(const Vec3<T>& a0, const Vec3<T>& d1, T a,
                                                      const Vec3<T>& b0, const Vec3<T>& d2, T e) {
  const Vec3<T> r = a0 - b0;
  const T f = dot(d2, r);
  T s, t;
  if (a == T(0) && e == T(0)) {
    s = T(0);
    t = T(0);
  } else if (a == T(0)) {
    s = T(0);
    t = clamp01(f / e);
  } else {
    const T c = dot(d1, r);
    if (e == T(0)) {
      t = T(0);
      s = clamp01(-c / a);
    } else {
      const T b = dot(d1, d2);
      const T denom = a * e - b * b;  // = |d1 x d2|^2 >= 0
      // Parallel: any s on the overlap is optimal; start at s = 0 and let the clamps below fix it.
      s = denom > Eps<T>::parallel * a * e ? clamp01((b * f - c * e) / denom) : T(0);
      t = (b * s + f) / e;
      if (t < T(0)) {
        t = T(0);
        s = clamp01(-c / a);
      } else if (t > T(1)) {
        t = T(1);
        s = clamp01((b - c) / a);
      }
    }
  }
  T d2s = norm2((r + s * d1) - t * d2);  // (a0 + s d1) - (b0 + t d2)
  // Nearly parallel segments make (b f - c e) / denom cancel catastrophically (errors ~1e-9 m on
  // metre-long float64 segments sharing an end). Their minimum is then at an endpoint of one of
  // them up to O(sin^2) terms, so the four endpoint-to-segment distances, each well conditioned,
  // can only improve the candidate.
  if (a > T(0) && e > T(0)) {
    const T b = dot(d1, d2);
    if (a * e - b * b <= Eps<T>::near_parallel * a * e) {
      const T c = dot(d1, r);
      const T ts[2] = {clamp01(f / e), clamp01((f + b) / e)};  // a0, a1 onto segment b
      const T ss[2] = {clamp01(-c / a), clamp01((b - c) / a)};  // b0, b1 onto segment a
      for (int k = 0; k < 2; ++k) {
        const T dk = norm2((r + T(k) * d1) - ts[k] * d2);
        if (dk < d2s) { d2s = dk; s = T(k); t = ts[k]; }
        const T dl = norm2((r + ss[k] * d1) - T(k) * d2);
        if (dl < d2s) { d2s = dl; s = ss[k]; t = T(k); }
      }
    }
  }
  return {d2s, s, t, edge_edge_type_from_params(s, t)};
}

template <typename T>
CN_HD SegmentSegmentResult<T> segment_segment_closest(const Vec3<T>& a0, const Vec3<T>& a1,
                                                      const Vec3<T>& b0, const Vec3<T>& b1) {
  const Vec3<T> d1 = a1 - a0;
  const Vec3<T> d2 = b1 - b0;
  return segment_segment_closest(a0, d1, norm2(d1), b0, d2, norm2(d2));
}

// ---------------------------------------------------------------------------------------------
// Triangle–triangle. Closest points: sum_i wa[i] A[i] and sum_j wb[j] B[j].
template <typename T>
struct TriangleTriangleResult {
  T dist2;
  T wa[3];
  T wb[3];
  bool intersecting;
  bool edge_of_a;  // intersecting: an edge of A crosses B (else an edge of B crosses A)
};

// Barycentric weights of x (assumed in or near the plane of t0 t1 t2, normal n = (t1-t0)x(t2-t0),
// nn = |n|^2 > 0) and whether x lies inside the triangle (all weights >= 0).
template <typename T>
CN_HD bool face_barycentric(const Vec3<T>& x, const Vec3<T>& t0, const Vec3<T>& t1,
                            const Vec3<T>& t2, const Vec3<T>& n, T nn, T w[3]) {
  const T b0 = dot(cross(t2 - t1, x - t1), n);
  const T b1 = dot(cross(t0 - t2, x - t2), n);
  const T b2 = dot(cross(t1 - t0, x - t0), n);
  if (b0 < T(0) || b1 < T(0) || b2 < T(0)) return false;
  // b0 + b1 + b2 = nn for any x in exact arithmetic; dividing by the computed sum keeps the
  // weights summing to 1 where a sliver triangle makes each of them inexact.
  const T sum = b0 + b1 + b2;
  const T scale = sum > T(0) ? sum : nn;
  w[0] = b0 / scale;
  w[1] = b1 / scale;
  w[2] = b2 / scale;
  return true;
}

// Where the segment p0p1 crosses the plane of triangle (t0, t1, t2) inside the triangle, returns
// true with the segment parameter u and the triangle's barycentric weights w.
template <typename T>
CN_HD bool segment_crosses_triangle(const Vec3<T>& p0, const Vec3<T>& p1, T s0, T s1,
                                    const Vec3<T>& t0, const Vec3<T>& t1, const Vec3<T>& t2,
                                    const Vec3<T>& n, T nn, T& u, T w[3]) {
  // s0, s1: signed plane distances (times |n|) of p0, p1. A segment lying in the plane is left
  // to the vertex–face and edge–edge features, which find its zero distance.
  if (s0 * s1 > T(0) || s0 == s1) return false;
  u = s0 / (s0 - s1);
  return face_barycentric(lerp(p0, p1, u), t0, t1, t2, n, nn, w);
}

template <typename T>
CN_HD bool same_strict_side(T s0, T s1, T s2) {
  return (s0 > T(0) && s1 > T(0) && s2 > T(0)) || (s0 < T(0) && s1 < T(0) && s2 < T(0));
}

// Triangle–triangle distance as the minimum over two kinds of features:
//  - a vertex of one triangle whose projection falls inside the other's face (plane distance);
//  - the 9 edge–edge pairs (which also cover vertices that project outside the other face).
// Together they realise the distance of any two non-intersecting triangles. Intersection itself
// is detected by an edge of one triangle crossing the other (true for every non-coplanar
// intersection; coplanar overlaps have a zero-distance feature already). Degenerate triangles
// (no usable plane) take part through their edges only.
template <typename T>
CN_HD TriangleTriangleResult<T> triangle_triangle_closest(const Vec3<T> A[3], const Vec3<T> B[3]) {
  TriangleTriangleResult<T> res;
  for (int k = 0; k < 3; ++k) res.wa[k] = res.wb[k] = T(0);
  res.intersecting = false;
  res.edge_of_a = false;

  const Vec3<T> nA = cross(A[1] - A[0], A[2] - A[0]);
  const Vec3<T> nB = cross(B[1] - B[0], B[2] - B[0]);
  const T nnA = norm2(nA);
  const T nnB = norm2(nB);
  const bool planeA = !triangle_is_degenerate(A[1] - A[0], A[2] - A[0], nA);
  const bool planeB = !triangle_is_degenerate(B[1] - B[0], B[2] - B[0], nB);
  // Signed plane distances times |n| of each triangle's vertices to the other's plane.
  const T sA[3] = {dot(nB, A[0] - B[0]), dot(nB, A[1] - B[0]), dot(nB, A[2] - B[0])};
  const T sB[3] = {dot(nA, B[0] - A[0]), dot(nA, B[1] - A[0]), dot(nA, B[2] - A[0])};

  // A plane with all of the other triangle strictly on one side separates them.
  const bool separated = (planeB && same_strict_side(sA[0], sA[1], sA[2])) ||
                         (planeA && same_strict_side(sB[0], sB[1], sB[2]));
  if (!separated) {
    for (int i = 0; i < 3; ++i) {
      const int j = (i + 1) % 3;
      T u, w[3];
      if (planeB &&
          segment_crosses_triangle(A[i], A[j], sA[i], sA[j], B[0], B[1], B[2], nB, nnB, u, w)) {
        res.dist2 = T(0);
        res.wa[i] = T(1) - u;
        res.wa[j] = u;
        for (int k = 0; k < 3; ++k) res.wb[k] = w[k];
        res.intersecting = true;
        res.edge_of_a = true;
        return res;
      }
      if (planeA &&
          segment_crosses_triangle(B[i], B[j], sB[i], sB[j], A[0], A[1], A[2], nA, nnA, u, w)) {
        res.dist2 = T(0);
        res.wb[i] = T(1) - u;
        res.wb[j] = u;
        for (int k = 0; k < 3; ++k) res.wa[k] = w[k];
        res.intersecting = true;
        return res;
      }
    }
  }

  // Edge of A against edge of B.
  const Vec3<T> eA[3] = {A[1] - A[0], A[2] - A[1], A[0] - A[2]};
  const Vec3<T> eB[3] = {B[1] - B[0], B[2] - B[1], B[0] - B[2]};
  const T lA[3] = {norm2(eA[0]), norm2(eA[1]), norm2(eA[2])};
  const T lB[3] = {norm2(eB[0]), norm2(eB[1]), norm2(eB[2])};
  res.dist2 = T(INFINITY);
  for (int i = 0; i < 3; ++i) {
    const int i1 = (i + 1) % 3;
    for (int j = 0; j < 3; ++j) {
      const int j1 = (j + 1) % 3;
      const SegmentSegmentResult<T> r =
          segment_segment_closest(A[i], eA[i], lA[i], B[j], eB[j], lB[j]);
      if (r.dist2 < res.dist2) {
        res.dist2 = r.dist2;
        for (int k = 0; k < 3; ++k) res.wa[k] = res.wb[k] = T(0);
        res.wa[i] = T(1) - r.s;
        res.wa[i1] = r.s;
        res.wb[j] = T(1) - r.t;
        res.wb[j1] = r.t;
        // If the slab orthogonal to (pb - pa) through pa and pb has A on one side and B on the
        // other, no pair can be closer: stop (PQP's early exit).
        const Vec3<T> pa = A[i] + r.s * eA[i];
        const Vec3<T> pb = B[j] + r.t * eB[j];
        const Vec3<T> v = pb - pa;
        if (r.dist2 > T(0) && dot(A[0] - pa, v) <= T(0) && dot(A[1] - pa, v) <= T(0) &&
            dot(A[2] - pa, v) <= T(0) && dot(B[0] - pb, v) >= T(0) &&
            dot(B[1] - pb, v) >= T(0) && dot(B[2] - pb, v) >= T(0)) {
          return res;
        }
      }
    }
  }
  // Vertex of one triangle over the face of the other: distance |s| / |n|.
  for (int i = 0; i < 3; ++i) {
    T w[3];
    if (planeB) {
      const T d2 = sA[i] * sA[i] / nnB;
      if (d2 < res.dist2 && face_barycentric(A[i] - (sA[i] / nnB) * nB, B[0], B[1], B[2], nB, nnB, w)) {
        res.dist2 = d2;
        for (int k = 0; k < 3; ++k) {
          res.wa[k] = T(k == i);
          res.wb[k] = w[k];
        }
      }
    }
    if (planeA) {
      const T d2 = sB[i] * sB[i] / nnA;
      if (d2 < res.dist2 && face_barycentric(B[i] - (sB[i] / nnA) * nA, A[0], A[1], A[2], nA, nnA, w)) {
        res.dist2 = d2;
        for (int k = 0; k < 3; ++k) {
          res.wb[k] = T(k == i);
          res.wa[k] = w[k];
        }
      }
    }
  }
  return res;
}

// The closest points sum_i wa[i] A[i] and sum_j wb[j] B[j] of a triangle_triangle_closest result.
// On an intersection both are the crossing point, taken on the crossing edge (a point of that
// edge, to rounding): the crossed triangle's barycentric weights are ill-conditioned when it is a
// sliver, and would put the point up to ~1e-8 off both triangles.
template <typename T>
CN_HD void triangle_pair_points(const TriangleTriangleResult<T>& r, const Vec3<T> A[3], const Vec3<T> B[3],
                                Vec3<T>& pa, Vec3<T>& pb) {
  pa = r.wa[0] * A[0] + r.wa[1] * A[1] + r.wa[2] * A[2];
  pb = r.wb[0] * B[0] + r.wb[1] * B[1] + r.wb[2] * B[2];
  if (r.intersecting) {
    if (r.edge_of_a) pb = pa;
    else pa = pb;
  }
}

}  // namespace contactnet

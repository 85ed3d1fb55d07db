// BLEM contact of one triangle pair (Hauser, "Robust contact generation for robot simulation with
// unstructured meshes", §3.2). Triangles A, B in one frame; boundary-layer widths rA, rB.
//   separated (d > 0): n = (xA - xB) / d, depth = rA + rB - d,
//                      point = (xA + xB) / 2 + n (rB - rA) / 2
//   intersecting (d = 0): n is the shortest retraction of A out of B among the separating-axis
//                      candidates (both face normals, the nine edge-edge cross products): for
//                      convex sets the minimum translation lies along one of them (Fig. 6).
//                      With that retraction length e, the signed distance is -e, depth =
//                      rA + rB + e, and the point is x + n (rB - rA) / 2 at the intersection
//                      point x found by the distance routine.
// n always points from B towards A (the direction that moves A out of B).
#pragma once

#include "box.h"
#include "distance.h"

namespace contactnet {

template <typename T>
struct BlemContact {
  Vec3<T> point, normal, xa, xb;
  T distance;  // signed: >= 0 separated, -e intersecting
  T depth;
  bool intersecting;
};

// Shortest translation of A along a candidate axis that separates it from B.
template <typename T>
CN_HD void triangle_retraction(const Vec3<T> A[3], const Vec3<T> B[3], Vec3<T>& normal,
                               T& length) {
  Vec3<T> axes[11];
  axes[0] = cross(A[1] - A[0], A[2] - A[0]);
  axes[1] = cross(B[1] - B[0], B[2] - B[0]);
  int n = 2;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) axes[n++] = cross(A[(i + 1) % 3] - A[i], B[(j + 1) % 3] - B[j]);
  T scale2 = T(0);
  for (int i = 0; i < 3; ++i) {
    scale2 = max_(scale2, norm2(A[(i + 1) % 3] - A[i]));
    scale2 = max_(scale2, norm2(B[(i + 1) % 3] - B[i]));
  }
  bool found = false;
  length = T(0);
  normal = make_vec3(T(0), T(0), T(1));
  for (int k = 0; k < 11; ++k) {
    const T len2 = norm2(axes[k]);
    // Skip near-zero axes (degenerate triangles, parallel edges): no direction to retract along.
    if (!(len2 > Eps<T>::parallel * scale2 * scale2)) continue;
    const Vec3<T> u = (T(1) / sqrt(len2)) * axes[k];
    T amin = dot(u, A[0]), amax = amin, bmin = dot(u, B[0]), bmax = bmin;
    for (int i = 1; i < 3; ++i) {
      const T pa = dot(u, A[i]), pb = dot(u, B[i]);
      amin = min_(amin, pa);
      amax = max_(amax, pa);
      bmin = min_(bmin, pb);
      bmax = max_(bmax, pb);
    }
    const T plus = bmax - amin;   // move A along +u
    const T minus = amax - bmin;  // move A along -u
    const T e = min_(plus, minus);
    if (!found || e < length) {
      found = true;
      length = e;
      normal = plus <= minus ? u : -u;
    }
  }
  if (length < T(0)) length = T(0);
}

template <typename T>
CN_HD BlemContact<T> blem_contact(const Vec3<T> A[3], const Vec3<T> B[3],
                                  const TriangleTriangleResult<T>& r, T ra, T rb) {
  BlemContact<T> c;
  triangle_pair_points(r, A, B, c.xa, c.xb);
  const T d = sqrt(r.dist2);
  if (r.intersecting || !(d > T(0))) {
    T e;
    triangle_retraction(A, B, c.normal, e);
    c.intersecting = true;
    c.distance = -e;
    c.point = T(0.5) * (c.xa + c.xb) + (T(0.5) * (rb - ra)) * c.normal;
  } else {
    c.intersecting = false;
    c.distance = d;
    c.normal = (T(1) / d) * (c.xa - c.xb);
    c.point = T(0.5) * (c.xa + c.xb) + (T(0.5) * (rb - ra)) * c.normal;
  }
  c.depth = ra + rb - c.distance;
  return c;
}

}  // namespace contactnet

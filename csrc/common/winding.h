// Generalised winding number of a point w.r.t. a triangle soup (Jacobson et al. 2013), with the
// far-field dipole approximation of Barill et al. 2018 ("Fast winding numbers for soups").
// w = sum over triangles of solid_angle / (4 pi); about 1 inside a closed outward-oriented
// surface, 0 outside, and a smooth, robust inside/outside measure for open or broken soups.
#pragma once

#include <cmath>

#include "vec3.h"

namespace contactnet {

using std::atan2;

template <typename T>
CN_HD T inv_four_pi() {
  return T(0.0795774715459476678844418816862571810);
}

// Signed solid angle of triangle (v0, v1, v2) seen from p (Van Oosterom & Strackee 1983);
// positive when p is behind the counter-clockwise face.
template <typename T>
CN_HD T triangle_solid_angle(const Vec3<T>& p, const Vec3<T>& v0, const Vec3<T>& v1,
                             const Vec3<T>& v2) {
  const Vec3<T> a = v0 - p, b = v1 - p, c = v2 - p;
  const T la = norm(a), lb = norm(b), lc = norm(c);
  const T num = dot(a, cross(b, c));
  const T den = la * lb * lc + dot(a, b) * lc + dot(b, c) * la + dot(c, a) * lb;
  if (num == T(0) && den <= T(0)) return T(0);  // p on the triangle's plane, outside or on it
  return T(2) * atan2(num, den);
}

// Far-field term of a cluster of triangles with total area vector N (sum of half cross
// products) centred at c: the solid angle of a dipole, N . (c - p) / |c - p|^3.
template <typename T>
CN_HD T dipole_solid_angle(const Vec3<T>& p, const Vec3<T>& c, const Vec3<T>& area_vector) {
  const Vec3<T> d = c - p;
  const T r2 = norm2(d);
  return dot(area_vector, d) / (r2 * sqrt(r2));
}

}  // namespace contactnet

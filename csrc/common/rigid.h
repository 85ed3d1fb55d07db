// Rigid transforms for header-only geometry: a unit quaternion [qw, qx, qy, qz] as a rotation
// matrix, and x -> R x + t, on both devices.
#pragma once

#include "vec3.h"

namespace contactnet {

// Row-major 3x3 matrix.
template <typename T>
struct Mat3 {
  T m[3][3];
};

template <typename T>
struct Rigid {
  Mat3<T> R;
  Vec3<T> t;
};

// The quaternion is assumed unit (the Python wrappers normalise it).
template <typename T>
CN_HD Mat3<T> quat_to_mat(T w, T x, T y, T z) {
  Mat3<T> r;
  r.m[0][0] = T(1) - T(2) * (y * y + z * z);
  r.m[0][1] = T(2) * (x * y - w * z);
  r.m[0][2] = T(2) * (x * z + w * y);
  r.m[1][0] = T(2) * (x * y + w * z);
  r.m[1][1] = T(1) - T(2) * (x * x + z * z);
  r.m[1][2] = T(2) * (y * z - w * x);
  r.m[2][0] = T(2) * (x * z - w * y);
  r.m[2][1] = T(2) * (y * z + w * x);
  r.m[2][2] = T(1) - T(2) * (x * x + y * y);
  return r;
}

// pose: [x, y, z, qw, qx, qy, qz]
template <typename T>
CN_HD Rigid<T> load_pose(const T* p) {
  return {quat_to_mat(p[3], p[4], p[5], p[6]), make_vec3(p[0], p[1], p[2])};
}

// Same, for a quaternion of any non-zero length (normalised here).
template <typename T>
CN_HD Rigid<T> load_pose_normalized(const T* p) {
  const T inv = T(1) / sqrt(p[3] * p[3] + p[4] * p[4] + p[5] * p[5] + p[6] * p[6]);
  return {quat_to_mat(p[3] * inv, p[4] * inv, p[5] * inv, p[6] * inv), make_vec3(p[0], p[1], p[2])};
}

template <typename T>
CN_HD Vec3<T> mul(const Mat3<T>& r, const Vec3<T>& v) {
  return {r.m[0][0] * v.x + r.m[0][1] * v.y + r.m[0][2] * v.z,
          r.m[1][0] * v.x + r.m[1][1] * v.y + r.m[1][2] * v.z,
          r.m[2][0] * v.x + r.m[2][1] * v.y + r.m[2][2] * v.z};
}
// R^T v
template <typename T>
CN_HD Vec3<T> mul_t(const Mat3<T>& r, const Vec3<T>& v) {
  return {r.m[0][0] * v.x + r.m[1][0] * v.y + r.m[2][0] * v.z,
          r.m[0][1] * v.x + r.m[1][1] * v.y + r.m[2][1] * v.z,
          r.m[0][2] * v.x + r.m[1][2] * v.y + r.m[2][2] * v.z};
}

template <typename T>
CN_HD Vec3<T> apply(const Rigid<T>& f, const Vec3<T>& v) {
  return mul(f.R, v) + f.t;
}

// a^-1 b: maps b's frame into a's frame, R = Ra^T Rb, t = Ra^T (tb - ta).
template <typename T>
CN_HD Rigid<T> relative(const Rigid<T>& a, const Rigid<T>& b) {
  Rigid<T> out;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j)
      out.R.m[i][j] = a.R.m[0][i] * b.R.m[0][j] + a.R.m[1][i] * b.R.m[1][j] +
                      a.R.m[2][i] * b.R.m[2][j];
  out.t = mul_t(a.R, b.t - a.t);
  return out;
}

}  // namespace contactnet

// Minimal 3-vector for header-only geometry shared by the CPU loops and CUDA kernels.
#pragma once

#include <cmath>

#include "macros.h"

namespace contactnet {

// std:: overloads work in host code and, through CUDA's math headers, in device code.
using std::isfinite;
using std::sqrt;

template <typename T>
struct Vec3 {
  T x, y, z;
};

template <typename T>
CN_HD Vec3<T> make_vec3(T x, T y, T z) {
  return Vec3<T>{x, y, z};
}
// Reads three consecutive scalars (one row of a contiguous (..., 3) tensor).
template <typename T>
CN_HD Vec3<T> load3(const T* p) {
  return Vec3<T>{p[0], p[1], p[2]};
}
template <typename T>
CN_HD void store3(T* p, const Vec3<T>& v) {
  p[0] = v.x;
  p[1] = v.y;
  p[2] = v.z;
}

template <typename T>
CN_HD Vec3<T> operator+(const Vec3<T>& a, const Vec3<T>& b) {
  return {a.x + b.x, a.y + b.y, a.z + b.z};
}
template <typename T>
CN_HD Vec3<T> operator-(const Vec3<T>& a, const Vec3<T>& b) {
  return {a.x - b.x, a.y - b.y, a.z - b.z};
}
template <typename T>
CN_HD Vec3<T> operator-(const Vec3<T>& a) {
  return {-a.x, -a.y, -a.z};
}
template <typename T>
CN_HD Vec3<T> operator*(T s, const Vec3<T>& a) {
  return {s * a.x, s * a.y, s * a.z};
}
template <typename T>
CN_HD Vec3<T> operator*(const Vec3<T>& a, T s) {
  return {s * a.x, s * a.y, s * a.z};
}
template <typename T>
CN_HD T dot(const Vec3<T>& a, const Vec3<T>& b) {
  return a.x * b.x + a.y * b.y + a.z * b.z;
}
template <typename T>
CN_HD Vec3<T> cross(const Vec3<T>& a, const Vec3<T>& b) {
  return {a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x};
}
template <typename T>
CN_HD T norm2(const Vec3<T>& a) {
  return dot(a, a);
}
template <typename T>
CN_HD T norm(const Vec3<T>& a) {
  return sqrt(dot(a, a));
}
// a + t (b - a)
template <typename T>
CN_HD Vec3<T> lerp(const Vec3<T>& a, const Vec3<T>& b, T t) {
  return a + t * (b - a);
}
template <typename T>
CN_HD T clamp01(T v) {
  return v < T(0) ? T(0) : (v > T(1) ? T(1) : v);
}
template <typename T>
CN_HD bool is_finite(const Vec3<T>& a) {
  return isfinite(a.x) && isfinite(a.y) && isfinite(a.z);
}

}  // namespace contactnet

// Lower bound on the Euclidean distance between two boxes: an axis-aligned box of mesh A and an
// axis-aligned box of mesh B seen from A's frame through a rigid transform (so an oriented box).
// The bound is the largest gap of the two boxes' projections on the six face normals and on the
// line through their centres (a separating-axis test); projection on a unit axis is 1-Lipschitz,
// so every gap is <= the distance. The centre line matters for boxes offset diagonally, where the
// face-normal gaps underestimate the distance badly and far-apart queries would visit most node
// pairs. 0 means "may overlap".
#pragma once

#include "rigid.h"

namespace contactnet {

template <typename T>
struct BoxSlack;
// Relative slack subtracted from a gap so that rounding in the transform never prunes a pair
// whose true distance equals the threshold.
template <>
struct BoxSlack<float> {
  static constexpr float rel = 1e-5f;
};
template <>
struct BoxSlack<double> {
  static constexpr double rel = 1e-12;
};

// A box as centre and half extents.
template <typename T>
struct Box {
  Vec3<T> c, h;
};

// lo, hi: six consecutive scalars (lo xyz, hi xyz).
template <typename T>
CN_HD Box<T> load_box(const T* p) {
  const Vec3<T> lo = load3(p), hi = load3(p + 3);
  return {T(0.5) * (lo + hi), T(0.5) * (hi - lo)};
}

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

// Precomputed per query: the transform of B into A's frame and |R| (elementwise).
template <typename T>
struct BoxFrame {
  Rigid<T> b_in_a;
  Mat3<T> absR;
};

template <typename T>
CN_HD BoxFrame<T> make_box_frame(const Rigid<T>& b_in_a) {
  BoxFrame<T> f;
  f.b_in_a = b_in_a;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) f.absR.m[i][j] = abs_(b_in_a.R.m[i][j]);
  return f;
}

// a: box in A's frame; b: box in B's frame.
template <typename T>
CN_HD T box_distance_lower_bound(const Box<T>& a, const Box<T>& b, const BoxFrame<T>& f) {
  const Vec3<T> cb = apply(f.b_in_a, b.c);
  const Vec3<T> d = cb - a.c;
  // B's half extents projected on A's axes, and A's on B's axes.
  const Vec3<T> hb_in_a = mul(f.absR, b.h);
  const Vec3<T> ha_in_b = mul_t(f.absR, a.h);
  const Vec3<T> d_in_b = mul_t(f.b_in_a.R, d);
  T gap = abs_(d.x) - a.h.x - hb_in_a.x;
  gap = max_(gap, abs_(d.y) - a.h.y - hb_in_a.y);
  gap = max_(gap, abs_(d.z) - a.h.z - hb_in_a.z);
  gap = max_(gap, abs_(d_in_b.x) - b.h.x - ha_in_b.x);
  gap = max_(gap, abs_(d_in_b.y) - b.h.y - ha_in_b.y);
  gap = max_(gap, abs_(d_in_b.z) - b.h.z - ha_in_b.z);
  // Centre line n = d / |d|: supports h_a . |n| and h_b . |R^T n|.
  const T dd = norm2(d);
  if (dd > T(0)) {
    const T len = sqrt(dd);
    const T support = (a.h.x * abs_(d.x) + a.h.y * abs_(d.y) + a.h.z * abs_(d.z) +
                       b.h.x * abs_(d_in_b.x) + b.h.y * abs_(d_in_b.y) + b.h.z * abs_(d_in_b.z)) / len;
    gap = max_(gap, len - support);
  }
  const T scale = abs_(d.x) + abs_(d.y) + abs_(d.z) + a.h.x + a.h.y + a.h.z + b.h.x + b.h.y +
                  b.h.z + abs_(f.b_in_a.t.x) + abs_(f.b_in_a.t.y) + abs_(f.b_in_a.t.z);
  gap -= BoxSlack<T>::rel * scale;
  return gap > T(0) ? gap : T(0);
}

// Size used to decide which node of a pair to split: the larger box is split first.
template <typename T>
CN_HD T box_size(const Box<T>& b) {
  return b.h.x + b.h.y + b.h.z;
}

}  // namespace contactnet

// Certified separation of two convex hulls by GJK (Gilbert, Johnson & Keerthi 1988), shared by
// both devices. A hull is its vertices and its vertex graph; support points are found by hill
// climbing on that graph, exact on a convex polytope (a vertex no neighbour beats is a maximum of
// the linear function) and, warm-started from the last support, a few steps per iteration.
//
// The answer is one-sided: true only when a plane provably separates the hulls by more than
// min_gap. Touching, overlapping, undecided after max_iterations or a hull without vertices all
// read false, so a caller may trust "separated" and must check anything else another way.
#pragma once

#include <cstdint>

#include "distance.h"
#include "rigid.h"
#include "vec3.h"

namespace contactnet {

// One hull: num_vertices vertices (3 T each) in its object frame; vertex i's neighbours are
// neighbours[neighbour_offsets[i] .. neighbour_offsets[i + 1]), hull-local indices.
template <typename T>
struct HullView {
  const T* vertices;
  const int64_t* neighbour_offsets;
  const int64_t* neighbours;
  int64_t num_vertices;
};

// The vertex maximising d · x, climbing from `start`. Each move raises d · x strictly, so no
// vertex is visited twice and the walk ends (a NaN direction ends it at once).
template <typename T>
CN_HD int64_t hull_support(const HullView<T>& h, const Vec3<T>& d, int64_t start) {
  int64_t best = start;
  T best_dot = dot(load3(h.vertices + 3 * best), d);
  for (int64_t step = 0; step < h.num_vertices; ++step) {
    const int64_t from = best;
    for (int64_t k = h.neighbour_offsets[from]; k < h.neighbour_offsets[from + 1]; ++k) {
      const int64_t v = h.neighbours[k];
      const T s = dot(load3(h.vertices + 3 * v), d);
      if (s > best_dot) {
        best = v;
        best_dot = s;
      }
    }
    if (best == from) break;
  }
  return best;
}

// Support points of the Minkowski difference D = A - B, B placed in A's frame by `rel`; keeps
// the last support vertex of each hull as the next climb's start.
template <typename T>
struct DifferenceSupport {
  const HullView<T>& a;
  const HullView<T>& b;
  const Rigid<T>& rel;
  int64_t ia = 0, ib = 0;

  CN_HD Vec3<T> operator()(const Vec3<T>& d) {
    ia = hull_support(a, d, ia);
    ib = hull_support(b, mul_t(rel.R, -d), ib);
    return load3(a.vertices + 3 * ia) - apply(rel, load3(b.vertices + 3 * ib));
  }
};

// Whether hulls a and b (b mapped into a's frame by rel) are apart by more than min_gap (>= 0).
//
// GJK on D: v is the point of a triangle of D's points ("kept") closest to the origin. Each
// iteration asks D for its support point w in direction -v. All of D then lies in
// {x : v·x >= v·w}, a half-space at distance v·w / |v| from the origin: when that exceeds
// min_gap the hulls are certified apart. Otherwise the tetrahedron kept + w holds points closer
// to the origin than v (v·w < |v|²), on one of its faces through w unless the origin is inside
// it; no closer face point means overlap (or a stall at rounding level): not certified.
template <typename T>
CN_HD bool hulls_separated(const HullView<T>& a, const HullView<T>& b, const Rigid<T>& rel, T min_gap,
                           int64_t max_iterations) {
  if (a.num_vertices == 0 || b.num_vertices == 0) return false;
  DifferenceSupport<T> support{a, b, rel};
  Vec3<T> v = support(load3(a.vertices) - apply(rel, load3(b.vertices)));
  Vec3<T> kept[3] = {v, v, v};
  T vv = norm2(v);
  const Vec3<T> origin = make_vec3(T(0), T(0), T(0));
  const int faces[3][2] = {{0, 1}, {0, 2}, {1, 2}};
  for (int64_t it = 0; it < max_iterations; ++it) {
    if (!(vv > T(0))) return false;  // the origin is on D (touching), or NaN
    const Vec3<T> w = support(-v);
    const T vw = dot(v, w);
    if (vw > T(0) && vw * vw > min_gap * min_gap * vv) return true;
    int face = -1;
    T best = vv;
    Vec3<T> next = v;
    for (int f = 0; f < 3; ++f) {
      const Vec3<T>& p = kept[faces[f][0]];
      const Vec3<T>& q = kept[faces[f][1]];
      const PointTriangleResult<T> r = point_triangle_closest(origin, p, q, w);
      if (r.dist2 < best) {
        best = r.dist2;
        face = f;
        next = r.w0 * p + r.w1 * q + r.w2 * w;
      }
    }
    if (face < 0) return false;
    const Vec3<T> p = kept[faces[face][0]], q = kept[faces[face][1]];
    kept[0] = p;
    kept[1] = q;
    kept[2] = w;
    v = next;
    vv = norm2(v);
  }
  return false;
}

}  // namespace contactnet

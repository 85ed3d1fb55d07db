// Per-query functors of the mesh-query ops (one query = a pair of meshes with their poses): the
// same code is the CPU loop body and the CUDA thread body. Every query traverses the two BVHs in
// A's frame (B's triangles are moved into it at the leaves) and reports in the world frame.
#pragma once

#include <cstdint>
#include <limits>

#include "common/blem.h"
#include "common/bvh.h"
#include "common/distance.h"
#include "common/rigid.h"
#include "common/tri_intersect.h"

namespace contactnet {

// Inputs shared by the three query kinds.
template <typename T>
struct QueryInputs {
  BvhView<T> bvh;
  const int64_t* ids_a;  // (Q,)
  const int64_t* ids_b;  // (Q,)
  const T* poses_a;      // (Q, 7) world poses, unit quaternions
  const T* poses_b;      // (Q, 7)
};

template <typename T>
struct QueryFrame {
  MeshBvh<T> a, b;
  Rigid<T> pose_a;
  Rigid<T> f;  // B's frame into A's
};

template <typename T>
CN_HD QueryFrame<T> query_frame(const QueryInputs<T>& in, int64_t q) {
  QueryFrame<T> qf;
  qf.a = mesh_bvh(in.bvh, in.ids_a[q]);
  qf.b = mesh_bvh(in.bvh, in.ids_b[q]);
  qf.pose_a = load_pose_normalized(in.poses_a + 7 * q);
  qf.f = relative(qf.pose_a, load_pose_normalized(in.poses_b + 7 * q));
  return qf;
}

// Gap between the axis-aligned boxes of two triangles in one frame: a lower bound on their
// distance (each axis projection is 1-Lipschitz) that costs a few comparisons, so leaf pairs whose
// boxes overlap skip most exact triangle tests.
template <typename T>
struct TriBox {
  Vec3<T> lo, hi;
};
template <typename T>
CN_HD TriBox<T> tri_box(const Vec3<T> t[3]) {
  TriBox<T> b{t[0], t[0]};
  for (int k = 1; k < 3; ++k) {
    b.lo = make_vec3(min_(b.lo.x, t[k].x), min_(b.lo.y, t[k].y), min_(b.lo.z, t[k].z));
    b.hi = make_vec3(max_(b.hi.x, t[k].x), max_(b.hi.y, t[k].y), max_(b.hi.z, t[k].z));
  }
  return b;
}
template <typename T>
CN_HD T tri_box_gap(const TriBox<T>& a, const TriBox<T>& b) {
  T g = max_(a.lo.x - b.hi.x, b.lo.x - a.hi.x);
  g = max_(g, max_(a.lo.y - b.hi.y, b.lo.y - a.hi.y));
  g = max_(g, max_(a.lo.z - b.hi.z, b.lo.z - a.hi.z));
  return g;
}

// Plane of a triangle (unit normal n, n . x = d); ok is false for a triangle without one.
template <typename T>
struct TriPlane {
  Vec3<T> n;
  T d;
  bool ok;
};
template <typename T>
CN_HD TriPlane<T> tri_plane(const Vec3<T> t[3]) {
  const Vec3<T> n = cross(t[1] - t[0], t[2] - t[0]);
  const T l2 = norm2(n);
  if (!(l2 > T(0))) return {n, T(0), false};
  const Vec3<T> u = (T(1) / sqrt(l2)) * n;
  return {u, dot(u, t[0]), true};
}
// When triangle t lies strictly on one side of plane p, the distance from t to any set in p (the
// plane's own triangle) is at least min |n . x - d| over t's vertices; otherwise 0.
template <typename T>
CN_HD T plane_gap(const TriPlane<T>& p, const Vec3<T> t[3]) {
  if (!p.ok) return T(0);
  const T s0 = dot(p.n, t[0]) - p.d, s1 = dot(p.n, t[1]) - p.d, s2 = dot(p.n, t[2]) - p.d;
  if (s0 > T(0) && s1 > T(0) && s2 > T(0)) return min_(s0, min_(s1, s2));
  if (s0 < T(0) && s1 < T(0) && s2 < T(0)) return -max_(s0, max_(s1, s2));
  return T(0);
}

// A leaf triangle in A's frame with what the leaf culls need.
template <typename T>
struct LeafTri {
  Vec3<T> v[3];
  TriBox<T> box;
  TriPlane<T> plane;
};
template <typename T>
CN_HD void finish_leaf_tri(LeafTri<T>& t, bool with_plane) {
  t.box = tri_box(t.v);
  if (with_plane) t.plane = tri_plane(t.v);
}
template <typename T>
CN_HD void load_leaf_a(const QueryFrame<T>& qf, int i, LeafTri<T>& out) {
  load_tri(qf.a.tris, i, out.v);
  finish_leaf_tri(out, true);
}
// B's leaf triangles moved into A's frame (planes only when the caller culls with them).
template <typename T>
CN_HD void load_leaf_b(const QueryFrame<T>& qf, int first, int count, LeafTri<T> out[],
                       bool with_planes = true) {
  for (int j = 0; j < count; ++j) {
    load_tri(qf.b.tris, first + j, out[j].v);
    for (int k = 0; k < 3; ++k) out[j].v[k] = apply(qf.f, out[j].v[k]);
    finish_leaf_tri(out[j], with_planes);
  }
}

// Distance between the axis-aligned boxes of two triangles (the per-axis gaps combined): a lower
// bound on their distance, tighter than the largest axis gap for triangles offset along two or
// three axes at once (the common case for facing surfaces, whose nearby triangles sit sideways
// and across from each other).
template <typename T>
CN_HD T tri_box_distance(const TriBox<T>& a, const TriBox<T>& b) {
  const T gx = max_(T(0), max_(a.lo.x - b.hi.x, b.lo.x - a.hi.x));
  const T gy = max_(T(0), max_(a.lo.y - b.hi.y, b.lo.y - a.hi.y));
  const T gz = max_(T(0), max_(a.lo.z - b.hi.z, b.lo.z - a.hi.z));
  return sqrt(gx * gx + gy * gy + gz * gz);
}

// Lower bound on the distance of two leaf triangles: the distance of their boxes, and of each
// one to the other's plane when it lies on one side (the common case for facing surfaces in near
// contact, where tilted triangles' boxes overlap), less a rounding slack.
template <typename T>
CN_HD T leaf_pair_gap(const LeafTri<T>& a, const LeafTri<T>& b) {
  T g = tri_box_distance(a.box, b.box);
  g = max_(g, plane_gap(b.plane, a.v));
  g = max_(g, plane_gap(a.plane, b.v));
  const T scale = abs_(a.v[0].x) + abs_(a.v[0].y) + abs_(a.v[0].z) + abs_(b.v[0].x) +
                  abs_(b.v[0].y) + abs_(b.v[0].z) + (a.box.hi.x - a.box.lo.x) +
                  (a.box.hi.y - a.box.lo.y) + (a.box.hi.z - a.box.lo.z);
  return g - BoxSlack<T>::rel * scale;
}

// ---- surfaces intersect? (boolean, first hit) -------------------------------------------------
template <typename T>
struct IntersectVisitor {
  const QueryFrame<T>& qf;
  int hit_a, hit_b;  // leaf-order rows of the first intersecting pair found
  static constexpr bool kLeafTriangleBounds = false;  // its bounds order by depth, not distance
  CN_HD T threshold() const { return T(0); }
  // 1 (> threshold, pruned) when a separating axis exists, else the boxes' separation (<= 0):
  // of two overlapping child pairs the deeper one is entered first (box.h).
  CN_HD T bound(const ObbRel<float>& r) const {
    const float g = obb_separation(r);
    return g > r.slack ? T(1) : T(g - r.slack);
  }
  CN_HD bool leaf(int fa, int na, int fb, int nb) {
    LeafTri<T> Bs[kBvhLeafSize];
    load_leaf_b(qf, fb, nb, Bs, false);
    for (int i = 0; i < na; ++i) {
      Vec3<T> A[3];
      load_tri(qf.a.tris, fa + i, A);
      const TriBox<T> box_a = tri_box(A);
      // The box gap culls; triangles_intersect starts with the (exact) plane tests itself.
      for (int j = 0; j < nb; ++j) {
        if (!(tri_box_gap(box_a, Bs[j].box) > T(0)) && triangles_intersect(A, Bs[j].v)) {
          hit_a = fa + i;
          hit_b = fb + j;
          return true;
        }
      }
    }
    return false;
  }
};

// ---- minimum distance (branch and bound) ------------------------------------------------------
template <typename T>
struct DistanceVisitor {
  const QueryFrame<T>& qf;
  T best;  // current upper bound on the distance
  Vec3<T> pa, pb;
  int64_t ta, tb;

  CN_HD T threshold() const { return best; }
  CN_HD T bound(const ObbRel<float>& r) const {
    return obb_distance_lower_bound(r, static_cast<float>(best));
  }
  // Leaf triangles' own bounds (common/bvh.h): far-field queries of a coarse mesh against a fine one.
  static constexpr bool kLeafTriangleBounds = true;
  CN_HD T triangle_bound(float gap) const { return gap > 0.0f ? T(gap) : T(0); }
  // Exact distance of A's triangle i and B's triangle j (leaf-order rows, B's in A's frame);
  // returns true when it is 0 (nothing can be closer).
  CN_HD bool try_pair(const Vec3<T> A[3], const Vec3<T> B[3], int i, int j) {
    const TriangleTriangleResult<T> r = triangle_triangle_closest(A, B);
    const T d = sqrt(r.dist2);
    if (d < best) {
      best = d;
      triangle_pair_points(r, A, B, pa, pb);
      ta = qf.a.tri_ids[i];
      tb = qf.b.tri_ids[j];
    }
    return !(d > T(0));
  }
  CN_HD bool leaf(int fa, int na, int fb, int nb) {
    LeafTri<T> Bs[kBvhLeafSize];
    load_leaf_b(qf, fb, nb, Bs);
    for (int i = 0; i < na; ++i) {
      LeafTri<T> At;
      load_leaf_a(qf, fa + i, At);
      for (int j = 0; j < nb; ++j) {
        if (leaf_pair_gap(At, Bs[j]) >= best) continue;  // cannot get strictly closer
        if (try_pair(At.v, Bs[j].v, fa + i, fb + j)) return true;
      }
    }
    return false;
  }
};

template <typename T>
struct MeshDistanceFunctor {
  QueryInputs<T> in;
  T upper_bound;  // only pairs closer than this are searched
  T* distance;    // (Q,)
  T* point_a;     // (Q, 3) world
  T* point_b;     // (Q, 3) world
  int64_t* tri_a; // (Q,) -1 when nothing is closer than upper_bound
  int64_t* tri_b; // (Q,)

  CN_HD void operator()(int64_t q) const {
    const QueryFrame<T> qf = query_frame(in, q);
    DistanceVisitor<T> v{qf, upper_bound, {T(0), T(0), T(0)}, {T(0), T(0), T(0)}, -1, -1};
    // Intersecting surfaces first, by the boolean traversal: where the surfaces cross, every
    // distance bound near the crossing is 0 and the branch and bound wanders among them, while
    // the separating-axis tests prune and the first hit ends the search. On separated surfaces
    // it costs little next to the branch and bound.
    IntersectVisitor<T> hit{qf, -1, -1};
    bool done = false;
    if (dual_traverse(qf.a, qf.b, qf.f, hit)) {
      Vec3<T> A[3], B[3];
      load_tri(qf.a.tris, hit.hit_a, A);
      load_tri(qf.b.tris, hit.hit_b, B);
      for (int k = 0; k < 3; ++k) B[k] = apply(qf.f, B[k]);
      done = v.try_pair(A, B, hit.hit_a, hit.hit_b);
    }
    // Best first, which finds the closest pair after the fewest node pairs; if its fixed-size
    // heap overflowed, a depth-first pass finishes from the distance it found. Host only: on a
    // GPU the 16 KB heap would be per-thread local memory for every resident thread, so a
    // device thread runs the depth-first pass alone (same distance and points; the triangle ids
    // may differ only between triangles tied at the minimum).
#ifndef __CUDA_ARCH__
    if (!done) {
      bool complete = true;
      done = best_first_traverse(qf.a, qf.b, qf.f, v, complete) || complete;
    }
#endif
    if (!done) dual_traverse(qf.a, qf.b, qf.f, v);
    distance[q] = v.best;
    tri_a[q] = v.ta;
    tri_b[q] = v.tb;
    if (v.ta < 0) {
      const T nan = std::numeric_limits<T>::quiet_NaN();
      store3(point_a + 3 * q, make_vec3(nan, nan, nan));
      store3(point_b + 3 * q, make_vec3(nan, nan, nan));
    } else {
      store3(point_a + 3 * q, apply(qf.pose_a, v.pa));
      store3(point_b + 3 * q, apply(qf.pose_a, v.pb));
    }
  }
};

// ---- collision: surfaces intersect, or one contains the other ---------------------------------
template <typename T>
struct MeshCollideFunctor {
  QueryInputs<T> in;
  T winding_threshold;  // 0.5
  T beta;               // far-field acceptance of the fast winding number
  bool* collide;        // (Q,)

  CN_HD void operator()(int64_t q) const {
    const QueryFrame<T> qf = query_frame(in, q);
    IntersectVisitor<T> v{qf, -1, -1};
    if (dual_traverse(qf.a, qf.b, qf.f, v)) {
      collide[q] = true;
      return;
    }
    // Surfaces apart: the objects collide iff one contains the other, and then it contains every
    // point of the other, so one vertex each way decides.
    const Vec3<T> va = load3(qf.a.tris);  // A's frame
    const Vec3<T> va_in_b = mul_t(qf.f.R, va - qf.f.t);
    if (winding_number(qf.b, va_in_b, beta) >= winding_threshold) {
      collide[q] = true;
      return;
    }
    const Vec3<T> vb_in_a = apply(qf.f, load3(qf.b.tris));
    collide[q] = winding_number(qf.a, vb_in_a, beta) >= winding_threshold;
  }
};

// ---- BLEM contacts: every triangle pair with d(tA, tB) <= rA + rB -----------------------------
// One contact in the world frame.
template <typename T>
struct WorldContact {
  Vec3<T> point, normal, xa, xb;
  T depth, distance;
  int64_t tri_a, tri_b;  // face ids
  int row_a, row_b;      // the faces' rows in their meshes' BVH leaf order
  bool intersecting;
};

// The contact of triangles A (leaf row row_a of mesh a) and B (row_b of mesh b), both in A's
// frame, with closest features `res`, in the world frame. The traversal and the recomputation of
// chosen rows (BlemRowsFunctor) share it, so both give the same bits.
template <typename T>
CN_HD WorldContact<T> blem_world_contact(const QueryFrame<T>& qf, const Vec3<T> A[3],
                                         const Vec3<T> B[3], const TriangleTriangleResult<T>& res,
                                         T ra, T rb, int row_a, int row_b) {
  const BlemContact<T> c = blem_contact(A, B, res, ra, rb);
  const Rigid<T>& P = qf.pose_a;
  WorldContact<T> w;
  w.point = apply(P, c.point);
  w.normal = mul(P.R, c.normal);
  w.xa = apply(P, c.xa);
  w.xb = apply(P, c.xb);
  w.depth = c.depth;
  w.distance = c.distance;
  w.tri_a = qf.a.tri_ids[row_a];
  w.tri_b = qf.b.tri_ids[row_b];
  w.row_a = row_a;
  w.row_b = row_b;
  w.intersecting = c.intersecting;
  return w;
}

// Raw contact outputs, packed: query q owns rows offsets[q] .. offsets[q+1). A compact output
// (what clustering reads) has only points, normals and depths, and the pair's BVH leaf rows in
// tri_a / tri_b, from which BlemRowsFunctor recomputes the rest for the rows that are kept;
// its other pointers are null.
template <typename T>
struct ContactOut {
  T* points;         // (N, 3) world
  T* normals;        // (N, 3) world, from B towards A
  T* depths;         // (N,)
  T* distances;      // (N,) signed triangle distance (-retraction when intersecting)
  T* points_a;       // (N, 3) world, closest point on A's triangle
  T* points_b;       // (N, 3) world
  int64_t* tri_a;    // (N,)
  int64_t* tri_b;    // (N,)
  bool* intersecting;  // (N,)
  bool compact;

  CN_HD void store(int64_t k, const WorldContact<T>& c) const {
    store3(points + 3 * k, c.point);
    store3(normals + 3 * k, c.normal);
    depths[k] = c.depth;
    if (compact) {
      tri_a[k] = c.row_a;
      tri_b[k] = c.row_b;
      return;
    }
    store3(points_a + 3 * k, c.xa);
    store3(points_b + 3 * k, c.xb);
    distances[k] = c.distance;
    tri_a[k] = c.tri_a;
    tri_b[k] = c.tri_b;
    intersecting[k] = c.intersecting;
  }
};

// Where a query's contacts go. CountSink only counts (the first of the two passes a device
// without dynamic allocation needs); PackedSink writes contact k of the query to row base + k
// (the second pass). The CPU collects in one pass instead (mesh_query_cpu.cpp).
struct CountSink {
  static constexpr bool kStores = false;
  template <typename T>
  CN_HD void emit(int64_t, const WorldContact<T>&) {}
};
template <typename T>
struct PackedSink {
  static constexpr bool kStores = true;
  ContactOut<T> out;
  int64_t base;
  CN_HD void emit(int64_t k, const WorldContact<T>& c) { out.store(base + k, c); }
};

template <typename T, typename Sink>
struct BlemVisitor {
  const QueryFrame<T>& qf;
  T ra, rb;
  Sink& sink;
  int64_t count;

  // Not here: a different bound reorders the traversal, hence the contacts' order.
  static constexpr bool kLeafTriangleBounds = false;
  CN_HD T threshold() const { return ra + rb; }
  CN_HD T bound(const ObbRel<float>& r) const {
    return obb_distance_lower_bound(r, static_cast<float>(ra + rb));
  }
  CN_HD bool leaf(int fa, int na, int fb, int nb) {
    LeafTri<T> Bs[kBvhLeafSize];
    load_leaf_b(qf, fb, nb, Bs);
    const T r = ra + rb;
    for (int i = 0; i < na; ++i) {
      LeafTri<T> At;
      load_leaf_a(qf, fa + i, At);
      const Vec3<T>* A = At.v;
      for (int j = 0; j < nb; ++j) {
        if (leaf_pair_gap(At, Bs[j]) > r) continue;
        const Vec3<T>* B = Bs[j].v;
        const TriangleTriangleResult<T> res = triangle_triangle_closest(A, B);
        if (!(sqrt(res.dist2) <= r)) continue;
        if constexpr (Sink::kStores)
          sink.emit(count, blem_world_contact(qf, A, B, res, ra, rb, fa + i, fb + j));
        ++count;
      }
    }
    return false;
  }
};

// Runs one query's BLEM traversal into `sink`; returns its contact count.
template <typename T, typename Sink>
CN_HD int64_t blem_query(const QueryInputs<T>& in, const T* ra, const T* rb, int64_t q,
                         Sink& sink) {
  const QueryFrame<T> qf = query_frame(in, q);
  BlemVisitor<T, Sink> v{qf, ra[q], rb[q], sink, 0};
  dual_traverse(qf.a, qf.b, qf.f, v);
  return v.count;
}

template <typename T>
struct BlemCountFunctor {
  QueryInputs<T> in;
  const T* ra;      // (Q,)
  const T* rb;      // (Q,)
  int64_t* counts;  // (Q,)

  CN_HD void operator()(int64_t q) const {
    CountSink sink;
    counts[q] = blem_query(in, ra, rb, q, sink);
  }
};

template <typename T>
struct BlemFillFunctor {
  QueryInputs<T> in;
  const T* ra;
  const T* rb;
  const int64_t* offsets;  // (Q + 1,)
  ContactOut<T> out;

  CN_HD void operator()(int64_t q) const {
    PackedSink<T> sink{out, offsets[q]};
    blem_query(in, ra, rb, q, sink);
  }
};

// Row i of `out` (full, not compact): the contact of leaf rows row_a[i], row_b[i] of query
// query[i]'s meshes, bitwise as the traversal emits it (the clustered path recomputes its kept
// rows from a compact output this way).
template <typename T>
struct BlemRowsFunctor {
  QueryInputs<T> in;
  const T* ra;             // (Q,)
  const T* rb;             // (Q,)
  const int64_t* query;    // (M,)
  const int64_t* row_a;    // (M,)
  const int64_t* row_b;    // (M,)
  ContactOut<T> out;       // M rows

  CN_HD void operator()(int64_t i) const {
    const int64_t q = query[i];
    const QueryFrame<T> qf = query_frame(in, q);
    const int a = static_cast<int>(row_a[i]), b = static_cast<int>(row_b[i]);
    LeafTri<T> At, Bt;
    load_leaf_a(qf, a, At);
    load_leaf_b(qf, b, 1, &Bt);
    const TriangleTriangleResult<T> res = triangle_triangle_closest(At.v, Bt.v);
    out.store(i, blem_world_contact(qf, At.v, Bt.v, res, ra[q], rb[q], a, b));
  }
};

}  // namespace contactnet

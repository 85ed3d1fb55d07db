// Bounding-volume hierarchies of triangle meshes, packed for a whole mesh library, and their
// traversals (dual-tree for mesh–mesh queries, single-tree for winding numbers) with explicit,
// fixed-size stacks: no recursion, so the same code runs in a CPU loop and a CUDA thread.
//
// Layout (built by contactnet::build_mesh_bvh, see csrc/mesh_bvh/mesh_bvh.h). For mesh m, its
// nodes are rows node_offsets[m] .. node_offsets[m+1) and its triangles face_offsets[m] ..
// face_offsets[m+1); node and triangle indices stored in the arrays are LOCAL to the mesh.
//   tris      (F, 3, 3) T     triangle vertices in the mesh frame, in BVH leaf order
//   tri_ids   (F,) int32      mesh-local face index of each row of `tris`
//   nodes     (N, 16) int32   one BvhNode (64 bytes) per node: words 0-14 its oriented box as
//                             float32 bits (common/box.h: three unit axes as rows, centre, half
//                             extents, mesh frame), word 15 its link (below)
//   dipoles   (N, 7) T        sum of triangle area vectors (3), area-weighted centre (3), radius
// Node 0 of each mesh is its root. Nodes are in pre-order: an internal node's left child directly
// follows it and its link is the right child's index (> 0); a leaf's link is
// -1 - (first_tri << kLeafCountBits | (tri_count - 1)).
//
// Why one 64-byte node with a float32 box: near contact a query of 1M-triangle meshes visits a
// few hundred node pairs, each a dependent load from memory that is not in cache (the trees are
// ~2 x 128 MB in float64). The float64 box (120 bytes) and the child indices (another array)
// cost 2-4 cache lines per node; one aligned line per node halves the misses, and the float32
// box loses nothing that matters (common/box.h: the pruning slack grows to 1e-5 of the pair's
// scale, micrometres next to millimetre gaps; answers are computed on the triangles, in T).
//
#pragma once

#include <cstdint>

#include "box.h"
#include "distance.h"
#include "winding.h"

namespace contactnet {

// Triangles per leaf, and the depth bound that fixes every traversal stack. The median-split
// build gives depth <= ceil(log2(F / kBvhLeafSize)) + 1, so 40 covers 2^40 triangles; the build
// checks it. A leaf link holds its count in kLeafCountBits bits, which leaves 31 -
// kLeafCountBits bits for the first triangle: at most 2^28 triangles per mesh (checked too).
constexpr int kBvhLeafSize = 4;
constexpr int kLeafCountBits = 3;
static_assert(kBvhLeafSize <= (1 << kLeafCountBits), "leaf counts must fit their bits");
constexpr int kBvhMaxDepth = 40;
// Dual traversal pops one pair and pushes at most two, one level deeper in one tree.
constexpr int kDualStack = 2 * kBvhMaxDepth + 2;
constexpr int kSingleStack = kBvhMaxDepth + 2;

// One node (layout above). Reads are member by member, so the record needs no alignment beyond
// its words'.
struct BvhNode {
  float box[kObbScalars];
  int32_t link;
};
static_assert(sizeof(BvhNode) == 64, "a node is one cache line");
constexpr int kNodeWords = 16;

CN_HD bool is_leaf(int32_t link) { return link < 0; }
CN_HD int32_t leaf_first(int32_t link) { return (-1 - link) >> kLeafCountBits; }
CN_HD int32_t leaf_count(int32_t link) { return ((-1 - link) & ((1 << kLeafCountBits) - 1)) + 1; }
CN_HD int32_t leaf_link(int64_t first, int64_t count) {
  return static_cast<int32_t>(-1 - ((first << kLeafCountBits) | (count - 1)));
}

template <typename T>
struct BvhView {
  const T* tris;
  const int32_t* tri_ids;
  const BvhNode* nodes;
  const T* dipoles;
  const int64_t* node_offsets;
  const int64_t* face_offsets;
};

// One mesh's slice of a BvhView.
template <typename T>
struct MeshBvh {
  const T* tris;
  const int32_t* tri_ids;
  const BvhNode* nodes;
  const T* dipoles;
  int64_t num_tris;
};

template <typename T>
CN_HD MeshBvh<T> mesh_bvh(const BvhView<T>& v, int64_t m) {
  const int64_t n0 = v.node_offsets[m], f0 = v.face_offsets[m];
  return {v.tris + 9 * f0, v.tri_ids + f0, v.nodes + n0, v.dipoles + 7 * n0,
          v.face_offsets[m + 1] - f0};
}

template <typename T>
CN_HD void load_tri(const T* tris, int64_t i, Vec3<T> out[3]) {
  for (int k = 0; k < 3; ++k) out[k] = load3(tris + 9 * i + 3 * k);
}

// Box tests run in float32 whatever T: the boxes are stored in float32 (so reading them into
// double only adds conversions), and their 1e-5 relative slack (box.h) covers float32 arithmetic
// as well as storage. Float64 gap-regime mesh_collide on 1k-10k-triangle pairs: ~20% faster.
// The triangle tests at the leaves keep T.
template <typename T>
CN_HD Rigid<float> box_frame(const Rigid<T>& f) {
  Rigid<float> g;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) g.R.m[i][j] = static_cast<float>(f.R.m[i][j]);
  g.t = make_vec3(static_cast<float>(f.t.x), static_cast<float>(f.t.y), static_cast<float>(f.t.z));
  return g;
}

// A leaf's triangles in its own box's coordinates (float32, like the box tests).
struct LeafInBox {
  float v[kBvhLeafSize][3][3];
  int count;
};
template <typename T>
CN_HD void leaf_in_box(const MeshBvh<T>& m, int32_t node, LeafInBox& out) {
  const float* box = m.nodes[node].box;
  const int32_t link = m.nodes[node].link;
  const int32_t first = leaf_first(link);
  out.count = leaf_count(link);
  const Vec3<T> c = load3_as<T>(box + 9);
  for (int i = 0; i < out.count; ++i) {
    Vec3<T> t[3];
    load_tri(m.tris, first + i, t);
    for (int k = 0; k < 3; ++k) {
      const Vec3<T> d = t[k] - c;
      for (int r = 0; r < 3; ++r)
        out.v[i][k][r] = static_cast<float>(dot(load3_as<T>(box + 3 * r), d));
    }
  }
}

// Lower bound on the distance between a leaf's triangles and the other box of the pair `r`, the
// smallest over the triangles of the larger of (a) the distance between the triangle's
// axis-aligned box in the other box's frame and that box, and (b) the gap of their projections
// on the direction from the box's centre to its closest point on the triangle. Why: a leaf of a
// coarse mesh's large triangles has a thick box, which against a small, finely meshed object an
// object size away prunes next to nothing (real meshes: 100x Coal's time on some pairs, whose
// one-triangle leaves have tight bounds); the leaf's own triangles prune as tightly as
// one-triangle leaves. Rounding: float32 like the box tests, covered by the same slack.
// `leaf_is_a`: the leaf is r's box a (its points move into b's frame by y = C^T (x - ta)), else
// it is box b (x = C y + ta into a's frame). Returns `floor` (the caller's own bound) as soon as
// the minimum cannot exceed it.
CN_HD void to_other_box(const ObbRel<float>& r, bool leaf_is_a, const float p[3], float out[3]) {
  for (int j = 0; j < 3; ++j) {
    out[j] = leaf_is_a ? r.C[0][j] * (p[0] - r.ta[0]) + r.C[1][j] * (p[1] - r.ta[1]) +
                             r.C[2][j] * (p[2] - r.ta[2])
                       : r.C[j][0] * p[0] + r.C[j][1] * p[1] + r.C[j][2] * p[2] + r.ta[j];
  }
}
CN_HD float leaf_triangles_gap(const LeafInBox& leaf, const ObbRel<float>& r, bool leaf_is_a,
                               float floor) {
  const float* h = leaf_is_a ? r.hb : r.ha;
  float best = INFINITY;  // the smallest triangle bound so far, before the slack
  for (int i = 0; i < leaf.count; ++i) {
    float y[3][3];
    for (int k = 0; k < 3; ++k) to_other_box(r, leaf_is_a, leaf.v[i][k], y[k]);
    float d2 = 0.0f;
    for (int j = 0; j < 3; ++j) {
      const float lo = min_(y[0][j], min_(y[1][j], y[2][j]));
      const float hi = max_(y[0][j], max_(y[1][j], y[2][j]));
      const float g = max_(0.0f, max_(lo - h[j], -h[j] - hi));
      d2 += g * g;
    }
    float tri = sqrtf(d2);
    // (b) only where it could lower the minimum: max(a, b) >= a.
    if (tri < best) {
      // (b): a projection gap is a lower bound along any unit direction (so an approximate
      // closest point is fine), and along this one it is nearly the distance when the box is
      // small against it (far field), also where the closest point is on an edge or a corner.
      const Vec3<float> y0 = make_vec3(y[0][0], y[0][1], y[0][2]);
      const Vec3<float> y1 = make_vec3(y[1][0], y[1][1], y[1][2]);
      const Vec3<float> y2 = make_vec3(y[2][0], y[2][1], y[2][2]);
      const PointTriangleResult<float> pt =
          point_triangle_closest(make_vec3(0.0f, 0.0f, 0.0f), y0, y1, y2);
      if (pt.dist2 > 0.0f) {
        const Vec3<float> u = (1.0f / sqrtf(pt.dist2)) * (pt.w0 * y0 + pt.w1 * y1 + pt.w2 * y2);
        const float along = min_(dot(u, y0), min_(dot(u, y1), dot(u, y2))) -
                            (h[0] * abs_(u.x) + h[1] * abs_(u.y) + h[2] * abs_(u.z));
        // max_(along, tri) is tri where along is NaN (a float32-degenerate triangle): a NaN
        // would drop this triangle from the minimum.
        tri = max_(along, tri);
      }
    }
    best = min_(best, tri);
    if (best - r.slack <= floor) return floor;  // no better than the caller's bound
  }
  return best - r.slack;
}

template <typename T, typename Visitor>
CN_HD T raise_by_leaf(const Visitor& visitor, T lb, bool use_leaf, const LeafInBox& leaf,
                      const ObbRel<float>& r, bool leaf_is_a) {
  if constexpr (Visitor::kLeafTriangleBounds) {
    if (use_leaf && !(lb > visitor.threshold()))
      return max_(lb, visitor.triangle_bound(
                          leaf_triangles_gap(leaf, r, leaf_is_a, static_cast<float>(lb))));
  }
  return lb;
}

// The two child pairs of node pair (na, nb), not both leaves, with the visitor's bounds: the
// larger box is split (half extents are frame-free, read in place); the fixed node's part of the
// relative frame is computed once for both children. A visitor with kLeafTriangleBounds has,
// where the fixed node is a leaf, its bound raised to leaf_triangles_gap when that is larger
// (visitor.triangle_bound maps the gap to its bound).
template <typename T, typename Visitor>
CN_HD void child_pairs(const MeshBvh<T>& a, const MeshBvh<T>& b, const Rigid<float>& f,
                       const Visitor& visitor, int32_t na, int32_t nb, int32_t pa[2],
                       int32_t pb[2], T lb[2]) {
  const BvhNode& node_a = a.nodes[na];
  const BvhNode& node_b = b.nodes[nb];
  const bool leaf_a = is_leaf(node_a.link), leaf_b = is_leaf(node_b.link);
  const bool split_a =
      !leaf_a && (leaf_b || box_size_at(node_a.box) >= box_size_at(node_b.box));
  LeafInBox leaf;
  bool use_leaf = false;
  if constexpr (Visitor::kLeafTriangleBounds) {
    use_leaf = split_a ? leaf_b : leaf_a;
    if (use_leaf) leaf_in_box(split_a ? b : a, split_a ? nb : na, leaf);
  }
  if (split_a) {
    const FixedB<float> fixed = fixed_b(node_b.box, f);
    pa[0] = na + 1;
    pa[1] = node_a.link;
    for (int c = 0; c < 2; ++c) {
      pb[c] = nb;
      const ObbRel<float> r = obb_rel(fixed, a.nodes[pa[c]].box);
      lb[c] = raise_by_leaf(visitor, visitor.bound(r), use_leaf, leaf, r, false);
    }
  } else {
    const FixedA<float> fixed = fixed_a(node_a.box, f);
    pb[0] = nb + 1;
    pb[1] = node_b.link;
    for (int c = 0; c < 2; ++c) {
      pa[c] = na;
      const ObbRel<float> r = obb_rel(fixed, b.nodes[pb[c]].box);
      lb[c] = raise_by_leaf(visitor, visitor.bound(r), use_leaf, leaf, r, true);
    }
  }
}

// The pair popped next will read one node's children: start loading both nodes' right children
// (the left ones are the next rows, which the hardware fetches itself). Their links are in the
// nodes' own records, already in cache from the box tests that kept the pair.
template <typename T>
CN_HD void prefetch_children(const MeshBvh<T>& a, const MeshBvh<T>& b, int32_t na, int32_t nb) {
  const int32_t la = a.nodes[na].link, lb = b.nodes[nb].link;
  if (!is_leaf(la)) CN_PREFETCH(a.nodes + la);
  if (!is_leaf(lb)) CN_PREFETCH(b.nodes + lb);
}

// Depth-first dual traversal of (a, b), b seen in a's frame through f. The visitor provides
//   T threshold() const  -- node pairs whose bound exceeds it are pruned;
//   T bound(const ObbRel<float>& r) const  -- a lower bound on the distance of two node boxes (b in
//       a's box frame), or any value > threshold() when the boxes cannot hold a pair of interest;
//   bool leaf(int a_first, int a_count, int b_first, int b_count)  -- returns true to stop.
// The larger box of a pair is split. Of two child pairs, the one with the smaller bound is
// visited first (best-first descent, which is what lets a shrinking distance threshold prune the
// rest). Returns true when the visitor stopped the traversal.
// dual_traverse_from starts from node pair (na0, nb0) with bound lb0 instead of the roots (fb:
// box_frame(f)).
template <typename T, typename Visitor>
CN_HD bool dual_traverse_from(const MeshBvh<T>& a, const MeshBvh<T>& b, const Rigid<float>& fb,
                              Visitor& visitor, int32_t na0, int32_t nb0, T lb0) {
  int32_t stack_a[kDualStack], stack_b[kDualStack];
  T stack_lb[kDualStack];
  stack_a[0] = na0;
  stack_b[0] = nb0;
  stack_lb[0] = lb0;
  int top = 1;
  while (top > 0) {
    --top;
    const int32_t na = stack_a[top], nb = stack_b[top];
    if (stack_lb[top] > visitor.threshold()) continue;
    const int32_t la = a.nodes[na].link, lb_ = b.nodes[nb].link;
    if (is_leaf(la) && is_leaf(lb_)) {
      if (visitor.leaf(leaf_first(la), leaf_count(la), leaf_first(lb_), leaf_count(lb_)))
        return true;
      continue;
    }
    int32_t pa[2], pb[2];
    T lb[2];
    child_pairs(a, b, fb, visitor, na, nb, pa, pb, lb);
    // Push the farther pair first so the nearer one is popped next.
    const int first = lb[0] > lb[1] ? 0 : 1;
    for (int k = 0; k < 2; ++k) {
      const int c = k == 0 ? first : 1 - first;
      if (lb[c] > visitor.threshold()) continue;
      stack_a[top] = pa[c];
      stack_b[top] = pb[c];
      stack_lb[top] = lb[c];
      ++top;
    }
    if (top > 0) prefetch_children(a, b, stack_a[top - 1], stack_b[top - 1]);
  }
  return false;
}
template <typename T, typename Visitor>
CN_HD bool dual_traverse(const MeshBvh<T>& a, const MeshBvh<T>& b, const Rigid<T>& f,
                         Visitor& visitor) {
  const Rigid<float> fb = box_frame(f);
  const T lb0 = visitor.bound(obb_rel(fixed_a(a.nodes[0].box, fb), b.nodes[0].box));
  return dual_traverse_from(a, b, fb, visitor, 0, 0, lb0);
}

// Open node pairs of the best-first traversal: a binary min-heap on the bound, of fixed capacity
// (16 KB per query in float64; pairs of 10k- and 100k-triangle meshes 0.5 mm apart keep up to ~500
// open pairs), and beside it a list of pairs deferred when the heap was full (32 KB): a full heap
// spills its second half there, and the traversal finishes those depth-first once the heap is
// spent, from the distance the heap found (most are then pruned at once). Far-field pairs of real
// meshes keep thousands of open pairs of nearly equal bounds; evicting the largest bound of a
// full heap instead scanned half of it per push (up to 20x Coal's time). Only when the deferred
// list is full too does a new pair replace the heap's largest bound if its own is smaller; then
// one pair is dropped and `complete` becomes false.
constexpr int kBestFirstHeap = 1024;
constexpr int kBestFirstDeferred = 2048;
template <typename T>
struct PairHeap {
  int32_t na[kBestFirstHeap], nb[kBestFirstHeap];
  T lb[kBestFirstHeap];
  int size = 0;
  int32_t deferred_a[kBestFirstDeferred], deferred_b[kBestFirstDeferred];
  T deferred_lb[kBestFirstDeferred];
  int deferred = 0;
  bool complete = true;

  CN_HD void swap_rows(int i, int j) {
    const int32_t x = na[i], y = nb[i];
    const T l = lb[i];
    na[i] = na[j], nb[i] = nb[j], lb[i] = lb[j];
    na[j] = x, nb[j] = y, lb[j] = l;
  }
  CN_HD void sift_up(int i) {
    while (i > 0 && lb[(i - 1) / 2] > lb[i]) {
      swap_rows(i, (i - 1) / 2);
      i = (i - 1) / 2;
    }
  }
  CN_HD void push(int32_t x, int32_t y, T l) {
    if (size == kBestFirstHeap && deferred + kBestFirstHeap / 2 <= kBestFirstDeferred) {
      // Spill the heap's second half: leaves (so what stays is a heap), where the larger bounds are.
      for (int j = kBestFirstHeap / 2; j < kBestFirstHeap; ++j, ++deferred)
        deferred_a[deferred] = na[j], deferred_b[deferred] = nb[j], deferred_lb[deferred] = lb[j];
      size = kBestFirstHeap / 2;
    }
    int i = size;
    if (size == kBestFirstHeap) {
      complete = false;
      i = size / 2;  // the largest bound is among the leaves of the heap
      for (int j = size / 2 + 1; j < size; ++j)
        if (lb[j] > lb[i]) i = j;
      if (!(l < lb[i])) return;
    } else {
      ++size;
    }
    na[i] = x, nb[i] = y, lb[i] = l;
    sift_up(i);
  }
  CN_HD void pop() {  // removes row 0
    --size;
    if (size == 0) return;
    na[0] = na[size], nb[0] = nb[size], lb[0] = lb[size];
    for (int i = 0;;) {
      const int l = 2 * i + 1, r = l + 1;
      int m = i;
      if (l < size && lb[l] < lb[m]) m = l;
      if (r < size && lb[r] < lb[m]) m = r;
      if (m == i) break;
      swap_rows(i, m);
      i = m;
    }
  }
};

// Best-first dual traversal (same visitor as dual_traverse): always expands the open pair with the
// smallest bound, so a shrinking threshold stops it after the fewest expansions, instead of after
// the depth-first descent has finished the subtrees it entered first. Returns true when the
// visitor stopped it; `complete` is false when the heap overflowed and dropped a pair, and then
// the visitor's result is only an upper bound for a depth-first pass to finish from.
template <typename T, typename Visitor>
CN_HD bool best_first_traverse(const MeshBvh<T>& a, const MeshBvh<T>& b, const Rigid<T>& f,
                               Visitor& visitor, bool& complete) {
  PairHeap<T> heap;
  const Rigid<float> fb = box_frame(f);
  heap.push(0, 0, visitor.bound(obb_rel(fixed_a(a.nodes[0].box, fb), b.nodes[0].box)));
  while (heap.size > 0 && !(heap.lb[0] > visitor.threshold())) {
    const int32_t na = heap.na[0], nb = heap.nb[0];
    heap.pop();
    const int32_t la = a.nodes[na].link, lb_ = b.nodes[nb].link;
    if (is_leaf(la) && is_leaf(lb_)) {
      if (visitor.leaf(leaf_first(la), leaf_count(la), leaf_first(lb_), leaf_count(lb_))) {
        complete = heap.complete;
        return true;
      }
      continue;
    }
    int32_t pa[2], pb[2];
    T lb[2];
    child_pairs(a, b, fb, visitor, na, nb, pa, pb, lb);
    for (int c = 0; c < 2; ++c)
      if (!(lb[c] > visitor.threshold())) heap.push(pa[c], pb[c], lb[c]);
  }
  complete = heap.complete;
  for (int i = 0; i < heap.deferred; ++i) {
    if (heap.deferred_lb[i] > visitor.threshold()) continue;
    if (dual_traverse_from(a, b, fb, visitor, heap.deferred_a[i], heap.deferred_b[i],
                           heap.deferred_lb[i]))
      return true;
  }
  return false;
}

// Generalised winding number of p (in the mesh frame). Nodes whose centre is farther than
// beta * radius from p contribute their dipole term (Barill et al. 2018, first order); the rest
// are summed exactly per triangle. beta = 2 keeps the error well below 0.01 for points not
// hugging the surface; the exact terms take over near it.
template <typename T>
CN_HD T winding_number(const MeshBvh<T>& m, const Vec3<T>& p, T beta) {
  int32_t stack[kSingleStack];
  int top = 1;
  stack[0] = 0;
  T omega = T(0);
  while (top > 0) {
    const int32_t n = stack[--top];
    const int32_t link = m.nodes[n].link;
    if (is_leaf(link)) {
      for (int32_t i = leaf_first(link), e = i + leaf_count(link); i < e; ++i) {
        Vec3<T> t[3];
        load_tri(m.tris, i, t);
        omega += triangle_solid_angle(p, t[0], t[1], t[2]);
      }
      continue;
    }
    const T* d = m.dipoles + 7 * n;
    const Vec3<T> centre = load3(d + 3);
    const T r = beta * d[6];
    if (norm2(p - centre) > r * r) {
      omega += dipole_solid_angle(p, centre, load3(d));
      continue;
    }
    stack[top++] = link;
    stack[top++] = n + 1;
  }
  return omega * inv_four_pi<T>();
}

}  // namespace contactnet

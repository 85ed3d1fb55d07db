// Body-level broad phase of the IPC candidate searches, for affine bodies (x = A x0 + p per body):
// each body's vertices, faces and edges in three box trees built once in its rest frame; per
// search, the body pairs whose moving boxes come within reach, then a dual traversal of only those
// pairs' trees, with the node boxes mapped to the world by the bodies' affine maps, down to the
// primitive pairs, which pass EXACTLY the test of the all-primitive searches
// (ipc_broad_phase.h: primitive_box, boxes_overlap, CandidatePairFilter). So the pairs found are
// those of ipc_collision_candidates / ipc_swept_candidates, at a cost that follows what is near
// contact, not the scene's size. Per-index math (CN_HD): the same code can run in a CUDA thread;
// the host build of the trees is in ipc_body_trees.h, the search's driver for either device in
// ipc_body_search.h.
//
// Why not the mesh BVH of common/bvh.h: it holds triangles only, in float32 oriented boxes with a
// 1e-5 relative slack, for rigid poses; this search needs vertex and edge trees as well, and
// boxes whose images under a general (non-rigid) A bound the positions to rounding.
//
// Tree layout (all bodies and kinds in one set of arrays; N nodes, P = V + F + E primitive slots):
//   box   (N, 6) T      rest-frame [lo, hi] of the node's primitives (not inflated)
//   node  (N, 3) int64  [right, first, count]: right = the right child's row (the left child is the
//                       next row: pre-order), -1 for a leaf; the node's primitives are
//                       prim[first, first + count)
//   prim  (P,) int64    primitive ids (vertex, face or edge ids of the packed mesh) in leaf order
//   root  (nb, 3) int64 root row of body b's vertex, face and edge tree; -1 when it has none
// Each tree is built by median splits on its longest axis (leaves of <= kBodyLeafSize), so its
// depth is <= log2(count) + 1 <= kBodyTreeMaxDepth (checked at the build), which fixes the stacks.
#pragma once

#include <cstdint>

#include "ipc/ipc_broad_phase.h"

namespace contactnet {

constexpr int kBodyLeafSize = 4;
constexpr int kBodyTreeMaxDepth = 48;
// A dual traversal pops one pair and pushes at most two, one level deeper in one tree.
constexpr int kBodyStack = 2 * kBodyTreeMaxDepth + 2;
// A traversal of one body pair's trees whose tree a holds more than kBodySplitPrimitives is split
// into 2^kBodySplitDepth parts (tree a's subtrees at that depth), the units the threads share;
// smaller ones (a cube's) are one unit.
constexpr int kBodySplitDepth = 3;
constexpr int64_t kBodySplitPrimitives = 256;
enum BodyTreeKind { kVertexTree = 0, kFaceTree = 1, kEdgeTree = 2 };

// Relative slack of the node boxes' images: positions computed elsewhere as A x0 + p (einsum,
// then the broad-phase shift) and the boxes' centre / half-extent form each round a few times;
// 64 ulps of the coordinates' scale bound all of it, and prune nothing that matters (1e-14 m at
// 1 m in float64).
template <typename T>
CN_HD T body_box_slack() {
  return T(64) * (sizeof(T) == 4 ? T(1.1920929e-7) : T(2.220446049250313e-16));
}

// The affine maps of one body at t0 and (swept) t1: q = (p, A row-major), 12 values each.
template <typename T>
struct BodyMotion {
  const T* q0;
  const T* q1;  // null: a static query
};

// World box of a rest-frame box under a body's motion, inflated by `inflate` (+ slack): the union
// over t0 and t1 of the box of the mapped box (centre A c + p, half extents |A| h). An affine map
// keeps convex hulls, and a point moving on a straight line between its images at t0 and t1 stays
// in the hull of both, so the box bounds every primitive box of the node, swept or not.
template <typename T>
CN_HD void body_world_box(const BodyMotion<T>& m, const T* rest, T inflate, T out[6]) {
  T c[3], h[3];
  for (int j = 0; j < 3; ++j) {
    c[j] = T(0.5) * (rest[j] + rest[3 + j]);
    h[j] = T(0.5) * (rest[3 + j] - rest[j]);
  }
  for (int i = 0; i < 3; ++i) {
    out[i] = inf_value<T>();
    out[3 + i] = -inf_value<T>();
  }
  for (int t = 0; t < (m.q1 ? 2 : 1); ++t) {
    const T* q = t == 0 ? m.q0 : m.q1;
    for (int i = 0; i < 3; ++i) {
      T centre = q[i], half = T(0), scale = q[i] < T(0) ? -q[i] : q[i];
      for (int j = 0; j < 3; ++j) {
        const T a = q[3 + 3 * i + j], abs_a = a < T(0) ? -a : a;
        const T abs_c = c[j] < T(0) ? -c[j] : c[j];
        centre += a * c[j];
        half += abs_a * h[j];
        scale += abs_a * (abs_c + h[j]);
      }
      const T pad = half + inflate + body_box_slack<T>() * (scale + inflate);
      out[i] = centre - pad < out[i] ? centre - pad : out[i];
      out[3 + i] = centre + pad > out[3 + i] ? centre + pad : out[3 + i];
    }
  }
}

// Counters of one search (timing-free measures of its cost), summed over items.
enum BodySearchStat {
  kBodyPairsTested = 0,  // body pairs whose world boxes were compared
  kBodyPairsNear = 1,    // of those, pairs whose boxes come within reach (their trees are traversed)
  kNodePairsTested = 2,  // node pairs popped and box-tested by the traversals
  kPrimitivePairsTested = 3,  // primitive pairs given the exact primitive-box test
  kBodySearchStats = 4
};

// Candidates of the body pairs: item 3 k + part traverses pair k = (a, b) for part 0: vertices of
// a against faces of b, 1: vertices of b against faces of a, 2: edges of a against edges of b;
// `item_roots` tests the pair, `visit_part` traverses one part of a near item.
// Reports (vertex, face) and (edge_a < edge_b) pairs through the filters, like GridFunctor.
template <typename T>
struct BodyPairTraversal {
  CandidatePairFilter<T> fv_filter;  // self = false
  CandidatePairFilter<T> ee_filter;  // self = true
  const T* v0;
  const T* v1;  // null: pairs within reach at v0 (filters' dhat2), else swept boxes
  const int64_t* faces;
  const int64_t* edges;
  const T* q0;  // (nb, 12)
  const T* q1;  // (nb, 12) or null
  const int64_t* pairs;  // (npairs, 2) body ids
  const T* box;          // tree layout above
  const int64_t* node;
  const int64_t* prim;
  const int64_t* root;
  T inflate;  // reach / 2, on every box

  CN_HD BodyMotion<T> motion(int64_t body) const {
    return {q0 + 12 * body, q1 ? q1 + 12 * body : nullptr};
  }

  // Whether the two nodes' world boxes (each inflated by reach / 2) overlap; their sizes.
  CN_HD bool nodes_meet(const BodyMotion<T>& ma, int64_t na, const BodyMotion<T>& mb, int64_t nb,
                        T& size_a, T& size_b) const {
    T wa[6], wb[6];
    body_world_box(ma, box + 6 * na, inflate, wa);
    body_world_box(mb, box + 6 * nb, inflate, wb);
    size_a = (wa[3] - wa[0]) + (wa[4] - wa[1]) + (wa[5] - wa[2]);
    size_b = (wb[3] - wb[0]) + (wb[4] - wb[1]) + (wb[5] - wb[2]);
    return boxes_overlap(wa, wb);
  }

  // The exact test of the all-primitive searches on the primitives of two leaves.
  template <typename Sink>
  CN_HD void leaves(int kind_a, int64_t la, int kind_b, int64_t lb, Sink& sink,
                    int64_t* stats) const {
    const int64_t fa = node[3 * la + 1], ca = node[3 * la + 2];
    const int64_t fb = node[3 * lb + 1], cb = node[3 * lb + 2];
    T ba[kBodyLeafSize][6], bb[kBodyLeafSize][6];
    const int64_t* prim_a = kind_a == kVertexTree ? nullptr : edges;  // vertex or edge
    const int64_t* prim_b = kind_b == kFaceTree ? faces : edges;
    const int nv_a = kind_a == kVertexTree ? 1 : 2, nv_b = kind_b == kFaceTree ? 3 : 2;
    for (int64_t i = 0; i < ca; ++i)
      primitive_box(v0, v1, prim_a, nv_a, prim[fa + i], inflate, ba[i]);
    for (int64_t j = 0; j < cb; ++j)
      primitive_box(v0, v1, prim_b, nv_b, prim[fb + j], inflate, bb[j]);
    const CandidatePairFilter<T>& filter = kind_a == kEdgeTree ? ee_filter : fv_filter;
    stats[kPrimitivePairsTested] += ca * cb;
    for (int64_t i = 0; i < ca; ++i)
      for (int64_t j = 0; j < cb; ++j)
        if (boxes_overlap(ba[i], bb[j])) filter.take(prim[fa + i], prim[fb + j], sink);
  }

  // Dual traversal of tree ra (body motion ma) against tree rb; splits the larger node box.
  template <typename Sink>
  CN_HD void traverse(int kind_a, int64_t ra, const BodyMotion<T>& ma, int kind_b, int64_t rb,
                      const BodyMotion<T>& mb, Sink& sink, int64_t* stats) const {
    int64_t stack_a[kBodyStack], stack_b[kBodyStack];
    stack_a[0] = ra;
    stack_b[0] = rb;
    int top = 1;
    while (top > 0) {
      --top;
      const int64_t na = stack_a[top], nb = stack_b[top];
      ++stats[kNodePairsTested];
      T size_a, size_b;
      if (!nodes_meet(ma, na, mb, nb, size_a, size_b)) continue;
      const int64_t right_a = node[3 * na], right_b = node[3 * nb];
      if (right_a < 0 && right_b < 0) {
        leaves(kind_a, na, kind_b, nb, sink, stats);
        continue;
      }
      if (right_a >= 0 && (right_b < 0 || size_a >= size_b)) {
        stack_a[top] = right_a, stack_b[top++] = nb;
        stack_a[top] = na + 1, stack_b[top++] = nb;
      } else {
        stack_a[top] = na, stack_b[top++] = right_b;
        stack_a[top] = na, stack_b[top++] = nb + 1;
      }
    }
  }

  // Item 3 k + part: whether body pair k's boxes meet (a far pair costs this one test), and the
  // roots of the two trees its part traverses (ra < 0 when there is nothing to traverse).
  CN_HD bool item_roots(int64_t item, int64_t* stats, int64_t& ra, int64_t& rb, int64_t& a,
                        int64_t& b) const {
    const int64_t k = item / 3, part = item % 3;
    a = pairs[2 * k], b = pairs[2 * k + 1];
    ra = rb = -1;
    const int64_t va = root[3 * a + kVertexTree], vb = root[3 * b + kVertexTree];
    if (va < 0 || vb < 0) return false;  // a body without vertices
    // The vertex tree's root box is the body's box.
    T size_a, size_b;
    const bool near = nodes_meet(motion(a), va, motion(b), vb, size_a, size_b);
    if (part == 0) {
      ++stats[kBodyPairsTested];
      stats[kBodyPairsNear] += near;
    }
    if (!near) return false;
    if (part == 1) {
      const int64_t t = a;
      a = b;
      b = t;
    }
    ra = root[3 * a + item_kind_a(item)];
    rb = root[3 * b + item_kind_b(item)];
    return ra >= 0 && rb >= 0;
  }
  CN_HD static int item_kind_a(int64_t item) { return item % 3 == 2 ? kEdgeTree : kVertexTree; }
  CN_HD static int item_kind_b(int64_t item) { return item % 3 == 2 ? kEdgeTree : kFaceTree; }

  // How many levels of tree a (root ra) the parts of its item split: 0 or kBodySplitDepth, so
  // an item has 2^split_depth(ra) parts.
  CN_HD int split_depth(int64_t ra) const {
    return node[3 * ra + 2] > kBodySplitPrimitives ? kBodySplitDepth : 0;
  }

  // Part `sub` of a near item (roots ra, rb of bodies a, b): tree a's subtree reached by the bits
  // of `sub` (0: left) against all of tree b, so that one body pair near contact (a bowl and what
  // lies in it) spreads over the threads. A branch that ends in a leaf sooner belongs to the part
  // whose remaining bits are 0.
  template <typename Sink>
  CN_HD void visit_part(int64_t item, int64_t sub, int64_t ra, int64_t rb, int64_t a, int64_t b,
                        Sink& sink, int64_t* stats) const {
    int64_t na = ra;
    for (int level = 0, depth = split_depth(ra); level < depth; ++level) {
      const int64_t right = node[3 * na];
      if (right < 0) {
        if (sub >> level) return;
        break;
      }
      na = (sub >> level) & 1 ? right : na + 1;
    }
    traverse(item_kind_a(item), na, motion(a), item_kind_b(item), rb, motion(b), sink, stats);
  }
};

}  // namespace contactnet

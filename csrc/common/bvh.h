// Bounding-volume hierarchies of triangle meshes, packed for a whole mesh library, and their
// traversals (dual-tree for mesh–mesh queries, single-tree for winding numbers) with explicit,
// fixed-size stacks: no recursion, so the same code runs in a CPU loop and a CUDA thread.
//
// Layout (built by contactnet::build_mesh_bvh, see csrc/mesh_bvh/mesh_bvh.h). For mesh m, its
// nodes are rows node_offsets[m] .. node_offsets[m+1) and its triangles face_offsets[m] ..
// face_offsets[m+1); node and triangle indices stored in the arrays are LOCAL to the mesh.
//   tris      (F, 3, 3) T     triangle vertices in the mesh frame, in BVH leaf order
//   tri_ids   (F,) int32      mesh-local face index of each row of `tris`
//   obbs      (N, 5, 3) T     node oriented box (common/box.h): three unit axes (rows), centre,
//                             half extents, mesh frame
//   children  (N, 2) int32    internal node: (left, right); leaf: (-1 - first_tri, tri_count)
//   dipoles   (N, 7) T        sum of triangle area vectors (3), area-weighted centre (3), radius
// Node 0 of each mesh is its root; a node's left child directly follows it (pre-order).
//
// Why oriented boxes: they replaced axis-aligned boxes (benchmarks/mesh_contacts.py, one core,
// float64, pairs of 82k-triangle meshes 0.5 mm apart). The AABB of a tilted surface patch is
// thick, so near contact most box tests passed: mesh_collide took ~0.8 ms per query with AABBs
// (and distance-based leaves), ~40 us with OBBs (and triangles_intersect; fcl's OBB collide:
// ~25 us); mesh_distance went from ~5.7 ms to ~0.6-0.8 ms (with the bound of box.h). One
// box serves every query: the 15-axis separating-axis test is exact for boxes (collision), and
// the gap along the direction between the boxes' approximate closest points bounds the distance
// nearly as tightly as the box allows (box.h). RSS, which PQP and fcl use for distance, is tighter
// only at its rounded corners and needs an exact rectangle-rectangle distance per test.
#pragma once

#include <cstdint>

#include "box.h"
#include "winding.h"

namespace contactnet {

// Triangles per leaf, and the depth bound that fixes every traversal stack. The median-split
// build gives depth <= ceil(log2(F / kBvhLeafSize)) + 1, so 40 covers 2^40 triangles; the build
// checks it.
constexpr int kBvhLeafSize = 4;
constexpr int kBvhMaxDepth = 40;
// Dual traversal pops one pair and pushes at most two, one level deeper in one tree.
constexpr int kDualStack = 2 * kBvhMaxDepth + 2;
constexpr int kSingleStack = kBvhMaxDepth + 2;

template <typename T>
struct BvhView {
  const T* tris;
  const int32_t* tri_ids;
  const T* obbs;
  const int32_t* children;
  const T* dipoles;
  const int64_t* node_offsets;
  const int64_t* face_offsets;
};

// One mesh's slice of a BvhView.
template <typename T>
struct MeshBvh {
  const T* tris;
  const int32_t* tri_ids;
  const T* obbs;
  const int32_t* children;
  const T* dipoles;
  int64_t num_tris;
};

template <typename T>
CN_HD MeshBvh<T> mesh_bvh(const BvhView<T>& v, int64_t m) {
  const int64_t n0 = v.node_offsets[m], f0 = v.face_offsets[m];
  return {v.tris + 9 * f0, v.tri_ids + f0, v.obbs + kObbScalars * n0, v.children + 2 * n0,
          v.dipoles + 7 * n0, v.face_offsets[m + 1] - f0};
}

template <typename T>
CN_HD void load_tri(const T* tris, int64_t i, Vec3<T> out[3]) {
  for (int k = 0; k < 3; ++k) out[k] = load3(tris + 9 * i + 3 * k);
}

// The two child pairs of node pair (na, nb), not both leaves, with the visitor's bounds: the
// larger box is split (half extents are frame-free, read in place); the fixed node's part of the
// relative frame is computed once for both children.
template <typename T, typename Visitor>
CN_HD void child_pairs(const MeshBvh<T>& a, const MeshBvh<T>& b, const Rigid<T>& f,
                       const Visitor& visitor, int32_t na, int32_t nb, int32_t pa[2],
                       int32_t pb[2], T lb[2]) {
  const int32_t a0 = a.children[2 * na], b0 = b.children[2 * nb];
  const bool leaf_a = a0 < 0, leaf_b = b0 < 0;
  const T* box_na = a.obbs + kObbScalars * na;
  const T* box_nb = b.obbs + kObbScalars * nb;
  const bool split_a = !leaf_a && (leaf_b || box_size_at(box_na) >= box_size_at(box_nb));
  if (split_a) {
    const FixedB<T> fixed = fixed_b(box_nb, f);
    for (int c = 0; c < 2; ++c) {
      pa[c] = a.children[2 * na + c];
      pb[c] = nb;
      lb[c] = visitor.bound(obb_rel(fixed, a.obbs + kObbScalars * pa[c]));
    }
  } else {
    const FixedA<T> fixed = fixed_a(box_na, f);
    for (int c = 0; c < 2; ++c) {
      pa[c] = na;
      pb[c] = b.children[2 * nb + c];
      lb[c] = visitor.bound(obb_rel(fixed, b.obbs + kObbScalars * pb[c]));
    }
  }
}

// Depth-first dual traversal of (a, b), b seen in a's frame through f. The visitor provides
//   T threshold() const  -- node pairs whose bound exceeds it are pruned;
//   T bound(const ObbRel<T>& r) const  -- a lower bound on the distance of two node boxes (b in
//       a's box frame), or any value > threshold() when the boxes cannot hold a pair of interest;
//   bool leaf(int a_first, int a_count, int b_first, int b_count)  -- returns true to stop.
// The larger box of a pair is split. Of two child pairs, the one with the smaller bound is
// visited first (best-first descent, which is what lets a shrinking distance threshold prune the
// rest). Returns true when the visitor stopped the traversal.
template <typename T, typename Visitor>
CN_HD bool dual_traverse(const MeshBvh<T>& a, const MeshBvh<T>& b, const Rigid<T>& f,
                         Visitor& visitor) {
  int32_t stack_a[kDualStack], stack_b[kDualStack];
  T stack_lb[kDualStack];
  stack_a[0] = 0;
  stack_b[0] = 0;
  stack_lb[0] = visitor.bound(obb_rel(fixed_a(a.obbs, f), b.obbs));
  int top = 1;
  while (top > 0) {
    --top;
    const int32_t na = stack_a[top], nb = stack_b[top];
    if (stack_lb[top] > visitor.threshold()) continue;
    const int32_t a0 = a.children[2 * na], a1 = a.children[2 * na + 1];
    const int32_t b0 = b.children[2 * nb], b1 = b.children[2 * nb + 1];
    if (a0 < 0 && b0 < 0) {
      if (visitor.leaf(-1 - a0, a1, -1 - b0, b1)) return true;
      continue;
    }
    int32_t pa[2], pb[2];
    T lb[2];
    child_pairs(a, b, f, visitor, na, nb, pa, pb, lb);
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
  }
  return false;
}

// Open node pairs of the best-first traversal: a binary min-heap on the bound, of fixed capacity
// (16 KB per query in float64; pairs of 10k- and 100k-triangle meshes 0.5 mm apart keep up to ~500
// open pairs). When full, a new pair replaces the pair with the largest bound if its own is
// smaller; either way one pair is dropped and `complete` becomes false.
constexpr int kBestFirstHeap = 1024;
template <typename T>
struct PairHeap {
  int32_t na[kBestFirstHeap], nb[kBestFirstHeap];
  T lb[kBestFirstHeap];
  int size = 0;
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
  heap.push(0, 0, visitor.bound(obb_rel(fixed_a(a.obbs, f), b.obbs)));
  while (heap.size > 0 && !(heap.lb[0] > visitor.threshold())) {
    const int32_t na = heap.na[0], nb = heap.nb[0];
    heap.pop();
    const int32_t a0 = a.children[2 * na], a1 = a.children[2 * na + 1];
    const int32_t b0 = b.children[2 * nb], b1 = b.children[2 * nb + 1];
    if (a0 < 0 && b0 < 0) {
      if (visitor.leaf(-1 - a0, a1, -1 - b0, b1)) {
        complete = heap.complete;
        return true;
      }
      continue;
    }
    int32_t pa[2], pb[2];
    T lb[2];
    child_pairs(a, b, f, visitor, na, nb, pa, pb, lb);
    for (int c = 0; c < 2; ++c)
      if (!(lb[c] > visitor.threshold())) heap.push(pa[c], pb[c], lb[c]);
  }
  complete = heap.complete;
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
    const int32_t c0 = m.children[2 * n], c1 = m.children[2 * n + 1];
    if (c0 < 0) {
      for (int32_t i = -1 - c0, e = -1 - c0 + c1; i < e; ++i) {
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
    stack[top++] = c1;
    stack[top++] = c0;
  }
  return omega * inv_four_pi<T>();
}

}  // namespace contactnet

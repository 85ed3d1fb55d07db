// Point queries on one mesh's BVH (layout: common/bvh.h): the closest triangle to a point by
// branch and bound. Single tree, explicit fixed-size stack, so the same code runs in a CPU loop
// and a CUDA thread. The point is in the mesh frame.
#pragma once

#include <cstdint>

#include "bvh.h"

namespace contactnet {

// Lower bound on the distance from point p (mesh frame, float32) to a node's stored box: the
// distance from p's box coordinates to the box, less a rounding slack. Float32 like the dual
// traversal's box tests (common/bvh.h box_frame): the stored axes are unit and orthogonal to a
// few 1e-8, p is rounded to float32, and the arithmetic is float32, which moves the result by a
// few 1e-7 of the scale |p|_1 + |centre|_1 + the half extents; BoxSlack<float> (1e-5 of that
// scale, common/box.h) covers it, so a box whose triangles lie within a distance d of p is never
// bounded above d. `p_l1`: |p|_1, computed once per query.
CN_HD float point_box_lower_bound(const float* box, const Vec3<float>& p, float p_l1) {
  const Vec3<float> d = p - load3_as<float>(box + 9);
  float d2 = 0.0f;
  float scale = p_l1 + l1_at(box + 9);
  for (int i = 0; i < 3; ++i) {
    const float h = box[12 + i];
    const float g = max_(0.0f, abs_(dot(load3_as<float>(box + 3 * i), d)) - h);
    d2 += g * g;
    scale += h;
  }
  return sqrtf(d2) - BoxSlack<float>::rel * scale;
}

// The closest triangle of mesh m to p among those strictly closer than `bound` (pass +inf for
// all): dist2 its squared distance (bound^2 when none), row its leaf-order row in m (-1 when
// none; m.tri_ids[row] is its face id). "Squared" only in dist2: bounds are distances.
template <typename T>
struct ClosestTriangle {
  T dist2;
  int32_t row;
};

// Depth-first branch and bound, nearer child first: the first leaves reached are near p, which
// shrinks the bound that prunes the rest (what a best-first heap buys in the dual traversal,
// without its per-thread memory; with one tree the nearer-first descent is already close to
// best-first). A node is pruned when its box's lower bound reaches the best distance so far, both
// when it is pushed and when it is popped (the best may have shrunk in between). Stack: each pop
// pushes at most two nodes one level deeper, so it holds at most depth + 1 <= kSingleStack.
template <typename T>
CN_HD ClosestTriangle<T> closest_triangle(const MeshBvh<T>& m, const Vec3<T>& p, T bound) {
  const Vec3<float> pf =
      make_vec3(static_cast<float>(p.x), static_cast<float>(p.y), static_cast<float>(p.z));
  const float p_l1 = abs_(pf.x) + abs_(pf.y) + abs_(pf.z);
  T best = bound;  // best distance so far (the bound until a triangle is found)
  ClosestTriangle<T> out{bound * bound, -1};
  int32_t stack[kSingleStack];
  float stack_lb[kSingleStack];
  stack[0] = 0;
  stack_lb[0] = point_box_lower_bound(m.nodes[0].box, pf, p_l1);
  int top = 1;
  while (top > 0) {
    --top;
    if (!(T(stack_lb[top]) < best)) continue;
    const int32_t n = stack[top];
    const int32_t link = m.nodes[n].link;
    if (is_leaf(link)) {
      for (int32_t i = leaf_first(link), e = i + leaf_count(link); i < e; ++i) {
        Vec3<T> t[3];
        load_tri(m.tris, i, t);
        const T d2 = point_triangle_closest(p, t[0], t[1], t[2]).dist2;
        if (d2 < out.dist2) {
          out.dist2 = d2;
          out.row = i;
          best = sqrt(d2);
        }
      }
      continue;
    }
    const int32_t child[2] = {n + 1, link};
    const float lb[2] = {point_box_lower_bound(m.nodes[child[0]].box, pf, p_l1),
                         point_box_lower_bound(m.nodes[child[1]].box, pf, p_l1)};
    // Push the farther child first so the nearer one is popped next.
    const int first = lb[0] > lb[1] ? 0 : 1;
    for (int k = 0; k < 2; ++k) {
      const int c = k == 0 ? first : 1 - first;
      if (!(T(lb[c]) < best)) continue;
      stack[top] = child[c];
      stack_lb[top] = lb[c];
      ++top;
    }
  }
  return out;
}

}  // namespace contactnet

// The body-level IPC candidate search's trees (ipc_body_broad_phase.h), built on the host
// (registered in ipc_cpu.cpp, like ipc_assemble_hessian); the search itself, for either device, is
// in ipc_body_search.h.
//
// ipc_body_trees(rest_vertices (V, 3) float, faces (F, 3) int64, edges (E, 2) int64,
//                vertex_body (V,) int64 in [0, num_bodies), num_bodies)
//   -> box (N, 6), node (N, 3) int64, prim (V + F + E,) int64, root (num_bodies, 3) int64: every
//      body's vertex, face and edge trees in its rest frame (layout: ipc_body_broad_phase.h).
//      A face / edge belongs to its first vertex's body. Built in parallel, one task per body and
//      kind; the same arrays on any number of threads.
#pragma once

#include <algorithm>
#include <limits>
#include <numeric>
#include <tuple>
#include <vector>

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>

#include "common/launch_cpu.h"
#include "ipc/ipc.h"
#include "ipc/ipc_body_broad_phase.h"

namespace contactnet {

// One body's tree of one kind: its nodes (rows counted from the tree's root), over the slots
// [begin, end) of the shared primitive arrays, which it reorders into leaf order in place. Trees
// own disjoint slots, so they are built in parallel.
template <typename T>
struct BodyTreeBuilder {
  std::vector<T> box;         // 6 per node
  std::vector<int64_t> node;  // 3 per node: [right child's row in this tree or -1, first, count]
  int64_t* prim;              // (slots,) primitive ids, shared
  T* prim_box;                // (slots, 6) their rest boxes, shared

  // Builds the subtree of prim[begin, end) at the next row; returns its depth.
  int build(int64_t begin, int64_t end) {
    const int64_t row = static_cast<int64_t>(node.size() / 3);
    T b[6], cl[3], ch[3];
    for (int c = 0; c < 3; ++c) {
      b[c] = cl[c] = std::numeric_limits<T>::infinity();
      b[3 + c] = ch[c] = -std::numeric_limits<T>::infinity();
    }
    for (int64_t i = begin; i < end; ++i) {
      const T* pb = prim_box + 6 * i;
      for (int c = 0; c < 3; ++c) {
        b[c] = std::min(b[c], pb[c]);
        b[3 + c] = std::max(b[3 + c], pb[3 + c]);
        const T centre = pb[c] + pb[3 + c];
        cl[c] = std::min(cl[c], centre);
        ch[c] = std::max(ch[c], centre);
      }
    }
    box.insert(box.end(), b, b + 6);
    node.insert(node.end(), {int64_t(-1), begin, end - begin});
    if (end - begin <= kBodyLeafSize) return 1;
    int axis = 0;
    for (int c = 1; c < 3; ++c)
      if (ch[c] - cl[c] > ch[axis] - cl[axis]) axis = c;
    // Median split on the centres (twice the centre: the order is the same), slots moved with
    // their boxes.
    const int64_t mid = begin + (end - begin) / 2;
    std::vector<int64_t> order(end - begin);
    std::iota(order.begin(), order.end(), begin);
    auto centre = [&](int64_t s) { return prim_box[6 * s + axis] + prim_box[6 * s + 3 + axis]; };
    std::nth_element(order.begin(), order.begin() + (mid - begin), order.end(),
                     [&](int64_t x, int64_t y) {
                       return centre(x) < centre(y) || (centre(x) == centre(y) && prim[x] < prim[y]);
                     });
    std::vector<int64_t> ids(end - begin);
    std::vector<T> boxes(6 * (end - begin));
    for (int64_t k = 0; k < end - begin; ++k) {
      ids[k] = prim[order[k]];
      std::copy_n(prim_box + 6 * order[k], 6, boxes.begin() + 6 * k);
    }
    std::copy(ids.begin(), ids.end(), prim + begin);
    std::copy(boxes.begin(), boxes.end(), prim_box + 6 * begin);
    const int left = build(begin, mid);
    node[3 * row] = static_cast<int64_t>(node.size() / 3);
    const int right = build(mid, end);
    return 1 + std::max(left, right);
  }
};

inline std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> ipc_body_trees_cpu(
    const at::Tensor& rest, const at::Tensor& faces, const at::Tensor& edges,
    const at::Tensor& vertex_body, int64_t num_bodies) {
  check_vertices(rest, "rest_vertices");
  check_mesh(rest, faces, edges, vertex_body);
  TORCH_CHECK(rest.is_cpu(), "rest_vertices: expected a CPU tensor (the trees are built on the host)");
  TORCH_CHECK(num_bodies >= 0, "num_bodies: expected >= 0, got ", num_bodies);
  const int64_t V = rest.size(0), F = faces.size(0), E = edges.size(0);
  if (V > 0)
    TORCH_CHECK_VALUE(vertex_body.max().item<int64_t>() < num_bodies,
                      "vertex_body: body ids must be < num_bodies (", num_bodies, ")");
  at::Tensor root = at::full({num_bodies, 3}, -1, vertex_body.options());
  at::Tensor prim = at::empty({V + F + E}, vertex_body.options());
  at::Tensor box, node;
  AT_DISPATCH_FLOATING_TYPES(rest.scalar_type(), "ipc_body_trees", [&] {
    using T = scalar_t;
    const T* x = rest.data_ptr<T>();
    const int64_t* body = vertex_body.data_ptr<int64_t>();
    const int64_t* f = faces.data_ptr<int64_t>();
    const int64_t* e = edges.data_ptr<int64_t>();
    int64_t* slots = prim.data_ptr<int64_t>();
    std::vector<T> slot_box(6 * (V + F + E));
    // The trees in (kind, body) order, each over its body's primitives of that kind in ascending
    // ids (a counting sort by body).
    struct Tree {
      int kind;
      int64_t body, begin, end;
      int depth;
      BodyTreeBuilder<T> builder;
    };
    std::vector<Tree> trees;
    const int64_t counts[3] = {V, F, E};
    const int64_t* prims[3] = {nullptr, f, e};
    const int nvs[3] = {1, 3, 2};
    int64_t base = 0;  // the kind's first slot
    for (int kind = 0; kind < 3; base += counts[kind++]) {
      const int64_t n = counts[kind];
      auto owner = [&](int64_t i) { return body[prims[kind] ? prims[kind][nvs[kind] * i] : i]; };
      std::vector<int64_t> start(num_bodies + 1, 0);
      for (int64_t i = 0; i < n; ++i) ++start[owner(i) + 1];
      for (int64_t b = 0; b < num_bodies; ++b) {
        if (start[b + 1] > 0)
          trees.push_back({kind, b, base + start[b], base + start[b] + start[b + 1], 0, {}});
        start[b + 1] += start[b];
      }
      for (int64_t i = 0; i < n; ++i) slots[base + start[owner(i)]++] = i;
      at::parallel_for(0, n, 4096, [&](int64_t lo, int64_t hi) {
        for (int64_t k = lo; k < hi; ++k)
          primitive_box<T>(x, nullptr, prims[kind], nvs[kind], slots[base + k], T(0),
                           slot_box.data() + 6 * (base + k));
      });
    }
    // A bowl's tree costs far more than a small object's: the threads take the trees in turn.
    CpuDynamicLauncher{}(rest, static_cast<int64_t>(trees.size()), [&](int64_t t) {
      Tree& tree = trees[t];
      tree.builder.prim = slots;
      tree.builder.prim_box = slot_box.data();
      tree.depth = tree.builder.build(tree.begin, tree.end);
    });
    // Concatenated in (kind, body) order, child rows shifted by each tree's first row.
    int64_t N = 0;
    for (const Tree& tree : trees) {
      TORCH_CHECK(tree.depth <= kBodyTreeMaxDepth, "ipc_body_trees: tree depth ", tree.depth,
                  " exceeds kBodyTreeMaxDepth");
      N += static_cast<int64_t>(tree.builder.node.size() / 3);
    }
    box = at::empty({N, 6}, rest.options());
    node = at::empty({N, 3}, vertex_body.options());
    T* out_box = box.data_ptr<T>();
    int64_t* out_node = node.data_ptr<int64_t>();
    int64_t* roots = root.data_ptr<int64_t>();
    int64_t row = 0;
    for (const Tree& tree : trees) {
      roots[3 * tree.body + tree.kind] = row;
      const int64_t rows = static_cast<int64_t>(tree.builder.node.size() / 3);
      out_box = std::copy(tree.builder.box.begin(), tree.builder.box.end(), out_box);
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t right = tree.builder.node[3 * r];
        *out_node++ = right < 0 ? right : right + row;
        *out_node++ = tree.builder.node[3 * r + 1];
        *out_node++ = tree.builder.node[3 * r + 2];
      }
      row += rows;
    }
  });
  return {box, node, prim, root};
}

}  // namespace contactnet

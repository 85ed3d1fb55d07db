// The body-level IPC candidate search (ipc_body_broad_phase.h), on either device; its trees are
// built on the host (ipc_body_trees.h).
//
// ipc_body_candidates(vertices_t0 (V, 3), vertices_t1 (V, 3) or None, faces, edges,
//                     vertex_body (V,) int64 or None, q_t0 (nb, 12), q_t1 (nb, 12) or None,
//                     body_pairs (P, 2) int64, box, node, prim, root, reach)
//   -> fv (Nfv, 2) int64 [vertex, face], ee (Nee, 2) int64 [edge_a < edge_b], stats (4,) int64.
//      Without vertices_t1: the pairs of ipc_collision_candidates(vertices_t0, ..., vertex_body,
//      dhat = reach) that join body a and body b of a listed pair; with it, those of
//      ipc_swept_candidates(..., min_distance = reach). Same boxes, same filter, so the same pairs,
//      in the order of body_pairs (deterministic), not sorted. Their counts are read on the host
//      (a sync on a device).
//      q: each body's affine map (p, A row-major), and the vertices must be its positions
//      x = A x0 + p of the rest vertices the trees were built from, to rounding (the node boxes
//      carry 64 ulps of slack); a constant shift of a body's vertices must be in its p too.
//      stats: BodySearchStat counters (body pairs tested, near, node pairs, primitive pairs).
//      With prune, only the pairs that may come within reach on the motion (the test of
//      ipc_prune_candidates, applied to each pair as it is found): the search then pruning, in
//      one pass.
// ipc_body_candidates_padded(same, capacity)
//   -> fv (capacity, 2), ee (capacity, 2), counts (2,), stats (4,): the same pairs in fixed-size
//      lists, as ipc_collision_candidates_padded returns them (the first `capacity` of each kind,
//      -1 rows after them; counts = pairs found). No shape depends on the data and nothing is
//      read on the host, so the stepper's fixed-shape mode can run it in a CUDA graph.
//
// Both: one thread per part of an item (item · 2^kBodySplitDepth + sub), two passes: count, then
// write at the exclusive scan of the counts. A host launcher keeps the first pass's pairs and
// copies them (one traversal); a device traverses again.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <tuple>
#include <type_traits>
#include <vector>

#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/full.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>

#include "common/checks.h"
#include "common/macros.h"
#include "ipc/ipc.h"
#include "ipc/ipc_body_broad_phase.h"

namespace contactnet {

inline void check_body_trees(const at::Tensor& vertices, const at::Tensor& faces,
                             const at::Tensor& edges, const at::Tensor& box, const at::Tensor& node,
                             const at::Tensor& prim, const at::Tensor& root) {
  check_float_input(box, "box", {-1, 6});
  check_same_device_dtype(vertices, "vertices_t0", box, "box");
  check_input(node, "node", {box.size(0), 3});
  check_input(prim, "prim", {vertices.size(0) + faces.size(0) + edges.size(0)});
  check_input(root, "root", {-1, 3});
  for (const at::Tensor* t : {&node, &prim, &root}) {
    TORCH_CHECK(t->scalar_type() == at::kLong, "body trees: expected int64 node, prim and root");
    check_same_device(*t, "body trees", vertices, "vertices_t0");
  }
}

// The arguments of a body-level search. Index values are not re-read here (that would cost a
// pass over the whole scene, which this search exists to avoid): faces and edges are the ones the
// trees were built from (checked there; `prim` must match their sizes), body pairs are checked
// against the trees.
inline void check_body_search(const at::Tensor& v0, const std::optional<at::Tensor>& v1,
                              const at::Tensor& faces, const at::Tensor& edges,
                              const std::optional<at::Tensor>& vertex_body, const at::Tensor& q0,
                              const std::optional<at::Tensor>& q1, const at::Tensor& body_pairs,
                              const at::Tensor& box, const at::Tensor& node,
                              const at::Tensor& prim, const at::Tensor& root, double reach) {
  check_vertices(v0, "vertices_t0");
  check_input(faces, "faces", {-1, 3});
  check_input(edges, "edges", {-1, 2});
  TORCH_CHECK(faces.scalar_type() == at::kLong && edges.scalar_type() == at::kLong,
              "faces, edges: expected int64");
  check_same_device(faces, "faces", v0, "vertices_t0");
  check_same_device(edges, "edges", v0, "vertices_t0");
  check_body_trees(v0, faces, edges, box, node, prim, root);
  const int64_t nb = root.size(0);
  check_float_input(q0, "q_t0", {nb, 12});
  check_same_device_dtype(v0, "vertices_t0", q0, "q_t0");
  if (v1.has_value()) {
    check_vertices(*v1, "vertices_t1");
    check_same_device_dtype(v0, "vertices_t0", *v1, "vertices_t1");
    check_same_batch(v0, "vertices_t0", *v1, "vertices_t1");
    TORCH_CHECK(q1.has_value(), "q_t1: expected with vertices_t1 (a swept search)");
  }
  if (q1.has_value()) {
    TORCH_CHECK(v1.has_value(), "vertices_t1: expected with q_t1 (a swept search)");
    check_float_input(*q1, "q_t1", {nb, 12});
    check_same_device_dtype(v0, "vertices_t0", *q1, "q_t1");
  }
  if (vertex_body.has_value()) {
    check_input(*vertex_body, "vertex_body", {v0.size(0)});
    TORCH_CHECK(vertex_body->scalar_type() == at::kLong, "vertex_body: expected int64");
    check_same_device(*vertex_body, "vertex_body", v0, "vertices_t0");
  }
  check_index_input(body_pairs, "body_pairs", {-1, 2}, nb);
  check_same_device(body_pairs, "body_pairs", v0, "vertices_t0");
  TORCH_CHECK(reach > 0 || (v1.has_value() && reach >= 0), "reach: expected > 0 (>= 0 swept), got ",
              reach);
}

// The traversal of a checked search, with the filters of ipc_collision_candidates (dhat2 =
// reach²) / ipc_swept_candidates (none), and with prune the test of ipc_prune_candidates at
// reach on the motion (swept; at v0 it adds nothing to dhat2's).
template <typename T>
BodyPairTraversal<T> body_traversal(const at::Tensor& v0, const std::optional<at::Tensor>& v1,
                                    const at::Tensor& faces, const at::Tensor& edges,
                                    const std::optional<at::Tensor>& vertex_body,
                                    const at::Tensor& q0, const std::optional<at::Tensor>& q1,
                                    const at::Tensor& body_pairs, const at::Tensor& box,
                                    const at::Tensor& node, const at::Tensor& prim,
                                    const at::Tensor& root, double reach, bool prune) {
  BodyPairTraversal<T> t{};
  const int64_t* body = vertex_body.has_value() ? vertex_body->data_ptr<int64_t>() : nullptr;
  const T dhat2 = v1.has_value() ? T(-1.0) : T(reach * reach);
  t.fv_filter = CandidatePairFilter<T>{false, v0.data_ptr<T>(), faces.data_ptr<int64_t>(),
                                       edges.data_ptr<int64_t>(), body, dhat2};
  if (prune && v1.has_value()) {
    t.fv_filter.vertices1 = v1->data_ptr<T>();
    t.fv_filter.prune_reach = T(reach);
    t.fv_filter.prune_reach2 = T(reach * reach);
  }
  t.ee_filter = t.fv_filter;
  t.ee_filter.self = true;
  t.v0 = v0.data_ptr<T>();
  t.v1 = v1.has_value() ? v1->data_ptr<T>() : nullptr;
  t.faces = faces.data_ptr<int64_t>();
  t.edges = edges.data_ptr<int64_t>();
  t.q0 = q0.data_ptr<T>();
  t.q1 = q1.has_value() ? q1->data_ptr<T>() : nullptr;
  t.pairs = body_pairs.data_ptr<int64_t>();
  t.box = box.data_ptr<T>();
  t.node = node.data_ptr<int64_t>();
  t.prim = prim.data_ptr<int64_t>();
  t.root = root.data_ptr<int64_t>();
  t.inflate = T(0.5 * reach);
  return t;
}

constexpr int64_t kBodyParts = int64_t(1) << kBodySplitDepth;  // threads per item

// Thread j = item · kBodyParts + sub: part `sub` of item's traversal (nothing where the item is far
// or its tree a is not split that deep). Pass 1 (count != null) counts its pairs and cost counters;
// pass 2 writes its pairs at offset[j] of its kind's list (rows < capacity). The lists are in
// (item, sub) order: body_pairs' order, the same at any thread count.
template <typename T>
struct BodyPartFunctor {
  BodyPairTraversal<T> t;
  int64_t* count;        // pass 1: (threads,)
  int64_t* stats;        // pass 1: (threads, kBodySearchStats)
  const int64_t* offset;  // pass 2: (threads,)
  int64_t* fv;           // pass 2: (capacity, 2)
  int64_t* ee;
  int64_t capacity;

  // Part j's pairs to sink, its cost counters to s (zeroed here).
  template <typename Sink>
  CN_HD void visit(int64_t j, Sink& sink, int64_t* s) const {
    const int64_t item = j / kBodyParts, sub = j % kBodyParts;
    int64_t unused[kBodySearchStats];
    for (int k = 0; k < kBodySearchStats; ++k) s[k] = unused[k] = 0;
    int64_t ra, rb, a, b;
    // The body pair's box test counts once, in its first part.
    const bool near = t.item_roots(item, sub == 0 ? s : unused, ra, rb, a, b);
    if (near && sub < (int64_t(1) << t.split_depth(ra)))
      t.visit_part(item, sub, ra, rb, a, b, sink, s);
  }

  CN_HD void operator()(int64_t j) const {
    int64_t scratch[kBodySearchStats];
    typename SweepFunctor<T>::CappedWrite sink{
        count ? nullptr : ((j / kBodyParts) % 3 == 2 ? ee : fv), count ? 0 : offset[j], capacity, 0};
    visit(j, sink, count ? stats + kBodySearchStats * j : scratch);
    if (count) count[j] = sink.n;
  }
};

// Whether a launcher keeps each part's pairs from the counting pass and copies them to their rows
// (a host launcher: one traversal) instead of traversing again to write them (a device's).
CN_LAUNCHER_FLAG_TRAIT(launcher_records_pairs, kRecordsPairs);

// A host sink: the pairs appended to a vector (also the CPU grid launcher's, ipc_cpu.cpp).
struct HostPairs {
  std::vector<int64_t>* pairs;
  void operator()(int64_t a, int64_t b) {
    pairs->push_back(a);
    pairs->push_back(b);
  }
};

template <typename Launch>
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> ipc_body_candidates_padded_impl(
    const at::Tensor& v0, const std::optional<at::Tensor>& v1, const at::Tensor& faces,
    const at::Tensor& edges, const std::optional<at::Tensor>& vertex_body, const at::Tensor& q0,
    const std::optional<at::Tensor>& q1, const at::Tensor& body_pairs, const at::Tensor& box,
    const at::Tensor& node, const at::Tensor& prim, const at::Tensor& root, double reach,
    int64_t capacity, bool prune, const Launch& launch) {
  check_body_search(v0, v1, faces, edges, vertex_body, q0, q1, body_pairs, box, node, prim, root,
                    reach);
  // capacity -1: lists of exactly the pairs found (ipc_body_candidates).
  const auto lopt = faces.options();
  const int64_t threads = 3 * body_pairs.size(0) * kBodyParts;
  at::Tensor fv, ee;
  int64_t rows_fv = capacity, rows_ee = capacity;  // the lists' rows
  at::Tensor count = at::zeros({threads}, lopt);
  at::Tensor stats = at::zeros({threads, kBodySearchStats}, lopt);
  // Per kind, each thread's first row: the exclusive running count of its kind's threads.
  const at::Tensor is_ee = at::arange(threads, lopt).div(kBodyParts, "floor").remainder(3).eq(2);
  at::Tensor counts;
  AT_DISPATCH_FLOATING_TYPES(v0.scalar_type(), "ipc_body_candidates_padded", [&] {
    BodyPartFunctor<scalar_t> f{body_traversal<scalar_t>(v0, v1, faces, edges, vertex_body, q0, q1,
                                                         body_pairs, box, node, prim, root, reach,
                                                         prune),
                                count.data_ptr<int64_t>(), stats.data_ptr<int64_t>(), nullptr,
                                nullptr, nullptr, capacity};
    constexpr bool records = launcher_records_pairs<Launch>::value;
    std::vector<std::vector<int64_t>> found(records ? threads : 0);  // each part's pairs
    if constexpr (records) {
      int64_t* n = count.data_ptr<int64_t>();
      int64_t* s = stats.data_ptr<int64_t>();
      launch(v0, threads, [&](int64_t j) {
        HostPairs sink{&found[j]};
        f.visit(j, sink, s + kBodySearchStats * j);
        n[j] = static_cast<int64_t>(found[j].size()) / 2;
      });
    } else {
      launch(v0, threads, f);
    }
    const at::Tensor n_ee = at::where(is_ee, count, 0), n_fv = count.sub(n_ee);
    const at::Tensor offset =
        at::where(is_ee, n_ee.cumsum(0).sub(n_ee), n_fv.cumsum(0).sub(n_fv)).contiguous();
    counts = at::stack({n_fv.sum(), n_ee.sum()});
    if (capacity < 0) {
      const at::Tensor found = counts.cpu();
      rows_fv = found.data_ptr<int64_t>()[0];
      rows_ee = found.data_ptr<int64_t>()[1];
      f.capacity = std::max(rows_fv, rows_ee);
    }
    fv = at::full({f.capacity, 2}, -1, lopt);
    ee = at::full({f.capacity, 2}, -1, lopt);
    f.count = f.stats = nullptr;
    f.offset = offset.data_ptr<int64_t>();
    f.fv = fv.data_ptr<int64_t>();
    f.ee = ee.data_ptr<int64_t>();
    if constexpr (records) {
      launch(v0, threads, [&](int64_t j) {
        const int64_t room = std::max<int64_t>(f.capacity - f.offset[j], 0);
        const int64_t rows = std::min<int64_t>(static_cast<int64_t>(found[j].size()) / 2, room);
        int64_t* out = (j / kBodyParts) % 3 == 2 ? f.ee : f.fv;
        std::copy_n(found[j].begin(), 2 * rows, out + 2 * f.offset[j]);
      });
    } else {
      launch(v0, threads, f);
    }
  });
  return {fv.narrow(0, 0, rows_fv), ee.narrow(0, 0, rows_ee), counts, stats.sum(0)};
}

}  // namespace contactnet

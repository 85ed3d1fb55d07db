// IPC collision candidates of a packed mesh: host drivers of the two broad phases of
// ipc_broad_phase.h (boxes, grid or sort-and-sweep, the exact pair filter).
//
// ipc_collision_candidates(vertices (V, 3), faces (F, 3) int64, edges (E, 2) int64,
//                          vertex_body (V,) int64 or None, dhat)
//   -> fv (Nfv, 2) int64 [vertex, face], ee (Nee, 2) int64 [edge_a < edge_b]: every face–vertex and
//      edge–edge pair with squared distance < dhat², excluding pairs that share a vertex and, when
//      vertex_body is given, pairs within one body (a primitive belongs to its first vertex's body).
// ipc_swept_candidates(vertices_t0, vertices_t1, faces, edges, vertex_body, min_distance)
//   -> fv, ee: pairs whose boxes around both positions, grown by min_distance / 2, overlap.
//   Both search a uniform grid of primitive boxes (GridFunctor).
//
// Fixed-capacity variants, for stepping without host syncs (a CUDA graph can capture them): the
// same pairs (same boxes, same CandidatePairFilter), found by a sort-and-sweep (SweepFunctor),
// whose memory is fixed by the input sizes (the grid is sized from values read on the host),
// into pair lists of a fixed number of rows.
// ipc_collision_candidates_padded(vertices (V, 3), faces (F, 3) int64, edges (E, 2) int64,
//                                 vertex_body (V,) int64 or None, dhat, capacity,
//                                 vertex_active (V,) bool or None, face_active (F,) bool or None,
//                                 edge_active (E,) bool or None)
//   -> fv (capacity, 2) int64, ee (capacity, 2) int64, counts (2,) int64.
//      The pairs of ipc_collision_candidates (in sweep order, not sorted), the first `capacity` of
//      each kind; rows beyond them are -1 (padding, which every IPC op treats as no candidate).
//      counts = the number of face–vertex and edge–edge pairs found, which exceeds `capacity` when
//      some were dropped: check it. Inactive primitives (mask false) take part in no pair.
// ipc_swept_candidates_padded(vertices_t0, vertices_t1, faces, edges, vertex_body, min_distance,
//                             capacity, vertex_active, face_active, edge_active)
//   -> fv, ee, counts: the same for the swept boxes of ipc_swept_candidates.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <tuple>
#include <type_traits>

#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>

#include "common/macros.h"
#include "ipc/ipc.h"
#include "ipc/ipc_broad_phase.h"

namespace contactnet {

// Whether a launcher offers collect_pairs(functor, items, options) -> (total, 2) int64: the pairs
// that functor.visit(i, sink) reports for i in [0, items), in item order.
CN_LAUNCHER_FLAG_TRAIT(launcher_collects_pairs, kCollectsPairs);

// Boxes (n, 6) [lo, hi] of every vertex, face and edge, grown by `inflate`; with p1 (the
// positions at t1) each box also covers the primitive's straight-line sweep from t0.
template <typename T, typename Launch>
std::tuple<at::Tensor, at::Tensor, at::Tensor> primitive_boxes(const at::Tensor& v0, const T* p1,
                                                               const at::Tensor& faces,
                                                               const at::Tensor& edges,
                                                               double inflate, const Launch& launch) {
  const T* p0 = v0.data_ptr<T>();
  const auto fopt = v0.options();
  at::Tensor vbox = at::empty({v0.size(0), 6}, fopt), fbox = at::empty({faces.size(0), 6}, fopt),
             ebox = at::empty({edges.size(0), 6}, fopt);
  launch(v0, v0.size(0),
         PrimitiveBoxFunctor<T>{p0, p1, nullptr, 1, T(inflate), vbox.data_ptr<T>()});
  launch(v0, faces.size(0),
         PrimitiveBoxFunctor<T>{p0, p1, faces.data_ptr<int64_t>(), 3, T(inflate),
                                fbox.data_ptr<T>()});
  launch(v0, edges.size(0),
         PrimitiveBoxFunctor<T>{p0, p1, edges.data_ptr<int64_t>(), 2, T(inflate),
                                ebox.data_ptr<T>()});
  return {vbox, fbox, ebox};
}

// ---- uniform grid: variable-size lists ------------------------------------------------------

// Broad phase on a uniform grid (see GridFunctor): boxes of vertices, faces and edges; faces and
// edges entered in the cells they overlap, sorted by cell; vertices query the face grid and edges
// the edge grid; then count / exclusive-scan / fill passes (or one collecting pass on the host).
// dhat2 > 0 adds the exact squared-distance filter.
template <typename Launch>
std::tuple<at::Tensor, at::Tensor> ipc_candidates_grid_impl(
    const at::Tensor& v0, const at::Tensor* v1, const at::Tensor& faces, const at::Tensor& edges,
    const std::optional<at::Tensor>& vertex_body, double inflate, double dhat2,
    const Launch& launch) {
  const int64_t V = v0.size(0), F = faces.size(0), E = edges.size(0);
  const auto lopt = faces.options().dtype(at::kLong);
  at::Tensor fv, ee;
  AT_DISPATCH_FLOATING_TYPES(v0.scalar_type(), "ipc_candidates", [&] {
    using T = scalar_t;
    const T* p0 = v0.data_ptr<T>();
    at::Tensor vbox, fbox, ebox;
    std::tie(vbox, fbox, ebox) =
        primitive_boxes<T>(v0, v1 ? v1->data_ptr<T>() : nullptr, faces, edges, inflate, launch);

    // Grid over all boxes. Cell size: the mean largest extent of the gridded boxes, so a typical
    // box covers a few cells; doubled while a few huge boxes (a ground plane, a long sweep) would
    // make the entries outnumber the boxes by far.
    double lo[3] = {0, 0, 0}, span[3] = {0, 0, 0}, cell = 1.0;
    at::Tensor all = at::cat({vbox, fbox, ebox});
    if (all.size(0) > 0) {
      at::Tensor lo_t = std::get<0>(all.slice(1, 0, 3).min(0)).to(at::kDouble).cpu();
      at::Tensor hi_t = std::get<0>(all.slice(1, 3, 6).max(0)).to(at::kDouble).cpu();
      for (int c = 0; c < 3; ++c) {
        lo[c] = lo_t[c].template item<double>();
        span[c] = hi_t[c].template item<double>() - lo[c];
      }
    }
    const double max_span = std::max({span[0], span[1], span[2]});
    TORCH_CHECK(std::isfinite(max_span), "vertices: expected finite coordinates");
    if (F + E > 0) {
      at::Tensor gb = at::cat({fbox, ebox});
      cell = gb.slice(1, 3, 6).sub(gb.slice(1, 0, 3)).amax(1).mean().template item<double>();
    }
    // At most 2^20 cells per axis (linear ids stay far from overflow); never 0 or NaN.
    cell = std::max({cell, max_span / double(1 << 20), 1e-30});
    UniformGrid<T> grid{};
    at::Tensor fcount = at::empty({F}, lopt), ecount = at::empty({E}, lopt);
    for (;;) {
      for (int c = 0; c < 3; ++c) {
        grid.origin[c] = T(lo[c]);
        grid.dims[c] = static_cast<int64_t>(span[c] / cell) + 1;
      }
      grid.inv_cell = T(1.0 / cell);
      launch(v0, F,
             GridEntryFunctor<T>{grid, fbox.data_ptr<T>(), nullptr, fcount.data_ptr<int64_t>(),
                                 nullptr, nullptr});
      launch(v0, E,
             GridEntryFunctor<T>{grid, ebox.data_ptr<T>(), nullptr, ecount.data_ptr<int64_t>(),
                                 nullptr, nullptr});
      const int64_t entries = (F ? fcount.sum().template item<int64_t>() : 0) +
                              (E ? ecount.sum().template item<int64_t>() : 0);
      if (entries <= 16 * (F + E) + 4096 || cell >= max_span) break;
      cell *= 2;
    }
    // (cell, box) entries of one gridded set, sorted by cell (stable: by box within a cell).
    auto grid_entries = [&](const at::Tensor& box, const at::Tensor& count, int64_t n,
                            at::Tensor& keys, at::Tensor& items) {
      at::Tensor offset = count.cumsum(0).sub(count).contiguous();
      const int64_t total = n > 0 ? count.sum().template item<int64_t>() : 0;
      at::Tensor k = at::empty({total}, lopt), it = at::empty({total}, lopt);
      launch(v0, n,
             GridEntryFunctor<T>{grid, box.data_ptr<T>(), offset.data_ptr<int64_t>(), nullptr,
                                 k.data_ptr<int64_t>(), it.data_ptr<int64_t>()});
      auto sorted = k.sort(/*stable=*/true, /*dim=*/0, /*descending=*/false);
      keys = std::get<0>(sorted).contiguous();
      items = it.index_select(0, std::get<1>(sorted)).contiguous();
    };
    at::Tensor fkeys, fitems, ekeys, eitems;
    grid_entries(fbox, fcount, F, fkeys, fitems);
    grid_entries(ebox, ecount, E, ekeys, eitems);

    auto run = [&](GridFunctor<T> f, int64_t items) {
      // A host launcher collects each task's pairs in one pass (the narrow-phase distance is
      // evaluated once); a device runs count, scan and fill.
      if constexpr (launcher_collects_pairs<Launch>::value)
        return launch.collect_pairs(f, items, lopt);
      at::Tensor count = at::empty({items}, lopt);
      f.count = count.data_ptr<int64_t>();
      f.out = nullptr;
      f.offset = nullptr;
      launch(v0, items, f);
      at::Tensor offset = count.cumsum(0).sub(count).contiguous();
      const int64_t total = items > 0 ? count.sum().template item<int64_t>() : 0;
      at::Tensor pairs = at::empty({total, 2}, lopt);
      f.count = nullptr;
      f.offset = offset.data_ptr<int64_t>();
      f.out = pairs.data_ptr<int64_t>();
      launch(v0, items, f);
      return pairs;
    };
    GridFunctor<T> g{};
    const int64_t* body = vertex_body.has_value() ? vertex_body->data_ptr<int64_t>() : nullptr;
    g.filter = CandidatePairFilter<T>{false, p0, faces.data_ptr<int64_t>(),
                                      edges.data_ptr<int64_t>(), body, T(dhat2)};
    g.grid = grid;
    g.box_a = vbox.data_ptr<T>();
    g.box_b = fbox.data_ptr<T>();
    g.keys = fkeys.data_ptr<int64_t>();
    g.items = fitems.data_ptr<int64_t>();
    g.m = fkeys.size(0);
    fv = run(g, V);
    g.filter.self = true;
    g.box_a = ebox.data_ptr<T>();
    g.box_b = ebox.data_ptr<T>();
    g.keys = ekeys.data_ptr<int64_t>();
    g.items = eitems.data_ptr<int64_t>();
    g.m = ekeys.size(0);
    ee = run(g, E);
  });
  return {fv, ee};
}

template <typename Launch>
std::tuple<at::Tensor, at::Tensor> ipc_collision_candidates_impl(
    const at::Tensor& vertices, const at::Tensor& faces, const at::Tensor& edges,
    const std::optional<at::Tensor>& vertex_body, double dhat, const Launch& launch) {
  check_vertices(vertices, "vertices");
  check_mesh(vertices, faces, edges, vertex_body);
  TORCH_CHECK(dhat > 0, "dhat: expected > 0, got ", dhat);
  return ipc_candidates_grid_impl(vertices, nullptr, faces, edges, vertex_body, 0.5 * dhat,
                                  dhat * dhat, launch);
}

template <typename Launch>
std::tuple<at::Tensor, at::Tensor> ipc_swept_candidates_impl(
    const at::Tensor& v0, const at::Tensor& v1, const at::Tensor& faces, const at::Tensor& edges,
    const std::optional<at::Tensor>& vertex_body, double min_distance, const Launch& launch) {
  check_vertices(v0, "vertices_t0");
  check_vertices(v1, "vertices_t1");
  check_same_device_dtype(v0, "vertices_t0", v1, "vertices_t1");
  check_same_batch(v0, "vertices_t0", v1, "vertices_t1");
  check_mesh(v0, faces, edges, vertex_body);
  TORCH_CHECK(min_distance >= 0, "min_distance: expected >= 0, got ", min_distance);
  return ipc_candidates_grid_impl(v0, &v1, faces, edges, vertex_body, 0.5 * min_distance, -1.0,
                                  launch);
}

// ---- sort-and-sweep: fixed-capacity lists --------------------------------------------------

// Boxes sorted by their lower bound along column 0: sorted boxes, keys and original ids.
inline void sort_boxes_by_lo(const at::Tensor& box, at::Tensor& sorted, at::Tensor& key,
                             at::Tensor& order) {
  auto sk = box.select(1, 0).sort();
  key = std::get<0>(sk).contiguous();
  order = std::get<1>(sk).contiguous();
  sorted = box.index_select(0, order).contiguous();
}

inline void check_active(const std::optional<at::Tensor>& mask, const char* name, int64_t n,
                         const at::Tensor& like) {
  if (!mask.has_value()) return;
  check_bool_input(*mask, name, {n});
  check_same_device(*mask, name, like, "vertices");
}

// Inactive rows of `box` (n, 6) become the empty box (lo = +inf, hi = -inf): it sorts last and
// overlaps nothing, so the sweep never visits it.
inline at::Tensor mask_boxes(const at::Tensor& box, const std::optional<at::Tensor>& active) {
  if (!active.has_value()) return box;
  const double inf = std::numeric_limits<double>::infinity();
  at::Tensor empty = at::full({6}, inf, box.options());
  empty.narrow(0, 3, 3).fill_(-inf);
  return at::where(active->unsqueeze(1), box, empty).contiguous();
}

// Broad phase by sort-and-sweep (see SweepFunctor) along the axis where the vertices spread most:
// boxes of vertices, faces and edges (inactive ones emptied), sorted by their lower bound; then
// count / exclusive-scan / fill passes writing the first `capacity` pairs of each kind.
template <typename Launch>
std::tuple<at::Tensor, at::Tensor, at::Tensor> ipc_candidates_sweep_impl(
    const at::Tensor& v0, const at::Tensor* v1, const at::Tensor& faces, const at::Tensor& edges,
    const std::optional<at::Tensor>& vertex_body, const std::optional<at::Tensor>& vertex_active,
    const std::optional<at::Tensor>& face_active, const std::optional<at::Tensor>& edge_active,
    double inflate, double dhat2, int64_t capacity, const Launch& launch) {
  const int64_t V = v0.size(0), F = faces.size(0), E = edges.size(0);
  TORCH_CHECK(capacity >= 0, "capacity: expected >= 0, got ", capacity);
  check_active(vertex_active, "vertex_active", V, v0);
  check_active(face_active, "face_active", F, v0);
  check_active(edge_active, "edge_active", E, v0);
  const auto lopt = faces.options().dtype(at::kLong);
  at::Tensor fv = at::full({capacity, 2}, -1, lopt), ee = at::full({capacity, 2}, -1, lopt);
  at::Tensor counts = at::zeros({2}, lopt);
  AT_DISPATCH_FLOATING_TYPES(v0.scalar_type(), "ipc_candidates_padded", [&] {
    using T = scalar_t;
    const T* p0 = v0.data_ptr<T>();
    at::Tensor vbox, fbox, ebox;
    std::tie(vbox, fbox, ebox) =
        primitive_boxes<T>(v0, v1 ? v1->data_ptr<T>() : nullptr, faces, edges, inflate, launch);
    vbox = mask_boxes(vbox, vertex_active);
    fbox = mask_boxes(fbox, face_active);
    ebox = mask_boxes(ebox, edge_active);
    // Sweep along the axis where the vertices spread most, chosen on the device: the box columns
    // are rotated so that axis comes first (overlap tests do not depend on the column order).
    if (V > 0) {
      at::Tensor extent = std::get<0>(v0.max(0)).sub(std::get<0>(v0.min(0)));
      at::Tensor cols = extent.argmax().add(at::arange(3, lopt)).remainder(3);
      at::Tensor perm = at::cat({cols, cols.add(3)});
      vbox = vbox.index_select(1, perm);
      fbox = fbox.index_select(1, perm);
      ebox = ebox.index_select(1, perm);
    }
    at::Tensor sv, kv, iv, sf, kf, i_f, se, ke, ie;
    sort_boxes_by_lo(vbox, sv, kv, iv);
    sort_boxes_by_lo(fbox, sf, kf, i_f);
    sort_boxes_by_lo(ebox, se, ke, ie);

    auto run = [&](SweepFunctor<T> f, int64_t items, at::Tensor& pairs, int64_t which) {
      at::Tensor count = at::empty({items}, lopt);
      f.count = count.data_ptr<int64_t>();
      launch(v0, items, f);
      at::Tensor offset = count.cumsum(0).sub(count).contiguous();
      counts.narrow(0, which, 1).copy_(count.sum().reshape({1}));
      f.count = nullptr;
      f.offset = offset.data_ptr<int64_t>();
      f.out = pairs.data_ptr<int64_t>();
      f.capacity = capacity;
      launch(v0, items, f);
    };
    SweepFunctor<T> base{};
    base.filter.vertices = p0;
    base.filter.faces = faces.data_ptr<int64_t>();
    base.filter.edges = edges.data_ptr<int64_t>();
    base.filter.body = vertex_body.has_value() ? vertex_body->data_ptr<int64_t>() : nullptr;
    base.filter.dhat2 = T(dhat2);

    SweepFunctor<T> fvs = base;
    fvs.filter.self = false;
    fvs.box_a = sv.data_ptr<T>();
    fvs.key_a = kv.data_ptr<T>();
    fvs.id_a = iv.data_ptr<int64_t>();
    fvs.na = V;
    fvs.box_b = sf.data_ptr<T>();
    fvs.key_b = kf.data_ptr<T>();
    fvs.id_b = i_f.data_ptr<int64_t>();
    fvs.nb = F;
    run(fvs, V + F, fv, 0);

    SweepFunctor<T> ees = base;
    ees.filter.self = true;
    ees.box_a = se.data_ptr<T>();
    ees.key_a = ke.data_ptr<T>();
    ees.id_a = ie.data_ptr<int64_t>();
    ees.na = E;
    run(ees, E, ee, 1);
  });
  return {fv, ee, counts};
}

template <typename Launch>
std::tuple<at::Tensor, at::Tensor, at::Tensor> ipc_collision_candidates_padded_impl(
    const at::Tensor& vertices, const at::Tensor& faces, const at::Tensor& edges,
    const std::optional<at::Tensor>& vertex_body, double dhat, int64_t capacity,
    const std::optional<at::Tensor>& vertex_active, const std::optional<at::Tensor>& face_active,
    const std::optional<at::Tensor>& edge_active, const Launch& launch) {
  check_vertices(vertices, "vertices");
  check_mesh(vertices, faces, edges, vertex_body);
  TORCH_CHECK(dhat > 0, "dhat: expected > 0, got ", dhat);
  return ipc_candidates_sweep_impl(vertices, nullptr, faces, edges, vertex_body, vertex_active,
                                    face_active, edge_active, 0.5 * dhat, dhat * dhat, capacity,
                                    launch);
}

template <typename Launch>
std::tuple<at::Tensor, at::Tensor, at::Tensor> ipc_swept_candidates_padded_impl(
    const at::Tensor& v0, const at::Tensor& v1, const at::Tensor& faces, const at::Tensor& edges,
    const std::optional<at::Tensor>& vertex_body, double min_distance, int64_t capacity,
    const std::optional<at::Tensor>& vertex_active, const std::optional<at::Tensor>& face_active,
    const std::optional<at::Tensor>& edge_active, const Launch& launch) {
  check_vertices(v0, "vertices_t0");
  check_vertices(v1, "vertices_t1");
  check_same_device_dtype(v0, "vertices_t0", v1, "vertices_t1");
  check_same_batch(v0, "vertices_t0", v1, "vertices_t1");
  check_mesh(v0, faces, edges, vertex_body);
  TORCH_CHECK(min_distance >= 0, "min_distance: expected >= 0, got ", min_distance);
  return ipc_candidates_sweep_impl(v0, &v1, faces, edges, vertex_body, vertex_active,
                                    face_active, edge_active, 0.5 * min_distance, -1.0, capacity,
                                    launch);
}

}  // namespace contactnet

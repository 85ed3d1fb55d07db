// Fixed-capacity variants of the IPC broad phases, for stepping without host syncs (a CUDA graph
// can capture them): the same sort-and-sweep as ipc_collision_candidates / ipc_swept_candidates,
// but the pair lists have a fixed number of rows and nothing is read back to the host.
//
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

#include <limits>
#include <optional>
#include <tuple>

#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/full.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>

#include "ipc/ipc.h"

namespace contactnet {

inline void check_active(const std::optional<at::Tensor>& mask, const char* name, int64_t n,
                         const at::Tensor& like) {
  if (!mask.has_value()) return;
  check_input(*mask, name, {n});
  TORCH_CHECK(mask->scalar_type() == at::kBool, name, ": expected bool, got ", mask->scalar_type());
  TORCH_CHECK(mask->device() == like.device(), name, " must be on the vertices' device");
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

template <typename Launch>
std::tuple<at::Tensor, at::Tensor, at::Tensor> ipc_candidates_padded_impl(
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
    const T* p1 = v1 ? v1->data_ptr<T>() : nullptr;
    const auto fopt = v0.options();
    at::Tensor vbox = at::empty({V, 6}, fopt), fbox = at::empty({F, 6}, fopt),
               ebox = at::empty({E, 6}, fopt);
    launch(v0, V, PrimitiveBoxFunctor<T>{p0, p1, nullptr, 1, T(inflate), vbox.data_ptr<T>()});
    launch(v0, F,
           PrimitiveBoxFunctor<T>{p0, p1, faces.data_ptr<int64_t>(), 3, T(inflate),
                                  fbox.data_ptr<T>()});
    launch(v0, E,
           PrimitiveBoxFunctor<T>{p0, p1, edges.data_ptr<int64_t>(), 2, T(inflate),
                                  ebox.data_ptr<T>()});
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
    sort_boxes(vbox, 0, sv, kv, iv);
    sort_boxes(fbox, 0, sf, kf, i_f);
    sort_boxes(ebox, 0, se, ke, ie);

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
    base.axis = 0;
    base.vertices = p0;
    base.faces = faces.data_ptr<int64_t>();
    base.edges = edges.data_ptr<int64_t>();
    base.body = vertex_body.has_value() ? vertex_body->data_ptr<int64_t>() : nullptr;
    base.dhat2 = T(dhat2);

    SweepFunctor<T> fvs = base;
    fvs.self = false;
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
    ees.self = true;
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
  return ipc_candidates_padded_impl(vertices, nullptr, faces, edges, vertex_body, vertex_active,
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
  return ipc_candidates_padded_impl(v0, &v1, faces, edges, vertex_body, vertex_active,
                                    face_active, edge_active, 0.5 * min_distance, -1.0, capacity,
                                    launch);
}

}  // namespace contactnet

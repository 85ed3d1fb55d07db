// IPC barrier kernels: distances with derivatives, the barrier, collision candidates, the barrier
// potential with gradient and Hessian, and conservative CCD. float32 or float64, one device.
// "Distance" d² below is always the SQUARED distance; dhat is the (unsquared) activation distance.
//
// Distances (N independent primitives; vertices stacked in argument order, K = 3 × vertices):
//   ipc_point_point_distance(p, q)                      p, q: (N, 3)        -> (N,) squared distance
//   ipc_point_edge_distance(p, e0, e1)                  (N, 3) each
//   ipc_point_triangle_distance(p, t0, t1, t2)          (N, 3) each
//   ipc_edge_edge_distance(ea0, ea1, eb0, eb1)          (N, 3) each
//   ipc_edge_edge_mollifier(ea0, ea1, eb0, eb1, eps_x)  eps_x: (N,)         -> (N,) m(x)
//   ..._gradient(same arguments) -> (N, K);  ..._hessian(same arguments) -> (N, K, K)
//
// ipc_barrier(d2 (N,), dhat) -> value, first, second (N,) each: b(d², d̂²) and its derivatives
//   with respect to d² (+inf, -inf, +inf where d² ≤ 0).
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
// ipc_barrier_potential(vertices, rest_vertices, faces, edges, fv, ee, dhat, kappa)
//   -> (Nfv + Nee,) per-candidate energy κ m b(d², d̂²) (m: edge–edge mollifier, 1 for fv),
//      face–vertex candidates first. rest_vertices (V, 3) set the mollifier thresholds.
// ipc_barrier_potential_gradient(same) -> (N, 12) on the stencil (p, t0, t1, t2) / (ea0, ea1, eb0, eb1)
// ipc_barrier_potential_hessian(same, project_to_psd) -> (N, 12, 12)
//
// ipc_friction_potential(velocities, lagged_vertices, rest_vertices, faces, edges, fv, ee, dhat,
//                        kappa, mu, eps_v) -> (N,) per-candidate μ N f₀(‖u‖) (see common/friction.h);
//   _gradient -> (N, 12), _hessian -> (N, 12, 12) with respect to the velocities (PSD).
//
// ipc_assemble_hessian(local (N, 12, 12), stencils (N, 4) int64, num_vertices) -> indices (2, nnz)
//   int64, values (nnz,): the coalesced COO form of the (3V, 3V) sum of the blocks (CPU only; the
//   Python wrapper sums on other devices with torch ops). Implemented in ipc_cpu.cpp.
//
// ipc_ccd(vertices_t0, vertices_t1, faces, edges, fv, ee, min_distance, tmax,
//         conservative_rescaling, max_iterations) -> (N,) time of impact in [0, tmax] (tmax: none).
//
// Rows of -1 in fv / ee are padding (fixed-capacity lists, see ipc_padded.h): 0 energy, gradient
// and Hessian, toi = tmax.
#pragma once

#include <algorithm>
#include <cmath>
#include <optional>
#include <tuple>
#include <type_traits>

#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "common/checks.h"
#include "ipc/ipc_kernels.h"

namespace contactnet {

// Value checks read a tensor on the host: a sync, which a CUDA graph capture forbids, so they
// are skipped while the tensor's stream is capturing (the Python wrappers check outside it).
inline bool can_read_values(const at::Tensor& t) {
  if (t.is_cpu()) return true;
  const auto* impl = c10::impl::getDeviceGuardImpl(t.device().type());
  return !impl->isStreamCapturing(impl->getStream(t.device()));
}

inline void check_index_input(const at::Tensor& t, const char* name,
                              std::initializer_list<int64_t> shape, int64_t bound) {
  check_input(t, name, shape);
  TORCH_CHECK(t.scalar_type() == at::kLong, name, ": expected int64, got ", t.scalar_type());
  if (t.numel() > 0 && can_read_values(t)) {
    TORCH_CHECK(t.min().item<int64_t>() >= 0 && t.max().item<int64_t>() < bound, name,
                ": indices must lie in [0, ", bound, ")");
  }
}

inline void check_vertices(const at::Tensor& v, const char* name) {
  check_float_input(v, name, {-1, 3});
}

// ---- distances ------------------------------------------------------------------------------

template <typename Launch>
at::Tensor ipc_distance_impl(int kind, int order, const std::vector<at::Tensor>& xs,
                             const at::Tensor* eps_x, const Launch& launch) {
  static const char* names[4][4] = {{"p", "q", "", ""},
                                    {"p", "e0", "e1", ""},
                                    {"p", "t0", "t1", "t2"},
                                    {"ea0", "ea1", "eb0", "eb1"}};
  const int nv = ipc_kind_vertices(kind);
  const int row = kind == kIpcMollifier ? 3 : kind;
  for (int k = 0; k < nv; ++k) {
    check_float_input(xs[k], names[row][k], {-1, 3});
    check_same_device_dtype(xs[0], names[row][0], xs[k], names[row][k]);
    check_same_batch(xs[0], names[row][0], xs[k], names[row][k]);
  }
  if (eps_x) {
    check_float_input(*eps_x, "eps_x", {-1});
    check_same_device_dtype(xs[0], "ea0", *eps_x, "eps_x");
    check_same_batch(xs[0], "ea0", *eps_x, "eps_x");
  }
  const int64_t n = xs[0].size(0);
  const int64_t K = 3 * nv;
  const auto opt = xs[0].options();
  at::Tensor out = order == 0 ? at::empty({n}, opt)
                              : (order == 1 ? at::empty({n, K}, opt) : at::empty({n, K, K}, opt));
  AT_DISPATCH_FLOATING_TYPES(xs[0].scalar_type(), "ipc_distance", [&] {
    const scalar_t* p[4] = {nullptr, nullptr, nullptr, nullptr};
    for (int k = 0; k < nv; ++k) p[k] = xs[k].data_ptr<scalar_t>();
    launch(xs[0], n,
           IpcDistanceFunctor<scalar_t>{kind, order, p[0], p[1], p[2], p[3],
                                        eps_x ? eps_x->data_ptr<scalar_t>() : nullptr,
                                        out.data_ptr<scalar_t>()});
  });
  return out;
}

// ---- barrier --------------------------------------------------------------------------------

template <typename Launch>
std::tuple<at::Tensor, at::Tensor, at::Tensor> ipc_barrier_impl(const at::Tensor& d2, double dhat,
                                                                const Launch& launch) {
  check_float_input(d2, "d2", {-1});
  TORCH_CHECK(dhat > 0, "dhat: expected > 0, got ", dhat);
  const int64_t n = d2.size(0);
  at::Tensor out = at::empty({n, 3}, d2.options());
  AT_DISPATCH_FLOATING_TYPES(d2.scalar_type(), "ipc_barrier", [&] {
    launch(d2, n,
           BarrierFunctor<scalar_t>{d2.data_ptr<scalar_t>(), scalar_t(dhat * dhat),
                                    out.data_ptr<scalar_t>()});
  });
  return {out.select(1, 0).contiguous(), out.select(1, 1).contiguous(),
          out.select(1, 2).contiguous()};
}

// ---- candidates -----------------------------------------------------------------------------

inline void check_mesh(const at::Tensor& vertices, const at::Tensor& faces, const at::Tensor& edges,
                       const std::optional<at::Tensor>& vertex_body) {
  const int64_t V = vertices.size(0);
  check_index_input(faces, "faces", {-1, 3}, V);
  check_index_input(edges, "edges", {-1, 2}, V);
  TORCH_CHECK(faces.device() == vertices.device() && edges.device() == vertices.device(),
              "faces and edges must be on the vertices' device");
  if (vertex_body.has_value()) {
    check_input(*vertex_body, "vertex_body", {V});
    TORCH_CHECK(vertex_body->scalar_type() == at::kLong, "vertex_body: expected int64");
    TORCH_CHECK(vertex_body->device() == vertices.device(),
                "vertex_body must be on the vertices' device");
  }
}

// Whether a launcher offers collect_pairs(functor, items, options) -> (total, 2) int64: the pairs
// that functor.visit(i, sink) reports for i in [0, items), in item order.
template <typename L, typename = void>
struct launcher_collects_pairs : std::false_type {};
template <typename L>
struct launcher_collects_pairs<L, std::void_t<decltype(L::kCollectsPairs)>> : std::true_type {};

// Whether a launcher offers hessian_by_feature(functor, n) (see ipc_barrier_potential_impl).
template <typename L, typename = void>
struct launcher_shares_features : std::false_type {};
template <typename L>
struct launcher_shares_features<L, std::void_t<decltype(L::kSharesFeatures)>> : std::true_type {};

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

// Broad phase on a uniform grid (see GridFunctor): boxes of vertices, faces and edges; faces and
// edges entered in the cells they overlap, sorted by cell; vertices query the face grid and edges
// the edge grid; then count / exclusive-scan / fill passes (or one collecting pass on the host).
// dhat2 > 0 adds the exact squared-distance filter.
template <typename Launch>
std::tuple<at::Tensor, at::Tensor> ipc_candidates_impl(
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
  return ipc_candidates_impl(vertices, nullptr, faces, edges, vertex_body, 0.5 * dhat, dhat * dhat,
                             launch);
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
  return ipc_candidates_impl(v0, &v1, faces, edges, vertex_body, 0.5 * min_distance, -1.0, launch);
}

// ---- barrier potential ----------------------------------------------------------------------

inline void check_candidates(const at::Tensor& vertices, const at::Tensor& faces,
                             const at::Tensor& edges, const at::Tensor& fv, const at::Tensor& ee) {
  check_input(fv, "fv", {-1, 2});
  check_input(ee, "ee", {-1, 2});
  TORCH_CHECK(fv.scalar_type() == at::kLong && ee.scalar_type() == at::kLong,
              "fv, ee: expected int64 candidate tensors");
  // Rows of -1 are padding of fixed-capacity lists (see ipc_padded.h) and contribute nothing.
  if (fv.numel() > 0 && can_read_values(fv)) {
    TORCH_CHECK(fv.select(1, 0).min().item<int64_t>() >= -1 &&
                    fv.select(1, 0).max().item<int64_t>() < vertices.size(0),
                "fv: vertex indices out of range");
    TORCH_CHECK(fv.select(1, 1).min().item<int64_t>() >= -1 &&
                    fv.select(1, 1).max().item<int64_t>() < faces.size(0),
                "fv: face indices out of range");
  }
  if (ee.numel() > 0 && can_read_values(ee)) {
    TORCH_CHECK(ee.min().item<int64_t>() >= -1 && ee.max().item<int64_t>() < edges.size(0),
                "ee: edge indices out of range");
  }
}

template <typename Launch>
std::tuple<at::Tensor, at::Tensor, at::Tensor> ipc_barrier_potential_impl(
    const at::Tensor& vertices, const at::Tensor& rest, const at::Tensor& faces,
    const at::Tensor& edges, const at::Tensor& fv, const at::Tensor& ee, double dhat, double kappa,
    int order, bool project, const Launch& launch) {
  check_vertices(vertices, "vertices");
  check_vertices(rest, "rest_vertices");
  check_same_device_dtype(vertices, "vertices", rest, "rest_vertices");
  check_same_batch(vertices, "vertices", rest, "rest_vertices");
  check_mesh(vertices, faces, edges, std::nullopt);
  check_candidates(vertices, faces, edges, fv, ee);
  TORCH_CHECK(dhat > 0, "dhat: expected > 0, got ", dhat);
  TORCH_CHECK(kappa >= 0, "kappa: expected >= 0, got ", kappa);
  const int64_t nfv = fv.size(0), n = nfv + ee.size(0);
  const auto opt = vertices.options();
  at::Tensor energy = at::empty({n}, opt);
  at::Tensor grad = at::empty({order >= 1 ? n : 0, 12}, opt);
  at::Tensor hess = at::empty({order >= 2 ? n : 0, 12, 12}, opt);
  AT_DISPATCH_FLOATING_TYPES(vertices.scalar_type(), "ipc_barrier_potential", [&] {
    CandidateStencil st{faces.data_ptr<int64_t>(), edges.data_ptr<int64_t>(),
                        fv.data_ptr<int64_t>(), ee.data_ptr<int64_t>(), nfv};
    const BarrierPotentialFunctor<scalar_t> f{
        st, vertices.data_ptr<scalar_t>(), rest.data_ptr<scalar_t>(),
        scalar_t(dhat * dhat), scalar_t(kappa), order, project,
        energy.data_ptr<scalar_t>(), order >= 1 ? grad.data_ptr<scalar_t>() : nullptr,
        order >= 2 ? hess.data_ptr<scalar_t>() : nullptr, nullptr};
    // Projected Hessians (the only output of order 2): a host launcher may evaluate each shared
    // point–point / point–edge feature once (BarrierPotentialFunctor::feature_key).
    if constexpr (launcher_shares_features<Launch>::value) {
      if (order == 2 && project) {
        launch.hessian_by_feature(f, n);
        return;
      }
    }
    launch(vertices, n, f);
  });
  return {energy, grad, hess};
}

// ---- friction -------------------------------------------------------------------------------

template <typename Launch>
at::Tensor ipc_friction_impl(const at::Tensor& velocities, const at::Tensor& lagged,
                             const at::Tensor& rest, const at::Tensor& faces,
                             const at::Tensor& edges, const at::Tensor& fv, const at::Tensor& ee,
                             double dhat, double kappa, double mu, double eps_v, int order,
                             const Launch& launch) {
  check_vertices(velocities, "velocities");
  check_vertices(lagged, "lagged_vertices");
  check_vertices(rest, "rest_vertices");
  check_same_device_dtype(velocities, "velocities", lagged, "lagged_vertices");
  check_same_device_dtype(velocities, "velocities", rest, "rest_vertices");
  check_same_batch(velocities, "velocities", lagged, "lagged_vertices");
  check_same_batch(velocities, "velocities", rest, "rest_vertices");
  check_mesh(lagged, faces, edges, std::nullopt);
  check_candidates(lagged, faces, edges, fv, ee);
  TORCH_CHECK(dhat > 0, "dhat: expected > 0, got ", dhat);
  TORCH_CHECK(kappa >= 0, "kappa: expected >= 0, got ", kappa);
  TORCH_CHECK(mu >= 0, "mu: expected >= 0, got ", mu);
  TORCH_CHECK(eps_v > 0, "eps_v: expected > 0, got ", eps_v);
  const int64_t nfv = fv.size(0), n = nfv + ee.size(0);
  const auto opt = velocities.options();
  at::Tensor out = order == 0 ? at::empty({n}, opt)
                              : (order == 1 ? at::empty({n, 12}, opt) : at::empty({n, 12, 12}, opt));
  AT_DISPATCH_FLOATING_TYPES(velocities.scalar_type(), "ipc_friction", [&] {
    CandidateStencil st{faces.data_ptr<int64_t>(), edges.data_ptr<int64_t>(),
                        fv.data_ptr<int64_t>(), ee.data_ptr<int64_t>(), nfv};
    launch(velocities, n,
           FrictionFunctor<scalar_t>{st, velocities.data_ptr<scalar_t>(),
                                     lagged.data_ptr<scalar_t>(), rest.data_ptr<scalar_t>(),
                                     scalar_t(dhat * dhat), scalar_t(kappa), scalar_t(mu),
                                     scalar_t(eps_v), order, out.data_ptr<scalar_t>()});
  });
  return out;
}

// ---- CCD ------------------------------------------------------------------------------------

template <typename Launch>
at::Tensor ipc_ccd_impl(const at::Tensor& v0, const at::Tensor& v1, const at::Tensor& faces,
                        const at::Tensor& edges, const at::Tensor& fv, const at::Tensor& ee,
                        double min_distance, double tmax, double conservative_rescaling,
                        int64_t max_iterations, const Launch& launch) {
  check_vertices(v0, "vertices_t0");
  check_vertices(v1, "vertices_t1");
  check_same_device_dtype(v0, "vertices_t0", v1, "vertices_t1");
  check_same_batch(v0, "vertices_t0", v1, "vertices_t1");
  check_mesh(v0, faces, edges, std::nullopt);
  check_candidates(v0, faces, edges, fv, ee);
  TORCH_CHECK(min_distance >= 0, "min_distance: expected >= 0, got ", min_distance);
  TORCH_CHECK(tmax >= 0, "tmax: expected >= 0, got ", tmax);
  TORCH_CHECK(conservative_rescaling > 0 && conservative_rescaling <= 1,
              "conservative_rescaling: expected in (0, 1], got ", conservative_rescaling);
  TORCH_CHECK(max_iterations > 0, "max_iterations: expected > 0, got ", max_iterations);
  const int64_t nfv = fv.size(0), n = nfv + ee.size(0);
  at::Tensor toi = at::empty({n}, v0.options());
  AT_DISPATCH_FLOATING_TYPES(v0.scalar_type(), "ipc_ccd", [&] {
    CandidateStencil st{faces.data_ptr<int64_t>(), edges.data_ptr<int64_t>(),
                        fv.data_ptr<int64_t>(), ee.data_ptr<int64_t>(), nfv};
    launch(v0, n,
           CcdFunctor<scalar_t>{st, v0.data_ptr<scalar_t>(), v1.data_ptr<scalar_t>(),
                                CcdParams{min_distance, tmax, conservative_rescaling,
                                          max_iterations},
                                toi.data_ptr<scalar_t>()});
  });
  return toi;
}

}  // namespace contactnet

// IPC barrier kernels: distances with derivatives, the barrier, the barrier potential with gradient
// and Hessian, friction, and conservative CCD. float32 or float64, one device. Every op is
// registered for both devices from one list (ipc_ops.h).
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
// Collision candidates (fv, ee below): ipc_collision_candidates, ipc_swept_candidates and their
//   fixed-capacity *_padded variants, in ipc_candidates.h.
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
// ipc_prune_candidates(vertices_t0, vertices_t1?, faces, edges, fv, ee, reach) -> fv, ee: the
//   candidates that may come closer than reach on the linear motion t0 → t1 (or at t0), in order;
//   a conservative bound from the distance at t0 and the vertices' displacements (measured from
//   one stencil vertex's when that bound is smaller: a motion both sides share moves no distance).
// ipc_prune_candidates_padded(same, capacity) -> fv, ee (capacity, 2) each, counts (2,): the same
//   rows at the front of fixed-capacity lists, -1 after them (no host read).
//
// ipc_ccd(vertices_t0, vertices_t1, faces, edges, fv, ee, min_distance, tmax,
//         conservative_rescaling, max_iterations) -> (N,) time of impact in [0, tmax] (tmax: none).
//
// Rows of -1 in fv / ee are padding (fixed-capacity lists, see ipc_candidates.h): 0 energy, gradient
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
#include <ATen/ops/full.h>

#include "common/checks.h"
#include "common/macros.h"
#include "ipc/ipc_kernels.h"

namespace contactnet {

// ---- argument checks of a packed mesh and its candidates (values: see common/checks.h) --------

inline void check_vertices(const at::Tensor& v, const char* name) {
  check_float_input(v, name, {-1, 3});
}

// Per-vertex positions `x`, their lagged copy and the rest positions: (V, 3) each, one float
// dtype and device.
inline void check_lagged_vertices(const at::Tensor& x, const char* x_name, const at::Tensor& lagged,
                                  const at::Tensor& rest) {
  check_vertices(x, x_name);
  check_vertices(lagged, "lagged_vertices");
  check_vertices(rest, "rest_vertices");
  check_same_device_dtype(x, x_name, lagged, "lagged_vertices");
  check_same_device_dtype(x, x_name, rest, "rest_vertices");
  check_same_batch(x, x_name, lagged, "lagged_vertices");
  check_same_batch(x, x_name, rest, "rest_vertices");
}

inline void check_mesh(const at::Tensor& vertices, const at::Tensor& faces, const at::Tensor& edges,
                       const std::optional<at::Tensor>& vertex_body) {
  const int64_t V = vertices.size(0);
  check_index_input(faces, "faces", {-1, 3}, V);
  check_index_input(edges, "edges", {-1, 2}, V);
  check_same_device(faces, "faces", vertices, "vertices");
  check_same_device(edges, "edges", vertices, "vertices");
  if (vertex_body.has_value()) {
    check_input(*vertex_body, "vertex_body", {V});
    TORCH_CHECK(vertex_body->scalar_type() == at::kLong, "vertex_body: expected int64");
    check_same_device(*vertex_body, "vertex_body", vertices, "vertices");
    if (V > 0 && values_checked_in_cpp(*vertex_body))
      TORCH_CHECK_VALUE(vertex_body->min().item<int64_t>() >= 0,
                        "vertex_body: body ids must be >= 0");
  }
}

// Rows of -1 are padding of fixed-capacity lists (see ipc_candidates.h) and contribute nothing.
inline void check_candidates(const at::Tensor& vertices, const at::Tensor& faces,
                             const at::Tensor& edges, const at::Tensor& fv, const at::Tensor& ee) {
  check_pair_rows(fv, "fv (candidates.face_vertex)", vertices.size(0), faces.size(0));
  check_pair_rows(ee, "ee (candidates.edge_edge)", edges.size(0), edges.size(0));
  check_same_device(fv, "fv", vertices, "vertices");
  check_same_device(ee, "ee", vertices, "vertices");
}

// Whether a launcher offers hessian_by_feature(functor, n) (see ipc_barrier_potential_impl).
CN_LAUNCHER_FLAG_TRAIT(launcher_shares_features, kSharesFeatures);

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

// ---- barrier potential ----------------------------------------------------------------------

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
  check_lagged_vertices(velocities, "velocities", lagged, rest);
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

// ---- pruning candidate lists ----------------------------------------------------------------
// Which rows of fv, ee (face–vertex rows first) may come closer than `reach` on v0 → v1
// (PruneFunctor), after the arguments' checks.
template <typename Launch>
at::Tensor ipc_prune_keep(const at::Tensor& v0, const std::optional<at::Tensor>& v1,
                          const at::Tensor& faces, const at::Tensor& edges, const at::Tensor& fv,
                          const at::Tensor& ee, double reach, const Launch& launch) {
  check_vertices(v0, "vertices_t0");
  if (v1.has_value()) {
    check_vertices(*v1, "vertices_t1");
    check_same_device_dtype(v0, "vertices_t0", *v1, "vertices_t1");
    check_same_batch(v0, "vertices_t0", *v1, "vertices_t1");
  }
  check_mesh(v0, faces, edges, std::nullopt);
  check_candidates(v0, faces, edges, fv, ee);
  TORCH_CHECK(reach >= 0, "reach: expected >= 0, got ", reach);
  const int64_t nfv = fv.size(0), n = nfv + ee.size(0);
  at::Tensor keep = at::empty({n}, v0.options().dtype(at::kBool));
  AT_DISPATCH_FLOATING_TYPES(v0.scalar_type(), "ipc_prune_candidates", [&] {
    CandidateStencil st{faces.data_ptr<int64_t>(), edges.data_ptr<int64_t>(),
                        fv.data_ptr<int64_t>(), ee.data_ptr<int64_t>(), nfv};
    launch(v0, n,
           PruneFunctor<scalar_t>{st, v0.data_ptr<scalar_t>(),
                                  v1.has_value() ? v1->data_ptr<scalar_t>() : nullptr,
                                  scalar_t(reach), scalar_t(reach * reach),
                                  keep.data_ptr<bool>()});
  });
  return keep;
}

// The rows of fv, ee that may come closer than `reach` on v0 → v1 (PruneFunctor), in order. The
// count is read on the host (a sync on a device).
template <typename Launch>
std::tuple<at::Tensor, at::Tensor> ipc_prune_candidates_impl(
    const at::Tensor& v0, const std::optional<at::Tensor>& v1, const at::Tensor& faces,
    const at::Tensor& edges, const at::Tensor& fv, const at::Tensor& ee, double reach,
    const Launch& launch) {
  at::Tensor keep = ipc_prune_keep(v0, v1, faces, edges, fv, ee, reach, launch);
  const int64_t nfv = fv.size(0), n = nfv + ee.size(0);
  if (!v0.is_cpu())
    return {fv.index_select(0, keep.narrow(0, 0, nfv).nonzero().squeeze(1)),
            ee.index_select(0, keep.narrow(0, nfv, n - nfv).nonzero().squeeze(1))};
  // The same rows copied in one pass (nonzero and index_select cost more at a contact list's size).
  const bool* k = keep.data_ptr<bool>();
  auto compact = [&](const at::Tensor& rows, int64_t offset) {
    const int64_t m = rows.size(0);
    int64_t kept = 0;
    for (int64_t i = 0; i < m; ++i) kept += k[offset + i];
    at::Tensor out = at::empty({kept, 2}, rows.options());
    const int64_t* in = rows.data_ptr<int64_t>();
    int64_t* o = out.data_ptr<int64_t>();
    for (int64_t i = 0; i < m; ++i)
      if (k[offset + i]) {
        *o++ = in[2 * i];
        *o++ = in[2 * i + 1];
      }
    return out;
  };
  return {compact(fv, 0), compact(ee, nfv)};
}

// The same rows at the front of fixed-capacity lists (-1 after them) and the (2,) counts kept,
// which exceed capacity when rows were dropped: no output shape depends on the data, and nothing
// is read on the host (CUDA-graph capturable).
template <typename Launch>
std::tuple<at::Tensor, at::Tensor, at::Tensor> ipc_prune_candidates_padded_impl(
    const at::Tensor& v0, const std::optional<at::Tensor>& v1, const at::Tensor& faces,
    const at::Tensor& edges, const at::Tensor& fv, const at::Tensor& ee, double reach,
    int64_t capacity, const Launch& launch) {
  TORCH_CHECK(capacity >= 0, "capacity: expected >= 0, got ", capacity);
  at::Tensor keep = ipc_prune_keep(v0, v1, faces, edges, fv, ee, reach, launch);
  auto compact = [&](const at::Tensor& rows, int64_t offset) {
    at::Tensor k = keep.narrow(0, offset, rows.size(0)).contiguous();
    at::Tensor rank = k.cumsum(0, at::kLong);
    at::Tensor out = at::full({capacity, 2}, -1, rows.options());
    launch(v0, rows.size(0),
           CompactRowsFunctor{k.data_ptr<bool>(), rank.data_ptr<int64_t>(),
                              rows.data_ptr<int64_t>(), capacity, out.data_ptr<int64_t>()});
    return std::make_tuple(out, k.sum(at::kLong).reshape({1}));
  };
  auto [fv_out, fv_count] = compact(fv, 0);
  auto [ee_out, ee_count] = compact(ee, fv.size(0));
  return {fv_out, ee_out, at::cat({fv_count, ee_count})};
}

// ---- CCD ------------------------------------------------------------------------------------

inline void check_ccd_args(const at::Tensor& v0, const at::Tensor& v1, const at::Tensor& faces,
                           const at::Tensor& edges, const at::Tensor& fv, const at::Tensor& ee,
                           double min_distance, double tmax, double conservative_rescaling,
                           int64_t max_iterations) {
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
}

template <typename Launch>
at::Tensor ipc_ccd_impl(const at::Tensor& v0, const at::Tensor& v1, const at::Tensor& faces,
                        const at::Tensor& edges, const at::Tensor& fv, const at::Tensor& ee,
                        double min_distance, double tmax, double conservative_rescaling,
                        int64_t max_iterations, const Launch& launch) {
  check_ccd_args(v0, v1, faces, edges, fv, ee, min_distance, tmax, conservative_rescaling,
                 max_iterations);
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

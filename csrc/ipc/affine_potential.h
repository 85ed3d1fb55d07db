// The stepper's incremental potential of affine bodies (contactnet/sim/potential.py documents the
// terms) in one op per order, so a Newton iteration costs two calls instead of a dozen ops and
// the per-candidate 12×12 Hessians go straight into each environment's dense system.
//
// ipc_affine_potential(q (E, B, 12), q_hat (E, B, 12), weight (E, B), mass_matrix (E, B, 12, 12),
//     ortho_weight (E, B), vertices (V, 3), rest_vertices (V, 3), faces (F, 3), edges (Ed, 2),
//     vertex_body (V,) int64 flat body e·B + b, fv, ee (candidates closer than d̂, a superset),
//     lagged_vertices (V, 3), lag_fv, lag_ee (friction's lagged candidates), lag_mu (Nlag,),
//     dt, dhat, kappa, eps_v) -> (E,) the potential of every environment.
// ipc_affine_potential_derivatives(same, frictionless_hessian?, keep_frictionless)
//     -> gradient (E, 12B), hessian (E, 12B, 12B), frictionless (E, 12B, 12B) or (0,): the
//     gradient and the PSD-projected Hessian (orthogonality and barrier terms projected per body
//     and per candidate, friction PSD by construction), in q order (p, a1, a2, a3) per body.
//     The Hessian of every term but friction depends only on q (and the pairs within d̂ there):
//     keep_frictionless returns it as well, and a later call at the same q may hand it back as
//     frictionless_hessian, which the op then uses as it is, computing only the gradient and
//     friction's Hessian (a step's last Newton iteration and the next step's first share q).
//
// ipc_affine_positions(q (nb, 12), rest_vertices (V, 3), vertex_body (V,) int64 in [0, nb))
//     -> (V, 3) x = A x0 + p of every vertex under its body's affine map.
//
// ipc_affine_contact_forces(vertices (V, 3), lagged_vertices (V, 3), rest_vertices (V, 3), faces,
//     edges, vertex_body (V,) int64 flat body e·B + b, fv, ee (the pairs within d̂), lag_fv,
//     lag_ee, lag_mu (friction's lagged pairs and their μ), num_envs E, num_bodies B, dt, dhat,
//     kappa, eps_v) -> forces (E·B, 3), contacts (E,) int64, min_distance (E,): the contact
//     force on every body (−∇ of κ Σ m b and of Σ μ D with velocities x − xᵗ and ε_v·dt, summed
//     over its vertices), and per environment its candidate rows (padding aside) and their
//     smallest distance (inf without any). A candidate counts in its first stencil vertex's
//     environment.
// ipc_contact_statistics(vertices, faces, edges, vertex_body, fv, ee, num_envs, num_bodies)
//     -> contacts (E,) int64, min_distance (E,): the last two of ipc_affine_contact_forces alone.
//
// ipc_collision_free_steps(vertices_t0, vertices_t1, faces, edges, fv, ee, vertex_env (V,) int64,
//     num_envs, min_distance, conservative_rescaling, max_iterations) -> (E,): per environment the
//     smallest CCD time of impact (ipc_ccd, tmax 1) of its candidates (those of its first stencil
//     vertex), 1 without any.
//
// float64 or float32, one device. Rows of -1 in the candidate lists are padding. The sums over
// candidates run in candidate order into each body's rows on the CPU (deterministic; bodies in
// parallel); a GPU evaluates each candidate in one thread that adds its terms atomically
// (candidate_sums.h), with no per-candidate arrays.
#pragma once

#include <algorithm>
#include <limits>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/full.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/zeros.h>

#include "common/checks.h"
#include "common/macros.h"
#include "common/psd.h"
#include "ipc/body_derivatives.h"
#include "ipc/candidate_sums.h"
#include "ipc/ipc.h"

namespace contactnet {

// Per body k = e·B + b: inertia ½ w (q − q̂)ᵀ M (q − q̂) and h² times the orthogonality energy
// Φ = w_A ‖A Aᵀ − I‖²_F (A's rows a_i = q[3 + 3i …]), with
//   ∂Φ/∂a_k = 4 w_A Σ_j c_kj a_j,   ∂²Φ/∂a_k∂a_l = 4 w_A (δ_kl AᵀA + a_l a_kᵀ + c_kl I),
// C = A Aᵀ − I; the 9×9 Hessian projected to PSD (it is indefinite under compression).
// Writes the energy, or the gradient row and the diagonal block of the dense Hessian.
template <typename T>
struct AffineBodyFunctor {
  const T* q;       // (E·B, 12)
  const T* q_hat;   // (E·B, 12)
  const T* weight;  // (E·B,)
  const T* mass;    // (E·B, 12, 12)
  const T* ortho;   // (E·B,)
  T h2;
  int64_t B;
  T* energy;  // (E·B,) or null
  T* grad;    // (E·B, 12) or null
  T* hess;    // (E, 12B, 12B) or null

  CN_HD void operator()(int64_t k) const {
    const T* qk = q + 12 * k;
    const T* Mk = mass + 144 * k;
    const T w = weight[k], wa = ortho[k];
    T dq[12], Mdq[12];
    for (int r = 0; r < 12; ++r) dq[r] = qk[r] - q_hat[12 * k + r];
    for (int r = 0; r < 12; ++r) {
      T s = T(0);
      for (int c = 0; c < 12; ++c) s += Mk[12 * r + c] * dq[c];
      Mdq[r] = s;
    }
    T A[3][3], C[3][3];
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) A[i][j] = qk[3 + 3 * i + j];
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) {
        T s = T(0);
        for (int c = 0; c < 3; ++c) s += A[i][c] * A[j][c];
        C[i][j] = s - T(i == j);
      }
    if (energy) {
      T inertia = T(0), phi = T(0);
      for (int r = 0; r < 12; ++r) inertia += dq[r] * Mdq[r];
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) phi += C[i][j] * C[i][j];
      energy[k] = T(0.5) * w * inertia + h2 * wa * phi;
      return;
    }
    T* g = grad + 12 * k;
    for (int r = 0; r < 12; ++r) g[r] = w * Mdq[r];
    for (int a = 0; a < 3; ++a)  // row a: 4 w_A Σ_j c_aj a_j
      for (int i = 0; i < 3; ++i) {
        T s = T(0);
        for (int j = 0; j < 3; ++j) s += C[a][j] * A[j][i];
        g[3 + 3 * a + i] += h2 * T(4) * wa * s;
      }
    if (!hess) return;  // the gradient only (the caller reuses a Hessian)
    T AtA[3][3];
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) {
        T s = T(0);
        for (int c = 0; c < 3; ++c) s += A[c][i] * A[c][j];
        AtA[i][j] = s;
      }
    T Ho[81];  // [(a, i), (b, j)]
    for (int a = 0; a < 3; ++a)
      for (int i = 0; i < 3; ++i)
        for (int b = 0; b < 3; ++b)
          for (int j = 0; j < 3; ++j) {
            T h = A[b][i] * A[a][j];
            if (a == b) h += AtA[i][j];
            if (i == j) h += C[a][b];
            Ho[(3 * a + i) * 9 + 3 * b + j] = T(4) * wa * h;
          }
    for (int r = 0; r < 9; ++r)
      for (int c = r + 1; c < 9; ++c) Ho[9 * r + c] = Ho[9 * c + r] = T(0.5) * (Ho[9 * r + c] + Ho[9 * c + r]);
    project_to_psd(Ho, 9, 9);
    const int64_t ld = 12 * B, b = k % B;
    T* H = hess + (k / B) * ld * ld + 12 * b * ld + 12 * b;
    for (int r = 0; r < 12; ++r)
      for (int c = 0; c < 12; ++c) {
        T h = w * Mk[12 * r + c];
        if (r >= 3 && c >= 3) h += h2 * Ho[9 * (r - 3) + c - 3];
        H[r * ld + c] = h;
      }
  }
};

template <typename T>
struct AffinePositionsFunctor {
  const T* q;     // (nb, 12)
  const T* rest;  // (V, 3)
  const int64_t* vertex_body;
  T* out;  // (V, 3)

  CN_HD void operator()(int64_t v) const {
    const T* qb = q + 12 * vertex_body[v];
    const T* x0 = rest + 3 * v;
    for (int i = 0; i < 3; ++i)
      out[3 * v + i] = qb[3 + 3 * i] * x0[0] + qb[4 + 3 * i] * x0[1] + qb[5 + 3 * i] * x0[2] + qb[i];
  }
};

template <typename L>
at::Tensor ipc_affine_positions_impl(const at::Tensor& q, const at::Tensor& rest,
                                     const at::Tensor& vertex_body) {
  check_float_input(q, "q", {-1, 12});
  check_vertices(rest, "rest_vertices");
  check_same_device_dtype(rest, "rest_vertices", q, "q");
  check_index_input(vertex_body, "vertex_body", {rest.size(0)}, q.size(0));
  check_same_device(vertex_body, "vertex_body", q, "q");
  at::Tensor out = at::empty_like(rest);
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "ipc_affine_positions", [&] {
    L::cheap(q, rest.size(0),
             AffinePositionsFunctor<scalar_t>{q.data_ptr<scalar_t>(), rest.data_ptr<scalar_t>(),
                                              vertex_body.data_ptr<int64_t>(),
                                              out.data_ptr<scalar_t>()});
  });
  return out;
}

// Stencil (N, 4), kind and bodies of candidate i: body[i] = the flat bodies of stencil vertices 0
// and 3 (face–vertex: p | t0 t1 t2, edge–edge: ea0 ea1 | eb0 eb1). Padding rows: stencil -1,
// bodies 0 (the sums skip them).
struct CandidateBodiesFunctor {
  CandidateStencil st;
  const int64_t* vertex_body;
  int64_t* stencils;  // (N, 4)
  bool* is_fv;        // (N,)
  int64_t* body;      // (N, 2)

  CN_HD void operator()(int64_t i) const {
    is_fv[i] = i < st.nfv;
    if (st.padded(i)) {
      for (int k = 0; k < 4; ++k) stencils[4 * i + k] = -1;
      body[2 * i] = body[2 * i + 1] = 0;
      return;
    }
    int64_t id[4];
    st.ids(i, id);
    for (int k = 0; k < 4; ++k) stencils[4 * i + k] = id[k];
    body[2 * i] = vertex_body[id[0]];
    body[2 * i + 1] = vertex_body[id[3]];
  }
};

struct CandidateBodies {
  at::Tensor stencils, is_fv, body;
};

template <typename Launch>
CandidateBodies candidate_bodies(const at::Tensor& faces, const at::Tensor& edges,
                                 const at::Tensor& fv, const at::Tensor& ee,
                                 const at::Tensor& vertex_body, const Launch& launch) {
  const int64_t nfv = fv.size(0), n = nfv + ee.size(0);
  CandidateBodies out{at::empty({n, 4}, faces.options()),
                      at::empty({n}, faces.options().dtype(at::kBool)),
                      at::empty({n, 2}, faces.options())};
  CandidateStencil st{faces.data_ptr<int64_t>(), edges.data_ptr<int64_t>(),
                      fv.data_ptr<int64_t>(), ee.data_ptr<int64_t>(), nfv};
  launch(faces, n,
         CandidateBodiesFunctor{st, vertex_body.data_ptr<int64_t>(),
                                out.stencils.data_ptr<int64_t>(), out.is_fv.data_ptr<bool>(),
                                out.body.data_ptr<int64_t>()});
  return out;
}

inline void check_affine_potential_inputs(
    const at::Tensor& q, const at::Tensor& q_hat, const at::Tensor& weight,
    const at::Tensor& mass, const at::Tensor& ortho, const at::Tensor& vertices,
    const at::Tensor& rest, const at::Tensor& faces, const at::Tensor& edges,
    const at::Tensor& vertex_body, const at::Tensor& fv, const at::Tensor& ee,
    const at::Tensor& lagged, const at::Tensor& lag_fv, const at::Tensor& lag_ee,
    const at::Tensor& lag_mu, double dt, double dhat, double kappa, double eps_v) {
  check_float_input(q, "q", {-1, -1, 12});
  const int64_t E = q.size(0), B = q.size(1);
  check_float_input(q_hat, "q_hat", {E, B, 12});
  check_float_input(weight, "weight", {E, B});
  check_float_input(mass, "mass_matrix", {E, B, 12, 12});
  check_float_input(ortho, "ortho_weight", {E, B});
  const std::pair<const at::Tensor*, const char*> floats[] = {
      {&q_hat, "q_hat"},     {&weight, "weight"},         {&mass, "mass_matrix"},
      {&ortho, "ortho_weight"}, {&vertices, "vertices"}, {&rest, "rest_vertices"},
      {&lagged, "lagged_vertices"}, {&lag_mu, "lag_mu"}};
  for (const auto& [t, name] : floats) check_same_device_dtype(*t, name, q, "q");
  check_lagged_vertices(vertices, "vertices", lagged, rest);
  check_mesh(vertices, faces, edges, std::nullopt);
  check_index_input(vertex_body, "vertex_body", {vertices.size(0)}, E * B);
  check_candidates(vertices, faces, edges, fv, ee);
  check_candidates(vertices, faces, edges, lag_fv, lag_ee);
  check_float_input(lag_mu, "lag_mu", {lag_fv.size(0) + lag_ee.size(0)});
  TORCH_CHECK(dt > 0 && dhat > 0 && kappa >= 0 && eps_v > 0,
              "dt, dhat, eps_v: expected > 0 and kappa >= 0, got ", dt, ", ", dhat, ", ", eps_v,
              ", ", kappa);
}

// out[index[k]] += sign · values[k] for the rows k of values (out (M, w) or (M,), values (K, w) or
// (K,), contiguous; host tensors), in order of k: the same sums, bit for bit, as index_add_ on the
// CPU, which costs about 50 ns a row at the stepper's sizes (more than the barrier's gradient).
// sign: ±1.
inline void add_rows_in_order(at::Tensor& out, const at::Tensor& index, const at::Tensor& values,
                              int sign) {
  const at::Tensor idx = index.contiguous(), val = values.contiguous();
  const int64_t rows = idx.numel(), w = rows ? val.numel() / rows : 0;
  const int64_t* k = idx.data_ptr<int64_t>();
  AT_DISPATCH_ALL_TYPES(out.scalar_type(), "add_rows_in_order", [&] {
    const scalar_t* v = val.data_ptr<scalar_t>();
    scalar_t* o = out.data_ptr<scalar_t>();
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < w; ++c) {
        if (sign < 0)
          o[k[r] * w + c] -= v[r * w + c];
        else
          o[k[r] * w + c] += v[r * w + c];
      }
  });
}

// extents: None, or (2,) int64 on like's device: rows at or past extents[0] of the face–vertex
// list and extents[1] of the edge–edge list are padding (a fixed-capacity list written from the
// front, extents its counts; counts past the capacity are clamped). Never read on a device.
inline void check_extents(const std::optional<at::Tensor>& extents, const char* name,
                          const at::Tensor& like) {
  if (!extents.has_value()) return;
  check_input(*extents, name, {2});
  TORCH_CHECK(extents->scalar_type() == at::kLong, name, ": expected int64, got ",
              extents->scalar_type());
  check_same_device(*extents, name, like, "the candidates");
  if (values_checked_in_cpp(*extents))
    TORCH_CHECK_VALUE(extents->min().item<int64_t>() >= 0, name, ": expected counts >= 0");
}

// Host form: the rows before the extents (read here; host tensors), and those of a per-row
// tensor `per_row` (face–vertex rows first) when defined.
struct RowsInUse {
  at::Tensor fv, ee, per_row;
};
inline RowsInUse rows_in_use(const at::Tensor& fv, const at::Tensor& ee,
                             const std::optional<at::Tensor>& extents,
                             const at::Tensor& per_row = at::Tensor()) {
  if (!extents.has_value()) return {fv, ee, per_row};
  const int64_t* e = extents->data_ptr<int64_t>();
  const int64_t a = std::min(e[0], fv.size(0)), b = std::min(e[1], ee.size(0));
  at::Tensor rows;
  if (per_row.defined())
    rows = at::cat({per_row.narrow(0, 0, a), per_row.narrow(0, fv.size(0), b)});
  return {fv.narrow(0, 0, a), ee.narrow(0, 0, b), rows};
}

// The potential ops' extents, checked; for host launchers given some, the candidate and lagged
// lists (with lag_mu) cut to them, for the op to run again without extents.
template <typename L>
std::optional<std::pair<RowsInUse, RowsInUse>> host_rows_in_use(
    const at::Tensor& fv, const at::Tensor& ee, const at::Tensor& lag_fv, const at::Tensor& lag_ee,
    const at::Tensor& lag_mu, const std::optional<at::Tensor>& extents,
    const std::optional<at::Tensor>& lag_extents) {
  check_extents(extents, "extents", fv);
  check_extents(lag_extents, "lag_extents", lag_fv);
  if constexpr (launcher_sums_on_host<L>::value)
    if (extents.has_value() || lag_extents.has_value())
      return std::make_pair(rows_in_use(fv, ee, extents),
                            rows_in_use(lag_fv, lag_ee, lag_extents, lag_mu));
  return std::nullopt;
}

// Device form: f over the rows of fv then ee (its candidate indices), only those before the
// extents when given, without reading them on the host.
template <typename Launch, typename F>
void launch_rows(const Launch& launch, const at::Tensor& like, const at::Tensor& fv,
                 const at::Tensor& ee, const std::optional<at::Tensor>& extents, const F& f) {
  const int64_t nfv = fv.size(0), nee = ee.size(0);
  if (nfv + nee == 0) return;
  if (extents.has_value())
    launch.bounded(like, nfv + nee, ExtentRows<F>{f, extents->data_ptr<int64_t>(), nfv, nee});
  else
    launch(like, nfv + nee, f);
}

// The per-candidate functors of the barrier (κ, order, projected) and of friction (μ = 1,
// velocities u, lagged positions; order 0) on candidate lists a (face–vertex) and b
// (edge–edge), without output arrays (candidate_sums.h evaluates them into registers).
template <typename T>
BarrierPotentialFunctor<T> barrier_functor(const at::Tensor& vertices, const at::Tensor& rest,
                                           const at::Tensor& faces, const at::Tensor& edges,
                                           const at::Tensor& a, const at::Tensor& b, double dhat,
                                           double kappa, int order, bool project = false) {
  return {CandidateStencil{faces.data_ptr<int64_t>(), edges.data_ptr<int64_t>(),
                           a.data_ptr<int64_t>(), b.data_ptr<int64_t>(), a.size(0)},
          vertices.data_ptr<T>(), rest.data_ptr<T>(), T(dhat * dhat), T(kappa), order, project,
          nullptr, nullptr, nullptr, nullptr};
}

template <typename T>
FrictionFunctor<T> friction_functor(const at::Tensor& u, const at::Tensor& lagged,
                                    const at::Tensor& rest, const at::Tensor& faces,
                                    const at::Tensor& edges, const at::Tensor& a,
                                    const at::Tensor& b, double dhat, double kappa, double eps_v) {
  return {CandidateStencil{faces.data_ptr<int64_t>(), edges.data_ptr<int64_t>(),
                           a.data_ptr<int64_t>(), b.data_ptr<int64_t>(), a.size(0)},
          u.data_ptr<T>(), lagged.data_ptr<T>(), rest.data_ptr<T>(), T(dhat * dhat), T(kappa),
          T(1), T(eps_v), 0, nullptr};
}

template <typename L>
at::Tensor ipc_affine_potential_impl(
    const at::Tensor& q, const at::Tensor& q_hat, const at::Tensor& weight,
    const at::Tensor& mass, const at::Tensor& ortho, const at::Tensor& vertices,
    const at::Tensor& rest, const at::Tensor& faces, const at::Tensor& edges,
    const at::Tensor& vertex_body, const at::Tensor& fv, const at::Tensor& ee,
    const at::Tensor& lagged, const at::Tensor& lag_fv, const at::Tensor& lag_ee,
    const at::Tensor& lag_mu, double dt, double dhat, double kappa, double eps_v,
    const std::optional<at::Tensor>& extents, const std::optional<at::Tensor>& lag_extents) {
  check_affine_potential_inputs(q, q_hat, weight, mass, ortho, vertices, rest, faces, edges,
                                vertex_body, fv, ee, lagged, lag_fv, lag_ee, lag_mu, dt, dhat,
                                kappa, eps_v);
  if (const auto cut = host_rows_in_use<L>(fv, ee, lag_fv, lag_ee, lag_mu, extents, lag_extents)) {
    const auto& [c, lag] = *cut;
    return ipc_affine_potential_impl<L>(q, q_hat, weight, mass, ortho, vertices, rest, faces, edges,
                                        vertex_body, c.fv, c.ee, lagged, lag.fv, lag.ee, lag.per_row,
                                        dt, dhat, kappa, eps_v, std::nullopt, std::nullopt);
  }
  const int64_t E = q.size(0), B = q.size(1);
  const double h2 = dt * dt;
  at::Tensor per_body = at::empty({E, B}, q.options());
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "ipc_affine_potential", [&] {
    L::cheap(q, E * B,
             AffineBodyFunctor<scalar_t>{q.data_ptr<scalar_t>(), q_hat.data_ptr<scalar_t>(),
                                         weight.data_ptr<scalar_t>(), mass.data_ptr<scalar_t>(),
                                         ortho.data_ptr<scalar_t>(), scalar_t(h2), B,
                                         per_body.data_ptr<scalar_t>(), nullptr, nullptr});
  });
  at::Tensor total = per_body.sum(1);
  const int64_t n = fv.size(0) + ee.size(0), nlag = lag_fv.size(0) + lag_ee.size(0);
  if constexpr (!launcher_sums_on_host<L>::value) {
    AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "ipc_affine_potential", [&] {
      using T = scalar_t;
      const int64_t* body = vertex_body.data_ptr<int64_t>();
      if (n > 0) {
        const auto barrier =
            barrier_functor<T>(vertices, rest, faces, edges, fv, ee, dhat, h2 * kappa, 0);
        launch_rows(L::ordered, q, fv, ee, extents,
                    BarrierEnergySumFunctor<T>{barrier, body, B, total.data_ptr<T>()});
      }
      if (nlag > 0) {
        const at::Tensor u = vertices.sub(lagged);
        const auto friction = friction_functor<T>(u, lagged, rest, faces, edges, lag_fv, lag_ee,
                                                  dhat, kappa, eps_v * dt);
        launch_rows(L::ordered, q, lag_fv, lag_ee, lag_extents,
                    FrictionEnergySumFunctor<T>{friction, lag_mu.data_ptr<T>(), T(h2), body, B,
                                                total.data_ptr<T>()});
      }
    });
    return total;
  }
  // Each candidate's energy (times μ h², for friction) goes to the environment of its first
  // stencil vertex, in candidate order; padding rows add their 0 to environment 0.
  auto add_by_env = [&](const at::Tensor& a, const at::Tensor& b, const at::Tensor& value,
                        const at::Tensor* scale) {
    AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "ipc_affine_potential", [&] {
      const CandidateStencil st{faces.data_ptr<int64_t>(), edges.data_ptr<int64_t>(),
                                a.data_ptr<int64_t>(), b.data_ptr<int64_t>(), a.size(0)};
      const int64_t* body = vertex_body.data_ptr<int64_t>();
      const scalar_t* v = value.data_ptr<scalar_t>();
      const scalar_t* mu = scale ? scale->data_ptr<scalar_t>() : nullptr;
      const scalar_t h2s = scalar_t(h2);
      scalar_t* out = total.data_ptr<scalar_t>();
      for (int64_t i = 0, n = a.size(0) + b.size(0); i < n; ++i) {
        int64_t id[4];
        const int64_t e = st.padded(i) ? 0 : (st.ids(i, id), body[id[0]] / B);
        out[e] += mu ? (mu[i] * h2s) * v[i] : v[i];
      }
    });
  };
  if (n > 0)
    add_by_env(fv, ee, std::get<0>(ipc_barrier_potential_impl(vertices, rest, faces, edges, fv, ee,
                                                             dhat, h2 * kappa, 0, false, L::cheap)),
               nullptr);
  if (nlag > 0) {
    at::Tensor d = ipc_friction_impl(vertices.sub(lagged), lagged, rest, faces, edges, lag_fv, lag_ee,
                                     dhat, kappa, 1.0, eps_v * dt, 0, L::cheap);
    add_by_env(lag_fv, lag_ee, d, &lag_mu);  // μ h² D
  }
  return total;
}

// Host: the chain rule's sums of candidates' blocks, each candidate's four parts (n, s, t) in
// candidate order into the rows of its bodies, so every entry receives its terms in the serial
// loop's order (the same sums, bit for bit, on any number of threads). Part (n, s, t) writes only
// into the rows of body s (gradient and Hessian block [s, t]), and environments' rows are
// disjoint: with at least as many environments as threads, environments run in parallel, each
// candidate's parts together (its 12×12 blocks read once); with fewer, the parts are bucketed by
// body, so one environment's bodies share the threads.
template <typename F>
void add_by_environment(const F& f, const at::Tensor& body, int64_t B, int64_t E) {
  const int64_t n = body.size(0);
  const int64_t* b = body.data_ptr<int64_t>();
  std::vector<int64_t> start(E + 1, 0), order(n);
  for (int64_t i = 0; i < n; ++i) ++start[b[2 * i] / B + 1];
  for (int64_t e = 0; e < E; ++e) start[e + 1] += start[e];
  std::vector<int64_t> fill(start.begin(), start.end() - 1);
  for (int64_t i = 0; i < n; ++i) order[fill[b[2 * i] / B]++] = i;
  at::parallel_for(0, E, 1, [&](int64_t begin, int64_t end) {
    for (int64_t k = start[begin]; k < start[end]; ++k)
      for (int64_t part = 0; part < 4; ++part) f(4 * order[k] + part);
  });
}

template <typename F>
void add_by_body(const F& f, const at::Tensor& body, int64_t num_bodies) {
  const int64_t n = body.size(0);
  const int64_t* b = body.data_ptr<int64_t>();
  std::vector<int64_t> start(num_bodies + 1, 0), order(4 * n);
  for (int64_t i = 0; i < 2 * n; ++i) start[b[i] + 1] += 2;  // parts (s, 0) and (s, 1) of row b[i]
  for (int64_t k = 0; k < num_bodies; ++k) start[k + 1] += start[k];
  std::vector<int64_t> fill(start.begin(), start.end() - 1);
  for (int64_t part = 0; part < 4 * n; ++part) order[fill[b[part / 2]]++] = part;  // s = part / 2 % 2
  at::parallel_for(0, num_bodies, 1, [&](int64_t begin, int64_t end) {
    for (int64_t k = start[begin]; k < start[end]; ++k) f(order[k]);
  });
}

template <typename L>
std::tuple<at::Tensor, at::Tensor, at::Tensor> ipc_affine_potential_derivatives_impl(
    const at::Tensor& q, const at::Tensor& q_hat, const at::Tensor& weight,
    const at::Tensor& mass, const at::Tensor& ortho, const at::Tensor& vertices,
    const at::Tensor& rest, const at::Tensor& faces, const at::Tensor& edges,
    const at::Tensor& vertex_body, const at::Tensor& fv, const at::Tensor& ee,
    const at::Tensor& lagged, const at::Tensor& lag_fv, const at::Tensor& lag_ee,
    const at::Tensor& lag_mu, double dt, double dhat, double kappa, double eps_v,
    const std::optional<at::Tensor>& frictionless_hessian, bool keep_frictionless,
    const std::optional<at::Tensor>& extents, const std::optional<at::Tensor>& lag_extents) {
  check_affine_potential_inputs(q, q_hat, weight, mass, ortho, vertices, rest, faces, edges,
                                vertex_body, fv, ee, lagged, lag_fv, lag_ee, lag_mu, dt, dhat,
                                kappa, eps_v);
  if (const auto cut = host_rows_in_use<L>(fv, ee, lag_fv, lag_ee, lag_mu, extents, lag_extents)) {
    const auto& [c, lag] = *cut;
    return ipc_affine_potential_derivatives_impl<L>(
        q, q_hat, weight, mass, ortho, vertices, rest, faces, edges, vertex_body, c.fv, c.ee,
        lagged, lag.fv, lag.ee, lag.per_row, dt, dhat, kappa, eps_v, frictionless_hessian,
        keep_frictionless, std::nullopt, std::nullopt);
  }
  const int64_t E = q.size(0), B = q.size(1), n = 12 * B;
  const bool reuse = frictionless_hessian.has_value();
  if (reuse) {
    check_float_input(*frictionless_hessian, "frictionless_hessian", {E, n, n});
    check_same_device_dtype(*frictionless_hessian, "frictionless_hessian", q, "q");
  }
  const double h2 = dt * dt;
  at::Tensor grad = at::empty({E, n}, q.options());
  at::Tensor hess = reuse ? frictionless_hessian->clone() : at::zeros({E, n, n}, q.options());
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "ipc_affine_potential_derivatives", [&] {
    // A 9×9 projection per body (~5 µs): the heavy grain spreads a few hundred bodies over threads.
    L::heavy(q, E * B,
             AffineBodyFunctor<scalar_t>{q.data_ptr<scalar_t>(), q_hat.data_ptr<scalar_t>(),
                                         weight.data_ptr<scalar_t>(), mass.data_ptr<scalar_t>(),
                                         ortho.data_ptr<scalar_t>(), scalar_t(h2), B, nullptr,
                                         grad.data_ptr<scalar_t>(),
                                         reuse ? nullptr : hess.data_ptr<scalar_t>()});
  });
  const int64_t nlag = lag_fv.size(0) + lag_ee.size(0);
  at::Tensor frictionless;
  if constexpr (!launcher_sums_on_host<L>::value) {
    // Friction adds last, so a reused Hessian gets its terms in the order a fresh one would.
    AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "ipc_affine_potential_derivatives", [&] {
      using T = scalar_t;
      const int64_t* body = vertex_body.data_ptr<int64_t>();
      if (fv.size(0) + ee.size(0) > 0) {
        const auto barrier = barrier_functor<T>(vertices, rest, faces, edges, fv, ee, dhat,
                                                h2 * kappa, reuse ? 1 : 2, true);
        launch_rows(L::ordered, q, fv, ee, extents,
                    BarrierBodySumFunctor<T>{barrier, body, B, grad.data_ptr<T>(),
                                             hess.data_ptr<T>()});
      }
      frictionless = keep_frictionless ? hess.clone() : at::empty({0}, q.options());
      if (nlag > 0) {
        const at::Tensor u = vertices.sub(lagged);
        const FrictionBodyFactorsFunctor<T> factors{
            friction_functor<T>(u, lagged, rest, faces, edges, lag_fv, lag_ee, dhat, kappa,
                                eps_v * dt),
            rest.data_ptr<T>(), lag_mu.data_ptr<T>(), T(h2), nullptr};
        launch_rows(L::ordered, q, lag_fv, lag_ee, lag_extents,
                    FrictionBodySumFunctor<T>{factors, body, B, grad.data_ptr<T>(),
                                              hess.data_ptr<T>()});
      }
    });
    return {grad, hess, frictionless};
  }
  // Adds the parts (candidate, body s, body t) of functor f, candidates of bodies `body` (N, 2),
  // into the dense system in candidate order.
  auto add_parts = [&](const auto& f, const at::Tensor& body) {
    if (E >= at::get_num_threads())
      add_by_environment(f, body, B, E);
    else
      add_by_body(f, body, E * B);
  };
  // Candidates' stencil derivatives carried to their two bodies and added into the dense system
  // (the gradient only when local_hess is undefined).
  auto add_contacts = [&](const at::Tensor& a, const at::Tensor& b, const at::Tensor& local_grad,
                          const at::Tensor& local_hess) {
    const CandidateBodies cb = candidate_bodies(faces, edges, a, b, vertex_body, L::cheap);
    AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "ipc_affine_potential_derivatives", [&] {
      auto f = body_pair_functor<scalar_t>(local_grad, local_hess, cb.stencils, cb.is_fv, rest,
                                           grad, hess, cb.body.data_ptr<int64_t>(), nullptr);
      f.dense_bodies = B;
      add_parts(f, cb.body);
    });
  };
  // Only the candidates closer than d̂ (the others add exact zeros; a Newton step's list is
  // mostly such): a distance pass instead of the Hessian launch's per-candidate work.
  at::Tensor afv, aee;
  std::tie(afv, aee) = ipc_prune_candidates_impl(vertices, std::nullopt, faces, edges, fv, ee, dhat,
                                                 L::cheap);
  if (afv.size(0) + aee.size(0) > 0) {
    // The projected-Hessian launch may share features and then writes Hessians only.
    at::Tensor g = std::get<1>(ipc_barrier_potential_impl(vertices, rest, faces, edges, afv, aee,
                                                          dhat, h2 * kappa, 1, false, L::medium));
    at::Tensor h;
    if (!reuse)
      h = std::get<2>(ipc_barrier_potential_impl(vertices, rest, faces, edges, afv, aee, dhat,
                                                 h2 * kappa, 2, true, L::hessian));
    add_contacts(afv, aee, g, h);
  }
  // Friction adds last, so a reused Hessian gets its terms in the order a fresh one would.
  frictionless = keep_frictionless ? hess.clone() : at::empty({0}, q.options());
  if (nlag > 0) {  // Kronecker factors per pair (FrictionBodyFactorsFunctor), then their blocks
    const at::Tensor u = vertices.sub(lagged);
    const CandidateBodies cb = candidate_bodies(faces, edges, lag_fv, lag_ee, vertex_body, L::cheap);
    at::Tensor factors = at::empty({nlag, kFrictionFactors}, q.options());
    AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "ipc_affine_potential_derivatives", [&] {
      using T = scalar_t;
      const FrictionFunctor<T> friction = friction_functor<T>(u, lagged, rest, faces, edges, lag_fv,
                                                              lag_ee, dhat, kappa, eps_v * dt);
      L::medium(q, nlag, FrictionBodyFactorsFunctor<T>{friction, rest.data_ptr<T>(),
                                                      lag_mu.data_ptr<T>(), T(h2),
                                                      factors.data_ptr<T>()});
      add_parts(FrictionBodyAddFunctor<T>{factors.data_ptr<T>(), cb.body.data_ptr<int64_t>(), B,
                                          grad.data_ptr<T>(), hess.data_ptr<T>()},
                cb.body);
    });
  }
  return {grad, hess, frictionless};
}

// Per environment: the candidate rows (padding aside) and their smallest exact distance (inf
// without any); a candidate counts in its first stencil vertex's environment. Inputs checked by
// the caller.
template <typename L>
std::tuple<at::Tensor, at::Tensor> contact_statistics(const at::Tensor& vertices,
                                                      const at::Tensor& faces,
                                                      const at::Tensor& edges,
                                                      const at::Tensor& vertex_body,
                                                      const at::Tensor& fv, const at::Tensor& ee,
                                                      int64_t num_envs, int64_t num_bodies,
                                                      const std::optional<at::Tensor>& extents) {
  if constexpr (launcher_sums_on_host<L>::value)
    if (extents.has_value()) {
      const RowsInUse c = rows_in_use(fv, ee, extents);
      return contact_statistics<L>(vertices, faces, edges, vertex_body, c.fv, c.ee, num_envs,
                                   num_bodies, std::nullopt);
    }
  const auto opt = vertices.options();
  at::Tensor contacts = at::zeros({num_envs}, opt.dtype(at::kLong));
  at::Tensor min_distance = at::full({num_envs}, std::numeric_limits<double>::infinity(), opt);
  const int64_t n = fv.size(0) + ee.size(0);
  if (n == 0) return {contacts, min_distance};
  if constexpr (!launcher_sums_on_host<L>::value) {
    AT_DISPATCH_FLOATING_TYPES(vertices.scalar_type(), "ipc_contact_statistics", [&] {
      using T = scalar_t;
      const CandidateStencil st{faces.data_ptr<int64_t>(), edges.data_ptr<int64_t>(),
                                fv.data_ptr<int64_t>(), ee.data_ptr<int64_t>(), fv.size(0)};
      launch_rows(L::ordered, vertices, fv, ee, extents,
                  ContactStatisticsFunctor<T>{{st, vertices.data_ptr<T>(), nullptr},
                                              vertex_body.data_ptr<int64_t>(), num_bodies,
                                              contacts.data_ptr<int64_t>(),
                                              min_distance.data_ptr<T>()});
    });
    return {contacts, min_distance};
  }
  at::Tensor distance = at::empty({n}, opt);
  const CandidateStencil st{faces.data_ptr<int64_t>(), edges.data_ptr<int64_t>(),
                            fv.data_ptr<int64_t>(), ee.data_ptr<int64_t>(), fv.size(0)};
  AT_DISPATCH_FLOATING_TYPES(vertices.scalar_type(), "ipc_contact_statistics", [&] {
    L::cheap(vertices, n,
             CandidateDistanceFunctor<scalar_t>{st, vertices.data_ptr<scalar_t>(),
                                                distance.data_ptr<scalar_t>()});
    // A count and the smallest distance per environment, in one pass over the rows (never NaN:
    // see the functor).
    int64_t* count = contacts.data_ptr<int64_t>();
    scalar_t* smallest = min_distance.data_ptr<scalar_t>();
    const scalar_t* d = distance.data_ptr<scalar_t>();
    const int64_t* body = vertex_body.data_ptr<int64_t>();
    for (int64_t i = 0; i < n; ++i) {
      if (st.padded(i)) continue;
      int64_t id[4];
      st.ids(i, id);
      const int64_t e = body[id[0]] / num_bodies;
      ++count[e];
      if (d[i] < smallest[e]) smallest[e] = d[i];
    }
  });
  return {contacts, min_distance};
}

inline void check_contact_statistics_inputs(const at::Tensor& vertices, const at::Tensor& faces,
                                            const at::Tensor& edges,
                                            const at::Tensor& vertex_body, const at::Tensor& fv,
                                            const at::Tensor& ee, int64_t num_envs,
                                            int64_t num_bodies) {
  check_mesh(vertices, faces, edges, std::nullopt);
  TORCH_CHECK(num_envs > 0 && num_bodies > 0, "num_envs, num_bodies: expected > 0, got ",
              num_envs, ", ", num_bodies);
  check_index_input(vertex_body, "vertex_body", {vertices.size(0)}, num_envs * num_bodies);
  check_same_device(vertex_body, "vertex_body", vertices, "vertices");
  check_candidates(vertices, faces, edges, fv, ee);
}

template <typename L>
std::tuple<at::Tensor, at::Tensor> ipc_contact_statistics_impl(
    const at::Tensor& vertices, const at::Tensor& faces, const at::Tensor& edges,
    const at::Tensor& vertex_body, const at::Tensor& fv, const at::Tensor& ee, int64_t num_envs,
    int64_t num_bodies, const std::optional<at::Tensor>& extents) {
  check_float_input(vertices, "vertices", {-1, 3});
  check_contact_statistics_inputs(vertices, faces, edges, vertex_body, fv, ee, num_envs,
                                  num_bodies);
  check_extents(extents, "extents", fv);
  return contact_statistics<L>(vertices, faces, edges, vertex_body, fv, ee, num_envs, num_bodies,
                               extents);
}

template <typename L>
std::tuple<at::Tensor, at::Tensor, at::Tensor> ipc_affine_contact_forces_impl(
    const at::Tensor& vertices, const at::Tensor& lagged, const at::Tensor& rest,
    const at::Tensor& faces, const at::Tensor& edges, const at::Tensor& vertex_body,
    const at::Tensor& fv, const at::Tensor& ee, const at::Tensor& lag_fv,
    const at::Tensor& lag_ee, const at::Tensor& lag_mu, int64_t num_envs, int64_t num_bodies,
    double dt, double dhat, double kappa, double eps_v, const std::optional<at::Tensor>& extents,
    const std::optional<at::Tensor>& lag_extents) {
  check_lagged_vertices(vertices, "vertices", lagged, rest);
  check_contact_statistics_inputs(vertices, faces, edges, vertex_body, fv, ee, num_envs,
                                  num_bodies);
  check_candidates(vertices, faces, edges, lag_fv, lag_ee);
  check_float_input(lag_mu, "lag_mu", {lag_fv.size(0) + lag_ee.size(0)});
  check_same_device_dtype(lag_mu, "lag_mu", vertices, "vertices");
  TORCH_CHECK(dt > 0 && dhat > 0 && kappa >= 0 && eps_v > 0,
              "dt, dhat, eps_v: expected > 0 and kappa >= 0, got ", dt, ", ", dhat, ", ", eps_v,
              ", ", kappa);
  if (const auto cut = host_rows_in_use<L>(fv, ee, lag_fv, lag_ee, lag_mu, extents, lag_extents)) {
    const auto& [c, lag] = *cut;
    return ipc_affine_contact_forces_impl<L>(vertices, lagged, rest, faces, edges, vertex_body, c.fv,
                                             c.ee, lag.fv, lag.ee, lag.per_row, num_envs,
                                             num_bodies, dt, dhat, kappa, eps_v, std::nullopt,
                                             std::nullopt);
  }
  at::Tensor forces = at::zeros({num_envs * num_bodies, 3}, vertices.options());
  const int64_t n = fv.size(0) + ee.size(0), nlag = lag_fv.size(0) + lag_ee.size(0);
  if constexpr (!launcher_sums_on_host<L>::value) {
    AT_DISPATCH_FLOATING_TYPES(vertices.scalar_type(), "ipc_affine_contact_forces", [&] {
      using T = scalar_t;
      const int64_t* body = vertex_body.data_ptr<int64_t>();
      if (n > 0) {
        const auto barrier =
            barrier_functor<T>(vertices, rest, faces, edges, fv, ee, dhat, kappa, 1);
        launch_rows(L::ordered, vertices, fv, ee, extents,
                    BarrierForceSumFunctor<T>{barrier, body, forces.data_ptr<T>()});
      }
      if (nlag > 0) {
        const at::Tensor u = vertices.sub(lagged);
        const auto friction = friction_functor<T>(u, lagged, rest, faces, edges, lag_fv, lag_ee,
                                                  dhat, kappa, eps_v * dt);
        launch_rows(L::ordered, vertices, lag_fv, lag_ee, lag_extents,
                    FrictionForceSumFunctor<T>{friction, lag_mu.data_ptr<T>(), body,
                                               forces.data_ptr<T>()});
      }
    });
  } else {
    // −g of each stencil vertex into its body, candidate by candidate, in order; padding rows
    // have g = 0 and stencil -1, sent to body 0.
    auto add_forces = [&](const at::Tensor& stencils, const at::Tensor& g) {
      const at::Tensor bodies = vertex_body.index_select(0, stencils.reshape(-1).clamp_min(0));
      add_rows_in_order(forces, bodies, g.reshape({-1, 3}), -1);
    };
    if (n > 0) {
      const at::Tensor stencils =
          candidate_bodies(faces, edges, fv, ee, vertex_body, L::cheap).stencils;
      add_forces(stencils, std::get<1>(ipc_barrier_potential_impl(vertices, rest, faces, edges, fv,
                                                                  ee, dhat, kappa, 1, false,
                                                                  L::cheap)));
    }
    if (nlag > 0) {
      const at::Tensor stencils =
          candidate_bodies(faces, edges, lag_fv, lag_ee, vertex_body, L::cheap).stencils;
      at::Tensor g = ipc_friction_impl(vertices.sub(lagged), lagged, rest, faces, edges, lag_fv,
                                       lag_ee, dhat, kappa, 1.0, eps_v * dt, 1, L::cheap);
      add_forces(stencils, g.mul_(lag_mu.unsqueeze(1)));
    }
  }
  auto [contacts, min_distance] = contact_statistics<L>(vertices, faces, edges, vertex_body, fv, ee,
                                                        num_envs, num_bodies, extents);
  return {forces, contacts, min_distance};
}

template <typename L>
at::Tensor ipc_collision_free_steps_impl(const at::Tensor& v0, const at::Tensor& v1,
                                         const at::Tensor& faces, const at::Tensor& edges,
                                         const at::Tensor& fv, const at::Tensor& ee,
                                         const at::Tensor& vertex_env, int64_t num_envs,
                                         double min_distance, double conservative_rescaling,
                                         int64_t max_iterations,
                                         const std::optional<at::Tensor>& extents) {
  TORCH_CHECK(num_envs > 0, "num_envs: expected > 0, got ", num_envs);
  check_index_input(vertex_env, "vertex_env", {v0.size(0)}, num_envs);
  check_same_device(vertex_env, "vertex_env", v0, "vertices_t0");
  check_extents(extents, "extents", fv);
  if constexpr (launcher_sums_on_host<L>::value) {
    if (extents.has_value()) {
      const RowsInUse c = rows_in_use(fv, ee, extents);
      return ipc_collision_free_steps_impl<L>(v0, v1, faces, edges, c.fv, c.ee, vertex_env,
                                              num_envs, min_distance, conservative_rescaling,
                                              max_iterations, std::nullopt);
    }
  }
  at::Tensor step = at::ones({num_envs}, v0.options());
  if constexpr (!launcher_sums_on_host<L>::value) {
    check_ccd_args(v0, v1, faces, edges, fv, ee, min_distance, 1.0, conservative_rescaling,
                   max_iterations);
    AT_DISPATCH_FLOATING_TYPES(v0.scalar_type(), "ipc_collision_free_steps", [&] {
      using T = scalar_t;
      const CandidateStencil st{faces.data_ptr<int64_t>(), edges.data_ptr<int64_t>(),
                                fv.data_ptr<int64_t>(), ee.data_ptr<int64_t>(), fv.size(0)};
      const CcdParams prm{min_distance, 1.0, conservative_rescaling, max_iterations};
      launch_rows(L::ordered, v0, fv, ee, extents,
                  CollisionFreeStepFunctor<T>{{st, v0.data_ptr<T>(), v1.data_ptr<T>(), prm, nullptr},
                                              vertex_env.data_ptr<int64_t>(), step.data_ptr<T>()});
    });
    return step;
  }
  const at::Tensor toi = ipc_ccd_impl(v0, v1, faces, edges, fv, ee, min_distance, 1.0,
                                      conservative_rescaling, max_iterations, L::heavy);
  AT_DISPATCH_FLOATING_TYPES(v0.scalar_type(), "ipc_collision_free_steps", [&] {
    const CandidateStencil st{faces.data_ptr<int64_t>(), edges.data_ptr<int64_t>(),
                              fv.data_ptr<int64_t>(), ee.data_ptr<int64_t>(), fv.size(0)};
    const scalar_t* t = toi.data_ptr<scalar_t>();
    const int64_t* env = vertex_env.data_ptr<int64_t>();
    scalar_t* out = step.data_ptr<scalar_t>();
    for (int64_t i = 0; i < toi.size(0); ++i) {
      if (st.padded(i) || t[i] >= scalar_t(1)) continue;
      int64_t id[4];
      st.ids(i, id);
      scalar_t& e = out[env[id[0]]];
      const scalar_t ti = t[i] > scalar_t(0) ? t[i] : scalar_t(0);  // NaN: 0
      if (ti < e) e = ti;
    }
  });
  return step;
}

}  // namespace contactnet

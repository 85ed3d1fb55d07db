// The Newton loop's per-environment bookkeeping as one op each, so an iteration of the stepper
// costs two launches here instead of a few dozen small tensor ops (on a CPU each of those costs
// microseconds of dispatch, more than its arithmetic at the stepper's sizes).
//
// ipc_newton_check(dq (E, B, 12), radius (E, B), limit, done (E,) bool, converged (E,) bool,
//     iterations (E,) int64) -> dq, done, converged, iterations: an environment whose
//     displacement bound max_b (|Δp_b| + ‖ΔA_b‖_F · radius_b) is <= limit (not NaN) is small;
//     converged |= small & ~done, done |= small, iterations += ~done (the new done), and the
//     rows of done environments of dq are zeroed.
//
// ipc_line_search_accept(q (E, B, 12), trial (E, B, 12), x (V, 3), x_trial (V, 3),
//     vertex_env (V,) int64, energy (E,), trial_energy (E,), accepted (E,) bool, alpha (E,))
//     -> q, x, energy, accepted, alpha: ok = trial_energy <= energy + 1e-12 |energy| and not yet
//     accepted; where ok, q, the environment's vertices x and energy take the trial's;
//     accepted |= ok; alpha halves where still not accepted.
//
// ipc_relative_displacement_bound(dq (..., E, B, 12), radius (E, B), present (E, B) bool)
//     -> (..., E): how far any point of an environment's present bodies moves under dq relative
//     to one translation shared by them, s = (min_b Δp_b + max_b Δp_b) / 2 per coordinate:
//     max_b (|Δp_b − s| + ‖ΔA_b‖_F · radius_b) over present bodies, 0 without any (NaN if a
//     present body's is NaN). contact_search.relative_displacement_bound documents its use.
//
// All are elementwise (no sums across threads), out of place, float32 or float64, one device;
// the same comparisons and rounding as the torch expressions they replace, except that the
// displacement bound's norms may round differently from torch's in the last bit (the order of
// their sums), which changes a verdict only for a bound exactly at the limit.
#pragma once

#include <cmath>
#include <limits>
#include <tuple>
#include <vector>

#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>

#include "common/checks.h"
#include "common/macros.h"

namespace contactnet {

// |Δp − s| + ‖ΔA‖_F · radius: how far any point of a body (|x0| <= radius) moves under the state
// change d (12: Δp, then the rows of ΔA), relative to the translation s.
template <typename T>
CN_HD T body_move_bound(const T* d, const T s[3], T radius) {
  T p2 = T(0), a2 = T(0);
  for (int c = 0; c < 3; ++c) {
    const T r = d[c] - s[c];
    p2 += r * r;
  }
  for (int k = 3; k < 12; ++k) a2 += d[k] * d[k];
  return std::sqrt(p2) + std::sqrt(a2) * radius;
}

template <typename T>
struct NewtonCheckFunctor {
  const T* dq;      // (E, B, 12)
  const T* radius;  // (E, B)
  T limit;
  int64_t B;
  const bool* done;
  const bool* converged;
  const int64_t* iterations;
  T* dq_out;
  bool* done_out;
  bool* converged_out;
  int64_t* iterations_out;

  CN_HD void operator()(int64_t e) const {
    const T none[3] = {T(0), T(0), T(0)};
    T bound = T(0);
    bool nan = false;
    for (int64_t b = 0; b < B; ++b) {
      const T v = body_move_bound(dq + (e * B + b) * 12, none, radius[e * B + b]);
      nan |= v != v;
      bound = v > bound ? v : bound;
    }
    const bool small = !nan && bound <= limit;
    const bool was_done = done[e];
    const bool now_done = was_done || small;
    converged_out[e] = converged[e] || (small && !was_done);
    done_out[e] = now_done;
    iterations_out[e] = iterations[e] + (now_done ? 0 : 1);
    for (int64_t k = e * B * 12; k < (e + 1) * B * 12; ++k) dq_out[k] = now_done ? T(0) : dq[k];
  }
};

template <typename T>
struct RelativeBoundFunctor {
  const T* dq;            // (K, E, B, 12)
  const T* radius;        // (E, B)
  const bool* present;    // (E, B)
  int64_t E, B;
  T* out;                 // (K, E)

  CN_HD void operator()(int64_t ke) const {
    const int64_t e = ke % E;
    const T* d = dq + ke * B * 12;
    T lo[3], hi[3];
    bool any = false;
    for (int64_t b = 0; b < B; ++b) {
      if (!present[e * B + b]) continue;
      for (int c = 0; c < 3; ++c) {
        const T v = d[12 * b + c];
        lo[c] = !any || v < lo[c] ? v : lo[c];
        hi[c] = !any || v > hi[c] ? v : hi[c];
      }
      any = true;
    }
    T shared[3];
    for (int c = 0; c < 3 && any; ++c) shared[c] = T(0.5) * (lo[c] + hi[c]);
    T bound = T(0);
    bool nan = false;
    for (int64_t b = 0; b < B && any; ++b) {
      if (!present[e * B + b]) continue;
      const T v = body_move_bound(d + 12 * b, shared, radius[e * B + b]);
      nan |= v != v;
      bound = v > bound ? v : bound;
    }
    out[ke] = nan ? std::numeric_limits<T>::quiet_NaN() : bound;
  }
};

template <typename T>
struct AcceptEnvFunctor {
  const T* q;
  const T* trial;
  const T* energy;
  const T* trial_energy;
  const bool* accepted;
  const T* alpha;
  int64_t per_env;  // B · 12
  T* q_out;
  T* energy_out;
  bool* accepted_out;
  T* alpha_out;
  bool* ok_out;

  CN_HD void operator()(int64_t e) const {
    const T en = energy[e];
    const T slack = T(1e-12) * std::fabs(en);
    const bool ok = trial_energy[e] <= en + slack && !accepted[e];
    ok_out[e] = ok;
    energy_out[e] = ok ? trial_energy[e] : en;
    const bool acc = accepted[e] || ok;
    accepted_out[e] = acc;
    alpha_out[e] = acc ? alpha[e] : T(0.5) * alpha[e];
    const T* src = ok ? trial : q;
    for (int64_t k = e * per_env; k < (e + 1) * per_env; ++k) q_out[k] = src[k];
  }
};

template <typename T>
struct AcceptVertexFunctor {
  const T* x;
  const T* x_trial;
  const int64_t* vertex_env;
  const bool* ok;
  T* x_out;

  CN_HD void operator()(int64_t v) const {
    const T* src = ok[vertex_env[v]] ? x_trial : x;
    for (int c = 0; c < 3; ++c) x_out[3 * v + c] = src[3 * v + c];
  }
};

template <typename L>
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> ipc_newton_check_impl(
    const at::Tensor& dq, const at::Tensor& radius, double limit, const at::Tensor& done,
    const at::Tensor& converged, const at::Tensor& iterations) {
  check_float_input(dq, "dq", {-1, -1, 12});
  const int64_t E = dq.size(0), B = dq.size(1);
  check_float_input(radius, "radius", {E, B});
  check_same_device_dtype(radius, "radius", dq, "dq");
  const std::pair<const at::Tensor*, const char*> masks[] = {{&done, "done"}, {&converged, "converged"}};
  for (const auto& [t, name] : masks) {
    check_bool_input(*t, name, {E});
    check_same_device(*t, name, dq, "dq");
  }
  check_input(iterations, "iterations", {E});
  TORCH_CHECK(iterations.scalar_type() == at::kLong, "iterations: expected int64, got ",
              iterations.scalar_type());
  check_same_device(iterations, "iterations", dq, "dq");
  at::Tensor dq_out = at::empty_like(dq), done_out = at::empty_like(done),
             converged_out = at::empty_like(converged), iterations_out = at::empty_like(iterations);
  AT_DISPATCH_FLOATING_TYPES(dq.scalar_type(), "ipc_newton_check", [&] {
    L::cheap(dq, E,
             NewtonCheckFunctor<scalar_t>{dq.data_ptr<scalar_t>(), radius.data_ptr<scalar_t>(),
                                          scalar_t(limit), B, done.data_ptr<bool>(),
                                          converged.data_ptr<bool>(), iterations.data_ptr<int64_t>(),
                                          dq_out.data_ptr<scalar_t>(), done_out.data_ptr<bool>(),
                                          converged_out.data_ptr<bool>(),
                                          iterations_out.data_ptr<int64_t>()});
  });
  return {dq_out, done_out, converged_out, iterations_out};
}

template <typename L>
at::Tensor ipc_relative_displacement_bound_impl(const at::Tensor& dq, const at::Tensor& radius,
                                                const at::Tensor& present) {
  TORCH_CHECK(dq.dim() >= 3 && dq.size(-1) == 12,
              "dq: expected shape (..., E, B, 12), got ", dq.sizes());
  const int64_t E = dq.size(-3), B = dq.size(-2);
  TORCH_CHECK(dq.is_contiguous(), "dq: expected a contiguous tensor");
  TORCH_CHECK(dq.scalar_type() == at::kFloat || dq.scalar_type() == at::kDouble,
              "dq: expected float32 or float64, got ", dq.scalar_type());
  check_float_input(radius, "radius", {E, B});
  check_same_device_dtype(radius, "radius", dq, "dq");
  check_bool_input(present, "present", {E, B});
  check_same_device(present, "present", dq, "dq");
  std::vector<int64_t> shape(dq.sizes().begin(), dq.sizes().end() - 2);
  at::Tensor out = at::empty(shape, dq.options());
  AT_DISPATCH_FLOATING_TYPES(dq.scalar_type(), "ipc_relative_displacement_bound", [&] {
    L::cheap(dq, out.numel(),
             RelativeBoundFunctor<scalar_t>{dq.data_ptr<scalar_t>(), radius.data_ptr<scalar_t>(),
                                            present.data_ptr<bool>(), E, B,
                                            out.data_ptr<scalar_t>()});
  });
  return out;
}

template <typename L>
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> ipc_line_search_accept_impl(
    const at::Tensor& q, const at::Tensor& trial, const at::Tensor& x, const at::Tensor& x_trial,
    const at::Tensor& vertex_env, const at::Tensor& energy, const at::Tensor& trial_energy,
    const at::Tensor& accepted, const at::Tensor& alpha) {
  check_float_input(q, "q", {-1, -1, 12});
  const int64_t E = q.size(0), B = q.size(1);
  check_float_input(trial, "trial", {E, B, 12});
  check_float_input(x, "x", {-1, 3});
  const int64_t V = x.size(0);
  check_float_input(x_trial, "x_trial", {V, 3});
  check_index_input(vertex_env, "vertex_env", {V}, E);
  const std::pair<const at::Tensor*, const char*> floats[] = {
      {&trial, "trial"}, {&x, "x"}, {&x_trial, "x_trial"}, {&energy, "energy"},
      {&trial_energy, "trial_energy"}, {&alpha, "alpha"}};
  for (const auto& [t, name] : floats) check_same_device_dtype(*t, name, q, "q");
  check_float_input(energy, "energy", {E});
  check_float_input(trial_energy, "trial_energy", {E});
  check_float_input(alpha, "alpha", {E});
  check_bool_input(accepted, "accepted", {E});
  check_same_device(accepted, "accepted", q, "q");
  check_same_device(vertex_env, "vertex_env", q, "q");
  at::Tensor q_out = at::empty_like(q), x_out = at::empty_like(x), energy_out = at::empty_like(energy),
             accepted_out = at::empty_like(accepted), alpha_out = at::empty_like(alpha),
             ok = at::empty_like(accepted);
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "ipc_line_search_accept", [&] {
    L::cheap(q, E,
             AcceptEnvFunctor<scalar_t>{q.data_ptr<scalar_t>(), trial.data_ptr<scalar_t>(),
                                        energy.data_ptr<scalar_t>(), trial_energy.data_ptr<scalar_t>(),
                                        accepted.data_ptr<bool>(), alpha.data_ptr<scalar_t>(), B * 12,
                                        q_out.data_ptr<scalar_t>(), energy_out.data_ptr<scalar_t>(),
                                        accepted_out.data_ptr<bool>(), alpha_out.data_ptr<scalar_t>(),
                                        ok.data_ptr<bool>()});
    L::cheap(q, V,
             AcceptVertexFunctor<scalar_t>{x.data_ptr<scalar_t>(), x_trial.data_ptr<scalar_t>(),
                                           vertex_env.data_ptr<int64_t>(), ok.data_ptr<bool>(),
                                           x_out.data_ptr<scalar_t>()});
  });
  return {q_out, x_out, energy_out, accepted_out, alpha_out};
}

}  // namespace contactnet

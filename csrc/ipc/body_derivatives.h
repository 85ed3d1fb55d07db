// Fused chain rule from contact stencils to the two affine bodies of each candidate (ZeMa eq. 7–8).
//
// ipc_body_pair_derivatives(local_gradient (N, 12), local_hessian (N, 12, 12),
//                           stencils (N, 4) int64, is_face_vertex (N,) bool, rest_vertices (V, 3))
//   -> gradient (N, 2, 12), hessian (N, 2, 2, 12, 12).
//   Candidate n's stencil (p | t0 t1 t2) when is_face_vertex, else (ea0 ea1 | eb0 eb1), splits
//   1 | 3 or 2 | 2 between its bodies s = 0, 1. Each body is affine, x = A x0 + p with
//   q = (p, a1, a2, a3) (a_i the rows of A), so a vertex's Jacobian is ∂x_i/∂q_k = x̄_α for the
//   DOF k = (i, α) (x̄ = (1, x0): α = 0 is p_i, α > 0 is A_{i,α-1}) and 0 otherwise. Hence
//     gradient[n, s, k(i,α)]          = Σ_{v∈s} g[v,i] x̄_v[α]
//     hessian[n, s, t, k(i,α), l(j,β)] = Σ_{v∈s, w∈t} H[v,i; w,j] x̄_v[α] x̄_w[β]
//   in q order: the body pair's 24×24 Hessian as its four 12×12 blocks [s, t] and its 24-vector
//   gradient, without forming 12×24 Jacobians. Rows of -1 in stencils (fixed-capacity padding)
//   give zeros. float32 or float64.
//
// ipc_body_pair_derivatives_sum(local_gradient, local_hessian, stencils, is_face_vertex,
//                               rest_vertices, body_index (N, 2) int64, block_index (N, 2, 2)
//                               int64, num_bodies, num_blocks)
//   -> gradient (num_bodies, 12), hessian (num_blocks, 12, 12): the same per-candidate blocks summed
//   where the caller's system wants them (gradient[n, s] into row body_index[n, s], hessian[n, s, t]
//   into row block_index[n, s, t]; padding rows add nothing), without materialising N × 576
//   values. The CPU adds candidates serially in order (deterministic, the order of index_add_);
//   CUDA adds atomically.
#pragma once

#include <tuple>

#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>

#include "common/checks.h"
#include "common/macros.h"
#include "ipc/ipc.h"

namespace contactnet {

// One index per (candidate n, body s, body t): the 12×12 block [s, t], and body s's gradient
// when t == 0. Four independent indices per candidate keep a CUDA thread's state small.
template <typename T>
struct BodyPairDerivativesFunctor {
  const T* g;             // (N, 12)
  const T* H;             // (N, 12, 12), or null: gradients only
  const int64_t* st;      // (N, 4)
  const bool* is_fv;      // (N,)
  const T* rest;          // (V, 3)
  T* grad;                // (N, 2, 12), or (num_bodies, 12) when summing
  T* hess;                // (N, 2, 2, 12, 12), or (num_blocks, 12, 12) when summing
  const int64_t* body_index;   // (N, 2) gradient rows when summing, else null
  const int64_t* block_index;  // (N, 2, 2) Hessian rows when summing into blocks, else null
  // When > 0 (summing, block_index null): hess is (E, 12B, 12B) dense per environment, B =
  // dense_bodies, and block [s, t] adds at the rows and columns of bodies body_index[n, s], [n, t]
  // (flat ids e·B + b).
  int64_t dense_bodies = 0;

  // Summing: the CPU launch is serial, so a plain add; CUDA threads add concurrently.
  static CN_HD void add(T* p, T v) {
#if defined(__CUDA_ARCH__)
    atomicAdd(p, v);
#else
    *p += v;
#endif
  }

  // q index of the DOF (coordinate i, x̄ component α): p_i, then the rows of A.
  static CN_HD int dof(int i, int a) { return a == 0 ? i : 3 + 3 * i + a - 1; }

  // Part [s, t] of a candidate whose stencil sv (4 vertex ids, split 1 | 3 between its bodies
  // when is_fv, else 2 | 2) has derivatives gn (12) and Hn (144, or null): the 12×12 block into
  // out when it is nonzero (returned; a candidate beyond d̂ has a zero Hessian and skips the
  // products), and body s's gradient into gout when t == 0.
  static CN_HD bool part(const T* gn, const T* Hn, const int64_t* sv, bool is_fv, const T* rest,
                         int s, int t, T* out, T* gout) {
    const int split = is_fv ? 1 : 2;  // stencil vertices [0, split) are body 0's
    const int s0 = s == 0 ? 0 : split, s1 = s == 0 ? split : 4;
    const int t0 = t == 0 ? 0 : split, t1 = t == 0 ? split : 4;
    T xbar[4][4];
    for (int v = 0; v < 4; ++v) {
      xbar[v][0] = T(1);
      for (int c = 0; c < 3; ++c) xbar[v][1 + c] = rest[3 * sv[v] + c];
    }
    bool nonzero = false;
    for (int r = 3 * s0; r < 3 * s1 && Hn && !nonzero; ++r)
      for (int c = 3 * t0; c < 3 * t1; ++c) nonzero |= Hn[r * 12 + c] != T(0);
    for (int i = 0; i < 3 && nonzero; ++i)
      for (int j = 0; j < 3; ++j) {
        // u[v][β] = Σ_{w∈t} H[v,i; w,j] x̄_w[β], then M[α][β] = Σ_{v∈s} x̄_v[α] u[v][β]
        T M[4][4] = {};
        for (int v = s0; v < s1; ++v) {
          T u[4] = {};
          for (int w = t0; w < t1; ++w) {
            const T h = Hn[(3 * v + i) * 12 + 3 * w + j];
            for (int b = 0; b < 4; ++b) u[b] += h * xbar[w][b];
          }
          for (int a = 0; a < 4; ++a)
            for (int b = 0; b < 4; ++b) M[a][b] += xbar[v][a] * u[b];
        }
        for (int a = 0; a < 4; ++a)
          for (int b = 0; b < 4; ++b) out[dof(i, a) * 12 + dof(j, b)] = M[a][b];
      }
    if (t == 0)
      for (int i = 0; i < 3; ++i)
        for (int a = 0; a < 4; ++a) {
          T acc = T(0);
          for (int v = s0; v < s1; ++v) acc += gn[3 * v + i] * xbar[v][a];
          gout[dof(i, a)] = acc;
        }
    return nonzero;
  }

  // Adds block (144) at the rows of flat body bs and the columns of bt (e·B + b, one
  // environment) of the dense per-environment systems hess (E, 12B, 12B).
  static CN_HD void add_dense(T* hess, int64_t B, int64_t bs, int64_t bt, const T* block) {
    const int64_t ld = 12 * B;
    T* dst = hess + bs / B * ld * ld + 12 * (bs % B) * ld + 12 * (bt % B);
    for (int k = 0; k < 12; ++k)
      for (int l = 0; l < 12; ++l) add(dst + k * ld + l, block[12 * k + l]);
  }

  CN_HD void operator()(int64_t index) const {
    const int64_t n = index / 4;
    const int s = static_cast<int>(index / 2 % 2), t = static_cast<int>(index % 2);
    const bool sum = body_index != nullptr;
    if (!H && t != 0) return;
    T block[144], gblock[12];
    T* out = sum ? block : hess + index * 144;
    T* gout = sum ? gblock : grad + (2 * n + s) * 12;
    const int64_t* sv = st + 4 * n;
    if (sv[0] < 0) {  // padding
      if (sum) return;
      for (int k = 0; k < 144; ++k) out[k] = T(0);
      if (t == 0)
        for (int k = 0; k < 12; ++k) gout[k] = T(0);
      return;
    }
    const bool nonzero =
        part(g + n * 12, H ? H + n * 144 : nullptr, sv, is_fv[n], rest, s, t, out, gout);
    if (!nonzero && !sum)
      for (int k = 0; k < 144; ++k) out[k] = T(0);
    if (nonzero && sum && dense_bodies > 0) {
      add_dense(hess, dense_bodies, body_index[2 * n + s], body_index[2 * n + t], block);
    } else if (nonzero && sum) {
      T* dst = hess + block_index[index] * 144;
      for (int k = 0; k < 144; ++k) add(dst + k, block[k]);
    }
    if (t == 0 && sum) {
      T* dst = grad + body_index[2 * n + s] * 12;
      for (int k = 0; k < 12; ++k) add(dst + k, gblock[k]);
    }
  }
};

// Friction's derivatives carried to its two bodies without 12×12 stencil Hessians. Its stencil
// Hessian is μ N T M Tᵀ with T's row (v, i) = c_v P_j[i] (friction.h), and x_v[i] depends on
// q(i, α) through x̄_v[α] alone, so the body pair's block [s, t] is a Kronecker product,
//   hessian[s, t][k(i,α), l(j,β)] = K[i][j] C_s[α] C_t[β],  K = μ N P M Pᵀ,  C_s = Σ_{v∈s} c_v x̄_v,
// and part s of the gradient is g[i] C_s[α] with g = μ N f₁/‖u‖ P u: 144 products a block
// where the general chain rule takes ~430. The same sums as that rule, in another order.
//
// First pass, one index per candidate: its factors scaled by μ_n h² (the potential's).
constexpr int kFrictionFactors = 21;  // K (9), g (3), C_0 (4), C_1 (4), active flag

template <typename T>
struct FrictionBodyFactorsFunctor {
  FrictionFunctor<T> friction;  // its order and out are unused
  const T* rest;                // (V, 3)
  const T* mu;                  // (N,) μ_n
  T h2;
  T* out;                       // (N, kFrictionFactors)

  CN_HD void operator()(int64_t n) const { factors(n, out + kFrictionFactors * n); }

  // Candidate n's factors into o (kFrictionFactors; all zero, the flag too, without friction).
  CN_HD void factors(int64_t n, T* o) const {
    for (int k = 0; k < kFrictionFactors; ++k) o[k] = T(0);
    FrictionFrame<T> fr;
    T mu_n, u[2], y;
    if (!friction.state(n, fr, mu_n, u, y)) return;
    const T s = (mu[n] * h2) * mu_n;
    const T f1y = friction_f1_over_y(y, friction.eps_v);
    // M = f₂ u uᵀ + f₁/‖u‖ I  (M = (2/ε) I at u = 0), as FrictionFunctor's Hessian.
    const T f2 = y > T(0) ? friction_f2(y, friction.eps_v) : T(0);
    const T M[2][2] = {{s * (f2 * u[0] * u[0] + f1y), s * f2 * u[0] * u[1]},
                       {s * f2 * u[1] * u[0], s * (f2 * u[1] * u[1] + f1y)}};
    const T P[2][3] = {{fr.P[0].x, fr.P[0].y, fr.P[0].z}, {fr.P[1].x, fr.P[1].y, fr.P[1].z}};
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 3; ++j) {
        T k = T(0);
        for (int a = 0; a < 2; ++a)
          for (int b = 0; b < 2; ++b) k += P[a][i] * M[a][b] * P[b][j];
        o[3 * i + j] = k;
      }
      o[9 + i] = s * f1y * (P[0][i] * u[0] + P[1][i] * u[1]);
    }
    int64_t id[4];
    const bool is_ee = friction.st.ids(n, id);
    const int split = is_ee ? 2 : 1;  // stencil vertices [0, split) are body 0's
    for (int v = 0; v < 4; ++v) {
      T* C = o + (v < split ? 12 : 16);
      C[0] += fr.c[v];
      for (int a = 0; a < 3; ++a) C[1 + a] += fr.c[v] * rest[3 * id[v] + a];
    }
    o[20] = T(1);
  }
};

// Second pass, one index per (candidate n, body s, body t), as BodyPairDerivativesFunctor's:
// block [s, t] into the dense system of the pair's environment, and body s's gradient when t == 0.
template <typename T>
struct FrictionBodyAddFunctor {
  const T* factors;     // (N, kFrictionFactors)
  const int64_t* body;  // (N, 2) flat bodies e·B + b
  int64_t B;
  T* grad;  // (E, 12B)
  T* hess;  // (E, 12B, 12B)

  CN_HD void operator()(int64_t index) const {
    const int64_t n = index / 4;
    const int s = static_cast<int>(index / 2 % 2), t = static_cast<int>(index % 2);
    add_part(factors + kFrictionFactors * n, s, t, B, body[2 * n + s], body[2 * n + t], grad, hess);
  }

  // Part [s, t] of a candidate with factors f and flat bodies bs, bt (e·B + b).
  static CN_HD void add_part(const T* f, int s, int t, int64_t B, int64_t bs, int64_t bt, T* grad,
                             T* hess) {
    using Sum = BodyPairDerivativesFunctor<T>;
    if (f[20] == T(0)) return;
    const T* Cs = f + 12 + 4 * s;
    const T* Ct = f + 12 + 4 * t;
    const int64_t ld = 12 * B;
    T* dst = hess + bs / B * ld * ld + 12 * (bs % B) * ld + 12 * (bt % B);
    for (int i = 0; i < 3; ++i)
      for (int a = 0; a < 4; ++a) {
        T* row = dst + Sum::dof(i, a) * ld;
        for (int j = 0; j < 3; ++j) {
          const T kc = f[3 * i + j] * Cs[a];
          for (int b = 0; b < 4; ++b) Sum::add(row + Sum::dof(j, b), kc * Ct[b]);
        }
      }
    if (t == 0) {
      T* g = grad + bs * 12;
      for (int i = 0; i < 3; ++i)
        for (int a = 0; a < 4; ++a) Sum::add(g + Sum::dof(i, a), f[9 + i] * Cs[a]);
    }
  }
};

inline void check_body_pair_inputs(const at::Tensor& local_gradient, const at::Tensor& local_hessian,
                                   const at::Tensor& stencils, const at::Tensor& is_face_vertex,
                                   const at::Tensor& rest) {
  check_float_input(local_gradient, "local_gradient", {-1, 12});
  check_float_input(local_hessian, "local_hessian", {-1, 12, 12});
  check_float_input(rest, "rest_vertices", {-1, 3});
  check_input(stencils, "stencils", {-1, 4});
  check_bool_input(is_face_vertex, "is_face_vertex", {-1});
  TORCH_CHECK(stencils.scalar_type() == at::kLong, "stencils: expected int64, got ",
              stencils.scalar_type());
  check_same_device_dtype(local_gradient, "local_gradient", local_hessian, "local_hessian");
  check_same_device_dtype(local_gradient, "local_gradient", rest, "rest_vertices");
  TORCH_CHECK(stencils.device() == rest.device() && is_face_vertex.device() == rest.device(),
              "stencils and is_face_vertex must be on rest_vertices' device");
  check_same_batch(local_gradient, "local_gradient", local_hessian, "local_hessian");
  check_same_batch(local_gradient, "local_gradient", stencils, "stencils");
  check_same_batch(local_gradient, "local_gradient", is_face_vertex, "is_face_vertex");
  if (stencils.numel() > 0 && values_checked_in_cpp(stencils)) {
    TORCH_CHECK_VALUE(stencils.min().item<int64_t>() >= -1 &&
                          stencils.max().item<int64_t>() < rest.size(0),
                      "stencils: indices must lie in [0, ", rest.size(0), ") (or be -1 padding)");
  }
}

template <typename T>
BodyPairDerivativesFunctor<T> body_pair_functor(const at::Tensor& local_gradient,
                                                const at::Tensor& local_hessian,
                                                const at::Tensor& stencils,
                                                const at::Tensor& is_face_vertex,
                                                const at::Tensor& rest, at::Tensor& grad,
                                                at::Tensor& hess, const int64_t* body_index,
                                                const int64_t* block_index) {
  return {local_gradient.data_ptr<T>(),
          local_hessian.defined() ? local_hessian.data_ptr<T>() : nullptr, stencils.data_ptr<int64_t>(),
          is_face_vertex.data_ptr<bool>(), rest.data_ptr<T>(), grad.data_ptr<T>(),
          hess.data_ptr<T>(), body_index, block_index};
}

template <typename Launch>
std::tuple<at::Tensor, at::Tensor> ipc_body_pair_derivatives_impl(
    const at::Tensor& local_gradient, const at::Tensor& local_hessian, const at::Tensor& stencils,
    const at::Tensor& is_face_vertex, const at::Tensor& rest, const Launch& launch) {
  check_body_pair_inputs(local_gradient, local_hessian, stencils, is_face_vertex, rest);
  const int64_t n = stencils.size(0);
  at::Tensor grad = at::empty({n, 2, 12}, rest.options());
  at::Tensor hess = at::empty({n, 2, 2, 12, 12}, rest.options());
  AT_DISPATCH_FLOATING_TYPES(rest.scalar_type(), "ipc_body_pair_derivatives", [&] {
    launch(rest, 4 * n,
           body_pair_functor<scalar_t>(local_gradient, local_hessian, stencils, is_face_vertex,
                                       rest, grad, hess, nullptr, nullptr));
  });
  return {grad, hess};
}

// `launch` must not run two indices of the CPU loop at once (they may add to one row).
template <typename Launch>
std::tuple<at::Tensor, at::Tensor> ipc_body_pair_derivatives_sum_impl(
    const at::Tensor& local_gradient, const at::Tensor& local_hessian, const at::Tensor& stencils,
    const at::Tensor& is_face_vertex, const at::Tensor& rest, const at::Tensor& body_index,
    const at::Tensor& block_index, int64_t num_bodies, int64_t num_blocks, const Launch& launch) {
  check_body_pair_inputs(local_gradient, local_hessian, stencils, is_face_vertex, rest);
  TORCH_CHECK(num_bodies >= 0 && num_blocks >= 0, "num_bodies, num_blocks: expected >= 0");
  check_index_input(body_index, "body_index", {stencils.size(0), 2}, num_bodies);
  check_index_input(block_index, "block_index", {stencils.size(0), 2, 2}, num_blocks);
  TORCH_CHECK(body_index.device() == rest.device() && block_index.device() == rest.device(),
              "body_index and block_index must be on rest_vertices' device");
  const int64_t n = stencils.size(0);
  at::Tensor grad = at::zeros({num_bodies, 12}, rest.options());
  at::Tensor hess = at::zeros({num_blocks, 12, 12}, rest.options());
  AT_DISPATCH_FLOATING_TYPES(rest.scalar_type(), "ipc_body_pair_derivatives_sum", [&] {
    launch(rest, 4 * n,
           body_pair_functor<scalar_t>(local_gradient, local_hessian, stencils, is_face_vertex,
                                       rest, grad, hess, body_index.data_ptr<int64_t>(),
                                       block_index.data_ptr<int64_t>()));
  });
  return {grad, hess};
}

}  // namespace contactnet

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
#pragma once

#include <tuple>

#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include "common/checks.h"
#include "common/macros.h"
#include "ipc/ipc.h"

namespace contactnet {

// One index per (candidate n, body s, body t): the 12×12 block [s, t], and body s's gradient
// when t == 0. Four independent indices per candidate keep a CUDA thread's state small.
template <typename T>
struct BodyPairDerivativesFunctor {
  const T* g;             // (N, 12)
  const T* H;             // (N, 12, 12)
  const int64_t* st;      // (N, 4)
  const bool* is_fv;      // (N,)
  const T* rest;          // (V, 3)
  T* grad;                // (N, 2, 12)
  T* hess;                // (N, 2, 2, 12, 12)

  // q index of the DOF (coordinate i, x̄ component α): p_i, then the rows of A.
  static CN_HD int dof(int i, int a) { return a == 0 ? i : 3 + 3 * i + a - 1; }

  CN_HD void operator()(int64_t index) const {
    const int64_t n = index / 4;
    const int s = static_cast<int>(index / 2 % 2), t = static_cast<int>(index % 2);
    T* out = hess + index * 144;
    T* gout = grad + (2 * n + s) * 12;
    const int64_t* sv = st + 4 * n;
    if (sv[0] < 0) {  // padding
      for (int k = 0; k < 144; ++k) out[k] = T(0);
      if (t == 0)
        for (int k = 0; k < 12; ++k) gout[k] = T(0);
      return;
    }
    const int split = is_fv[n] ? 1 : 2;  // stencil vertices [0, split) are body 0's
    const int s0 = s == 0 ? 0 : split, s1 = s == 0 ? split : 4;
    const int t0 = t == 0 ? 0 : split, t1 = t == 0 ? split : 4;
    T xbar[4][4];
    for (int v = 0; v < 4; ++v) {
      xbar[v][0] = T(1);
      for (int c = 0; c < 3; ++c) xbar[v][1 + c] = rest[3 * sv[v] + c];
    }
    const T* Hn = H + n * 144;
    for (int i = 0; i < 3; ++i)
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
    if (t == 0) {
      const T* gn = g + n * 12;
      for (int i = 0; i < 3; ++i)
        for (int a = 0; a < 4; ++a) {
          T acc = T(0);
          for (int v = s0; v < s1; ++v) acc += gn[3 * v + i] * xbar[v][a];
          gout[dof(i, a)] = acc;
        }
    }
  }
};

template <typename Launch>
std::tuple<at::Tensor, at::Tensor> ipc_body_pair_derivatives_impl(
    const at::Tensor& local_gradient, const at::Tensor& local_hessian, const at::Tensor& stencils,
    const at::Tensor& is_face_vertex, const at::Tensor& rest, const Launch& launch) {
  check_float_input(local_gradient, "local_gradient", {-1, 12});
  check_float_input(local_hessian, "local_hessian", {-1, 12, 12});
  check_float_input(rest, "rest_vertices", {-1, 3});
  check_input(stencils, "stencils", {-1, 4});
  check_input(is_face_vertex, "is_face_vertex", {-1});
  TORCH_CHECK(stencils.scalar_type() == at::kLong, "stencils: expected int64, got ",
              stencils.scalar_type());
  TORCH_CHECK(is_face_vertex.scalar_type() == at::kBool, "is_face_vertex: expected bool, got ",
              is_face_vertex.scalar_type());
  check_same_device_dtype(local_gradient, "local_gradient", local_hessian, "local_hessian");
  check_same_device_dtype(local_gradient, "local_gradient", rest, "rest_vertices");
  TORCH_CHECK(stencils.device() == rest.device() && is_face_vertex.device() == rest.device(),
              "stencils and is_face_vertex must be on rest_vertices' device");
  check_same_batch(local_gradient, "local_gradient", local_hessian, "local_hessian");
  check_same_batch(local_gradient, "local_gradient", stencils, "stencils");
  check_same_batch(local_gradient, "local_gradient", is_face_vertex, "is_face_vertex");
  const int64_t n = stencils.size(0);
  if (n > 0 && can_read_values(stencils)) {
    TORCH_CHECK(stencils.min().item<int64_t>() >= -1 &&
                    stencils.max().item<int64_t>() < rest.size(0),
                "stencils: indices must lie in [0, ", rest.size(0), ") (or be -1 padding)");
  }
  at::Tensor grad = at::empty({n, 2, 12}, rest.options());
  at::Tensor hess = at::empty({n, 2, 2, 12, 12}, rest.options());
  AT_DISPATCH_FLOATING_TYPES(rest.scalar_type(), "ipc_body_pair_derivatives", [&] {
    launch(rest, 4 * n,
           BodyPairDerivativesFunctor<scalar_t>{
               local_gradient.data_ptr<scalar_t>(), local_hessian.data_ptr<scalar_t>(),
               stencils.data_ptr<int64_t>(), is_face_vertex.data_ptr<bool>(),
               rest.data_ptr<scalar_t>(), grad.data_ptr<scalar_t>(), hess.data_ptr<scalar_t>()});
  });
  return {grad, hess};
}

}  // namespace contactnet

// Batched dense SPD solves for the stepper's Newton systems on the CPU (host only; a GPU keeps
// torch's batched Cholesky).
//
// ipc_cholesky_solve(hessian (E, n, n), gradient (E, n), shift (E,), fixed (E, n) bool?) ->
//     solution (E, n), factorised (E,) bool: x = (H + shift·I)⁻¹ g per environment by Cholesky,
//     reading H's lower triangle; an environment whose shifted H is not positive definite (or not
//     finite) gets x = NaN and false. fixed: DOFs held in place (the stepper's static bodies):
//     their rows and columns of H are set to the identity's, in place, and their entries of g
//     read as 0, so their x is 0 (2n writes per DOF, where torch's index_put_ on the stepper's
//     systems costs as much as the solve).
//
// At the stepper's sizes (n ≈ 100) torch's cholesky_ex + cholesky_solve (LAPACK's potrf, then
// triangle masking and column-major copies) take 1.3× this loop for one system and 2.3–2.5× for
// 4–64 on 2 threads (left-looking, contiguous row dot products; environments in parallel).
#pragma once

#include <cmath>
#include <limits>
#include <optional>
#include <tuple>
#include <vector>

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include "common/checks.h"

#if defined(__GNUC__) || defined(__clang__)
#define CN_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define CN_ALWAYS_INLINE inline
#endif

namespace contactnet {

// Dot products start at a multiple of this many columns: a sum that skips leading zeros from
// such a column keeps every vector lane's terms (zeros aside) and their order, so the envelope
// factorisation below has the dense one's bits.
constexpr int64_t kCholeskyAlign = 16;

// L (n×n row-major, lower triangle used) ← Cholesky factor of A + shift·I; false if not positive
// definite. Row i of A's lower triangle is zero before column lead[i] (its envelope), and so is L's
// (a Cholesky factor fills in only inside the envelope): the products skip those columns. The
// stepper's bodies touch few others (a stack is a chain), so most of the dense system's blocks are
// zero; for a stack of 10 cubes the envelope holds about a fifth of the lower triangle.
template <typename T>
CN_ALWAYS_INLINE bool cholesky_factor(const T* A, T shift, int64_t n, T* L, int64_t* lead) {
  for (int64_t i = 0; i < n; ++i) {
    int64_t f = 0;
    while (f < i && A[i * n + f] == T(0)) ++f;
    lead[i] = f;
    for (int64_t k = 0; k < f; ++k) L[i * n + k] = T(0);
  }
  auto start = [](int64_t a, int64_t b) { return (a > b ? a : b) / kCholeskyAlign * kCholeskyAlign; };
  for (int64_t j = 0; j < n; ++j) {
    T* Lj = L + j * n;
    const T* Aj = A + j * n;
    T d = Aj[j] + shift;
    T s = T(0);
    const int64_t kj = start(lead[j], 0);
#pragma omp simd reduction(+ : s)
    for (int64_t k = kj; k < j; ++k) s += Lj[k] * Lj[k];
    d -= s;
    if (!(d > T(0))) return false;
    d = std::sqrt(d);
    Lj[j] = d;
    const T inv = T(1) / d;
    // Four rows at a time: four independent sums keep the adder busy (one sum is bound by the
    // add latency) and each load of row j serves four products.
    int64_t i = j + 1;
    for (; i + 4 <= n; i += 4) {
      T* L0 = L + i * n;
      T *L1 = L0 + n, *L2 = L1 + n, *L3 = L2 + n;
      int64_t first = lead[i];
      for (int64_t r = 1; r < 4; ++r) first = lead[i + r] < first ? lead[i + r] : first;
      if (first > j) continue;  // outside all four rows' envelopes: zeros already
      T t0 = T(0), t1 = T(0), t2 = T(0), t3 = T(0);
      const int64_t k0 = start(first, lead[j]);
#pragma omp simd reduction(+ : t0, t1, t2, t3)
      for (int64_t k = k0; k < j; ++k) {
        const T l = Lj[k];
        t0 += L0[k] * l;
        t1 += L1[k] * l;
        t2 += L2[k] * l;
        t3 += L3[k] * l;
      }
      L0[j] = (A[i * n + j] - t0) * inv;
      L1[j] = (A[(i + 1) * n + j] - t1) * inv;
      L2[j] = (A[(i + 2) * n + j] - t2) * inv;
      L3[j] = (A[(i + 3) * n + j] - t3) * inv;
    }
    for (; i < n; ++i) {
      if (lead[i] > j) continue;
      T* Li = L + i * n;
      T t = T(0);
      const int64_t k0 = start(lead[i], lead[j]);
#pragma omp simd reduction(+ : t)
      for (int64_t k = k0; k < j; ++k) t += Li[k] * Lj[k];
      Li[j] = (A[i * n + j] - t) * inv;
    }
  }
  return true;
}

// x ← (L Lᵀ)⁻¹ b.
template <typename T>
CN_ALWAYS_INLINE void cholesky_substitute(const T* L, const T* b, int64_t n, T* x) {
  for (int64_t i = 0; i < n; ++i) {  // L y = b
    const T* Li = L + i * n;
    T s = T(0);
#pragma omp simd reduction(+ : s)
    for (int64_t k = 0; k < i; ++k) s += Li[k] * x[k];
    x[i] = (b[i] - s) / Li[i];
  }
  for (int64_t i = n - 1; i >= 0; --i) {  // Lᵀ x = y: subtract column i once x_i is known
    x[i] /= L[i * n + i];
    const T xi = x[i];
    const T* Li = L + i * n;
#pragma omp simd
    for (int64_t k = 0; k < i; ++k) x[k] -= Li[k] * xi;
  }
}

// One environment: L ← factor of A + shift·I, x ← solution (NaN when it does not factorise).
template <typename T>
CN_ALWAYS_INLINE bool cholesky_solve_one(const T* A, T shift, int64_t n, const T* b, T* L,
                                          int64_t* lead, T* x) {
  if (cholesky_factor(A, shift, n, L, lead)) {
    cholesky_substitute(L, b, n, x);
    return true;
  }
  for (int64_t k = 0; k < n; ++k) x[k] = std::numeric_limits<T>::quiet_NaN();
  return false;
}

// Compiled twice on x86-64 Linux, for AVX2 + FMA and for the baseline, and picked at load time
// (ifunc): the dot products run 4 doubles wide with FMA where the CPU has them (1.6× at
// n = 120) without building for one machine. The two round differently (FMA, vector width):
// results are deterministic on a machine and agree across machines to rounding.
#if defined(__x86_64__) && defined(__linux__) && (defined(__GNUC__) || defined(__clang__))
#define CN_CLONES __attribute__((target_clones("arch=haswell", "default")))
#else
#define CN_CLONES
#endif
CN_CLONES inline bool cholesky_solve_f64(const double* A, double shift, int64_t n, const double* b,
                                         double* L, int64_t* lead, double* x) {
  return cholesky_solve_one(A, shift, n, b, L, lead, x);
}
CN_CLONES inline bool cholesky_solve_f32(const float* A, float shift, int64_t n, const float* b,
                                         float* L, int64_t* lead, float* x) {
  return cholesky_solve_one(A, shift, n, b, L, lead, x);
}
#undef CN_CLONES

inline bool cholesky_solve_dispatch(const double* A, double shift, int64_t n, const double* b,
                                    double* L, int64_t* lead, double* x) {
  return cholesky_solve_f64(A, shift, n, b, L, lead, x);
}
inline bool cholesky_solve_dispatch(const float* A, float shift, int64_t n, const float* b,
                                    float* L, int64_t* lead, float* x) {
  return cholesky_solve_f32(A, shift, n, b, L, lead, x);
}

// Rows and columns of the fixed DOFs of one n×n system ← the identity's; b ← g with zeros there.
template <typename T>
inline void hold_fixed_dofs(T* A, const bool* fixed, int64_t n, const T* g, T* b) {
  for (int64_t i = 0; i < n; ++i) {
    b[i] = fixed[i] ? T(0) : g[i];
    if (!fixed[i]) continue;
    for (int64_t k = 0; k < n; ++k) A[i * n + k] = A[k * n + i] = T(0);
    A[i * n + i] = T(1);
  }
}

inline std::tuple<at::Tensor, at::Tensor> ipc_cholesky_solve_cpu(
    const at::Tensor& hessian, const at::Tensor& gradient, const at::Tensor& shift,
    const std::optional<at::Tensor>& fixed) {
  check_float_input(hessian, "hessian", {-1, -1, -1});
  const int64_t E = hessian.size(0), n = hessian.size(1);
  TORCH_CHECK(hessian.size(2) == n, "hessian: expected square matrices, got shape ",
              hessian.sizes());
  check_float_input(gradient, "gradient", {E, n});
  check_float_input(shift, "shift", {E});
  check_same_device_dtype(gradient, "gradient", hessian, "hessian");
  check_same_device_dtype(shift, "shift", hessian, "hessian");
  TORCH_CHECK(hessian.is_cpu(), "hessian: expected a CPU tensor (use torch.linalg on a GPU)");
  if (fixed.has_value()) {
    TORCH_CHECK(fixed->scalar_type() == at::kBool && fixed->sizes() == gradient.sizes() &&
                    fixed->is_contiguous() && fixed->is_cpu(),
                "fixed: expected a contiguous CPU bool tensor of shape ", gradient.sizes(),
                ", got ", fixed->scalar_type(), " ", fixed->sizes());
  }
  at::Tensor x = at::empty({E, n}, gradient.options());
  at::Tensor ok = at::empty({E}, gradient.options().dtype(at::kBool));
  AT_DISPATCH_FLOATING_TYPES(hessian.scalar_type(), "ipc_cholesky_solve", [&] {
    scalar_t* H = hessian.data_ptr<scalar_t>();
    const scalar_t* g = gradient.data_ptr<scalar_t>();
    const scalar_t* sh = shift.data_ptr<scalar_t>();
    const bool* held = fixed.has_value() ? fixed->data_ptr<bool>() : nullptr;
    scalar_t* out = x.data_ptr<scalar_t>();
    bool* fact = ok.data_ptr<bool>();
    at::parallel_for(0, E, 1, [&](int64_t begin, int64_t end) {
      std::vector<scalar_t> L(n * n), b(held ? n : 0);
      std::vector<int64_t> lead(n);
      for (int64_t e = begin; e < end; ++e) {
        const scalar_t* rhs = g + e * n;
        if (held) {
          hold_fixed_dofs(H + e * n * n, held + e * n, n, rhs, b.data());
          rhs = b.data();
        }
        fact[e] = cholesky_solve_dispatch(H + e * n * n, sh[e], n, rhs, L.data(), lead.data(),
                                          out + e * n);
      }
    });
  });
  return {x, ok};
}

}  // namespace contactnet

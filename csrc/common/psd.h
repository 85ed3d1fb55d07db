// Projection of a small symmetric matrix onto the positive semi-definite cone (shared by both
// devices): H⁺ = V max(Λ, 0) Vᵀ from a cyclic Jacobi eigen-decomposition, the projection IPC
// Toolkit calls PSDProjectionMethod::CLAMP. Jacobi is used because it is branch-light, needs no
// workspace beyond the matrix and is accurate to machine precision for the ≤ 12×12 blocks here.
#pragma once

#include <cmath>
#include <limits>

#include "macros.h"

namespace contactnet {

// Upper bound on the Jacobi sweeps; convergence is quadratic and 12×12 blocks need 5–8.
constexpr int kPsdMaxSweeps = 30;

// A: n×n symmetric, row-major with row stride `ld` (n ≤ ld ≤ 12), overwritten in place with its
// projection.
template <typename T>
CN_HD void project_to_psd(T* A, int n, int ld) {
  T V[144];
  T w[12];
  T total = T(0);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      V[i * 12 + j] = T(i == j);
      total += A[i * ld + j] * A[i * ld + j];
    }
  }
  if (total == T(0)) return;
  const T tol = total * std::numeric_limits<T>::epsilon() * std::numeric_limits<T>::epsilon();
  for (int sweep = 0; sweep < kPsdMaxSweeps; ++sweep) {
    T off = T(0);
    for (int p = 0; p < n; ++p)
      for (int q = p + 1; q < n; ++q) off += A[p * ld + q] * A[p * ld + q];
    if (off <= tol) break;
    for (int p = 0; p < n; ++p) {
      for (int q = p + 1; q < n; ++q) {
        const T apq = A[p * ld + q];
        if (apq == T(0)) continue;
        // Rotation zeroing A[p][q] (Numerical Recipes §11.1): θ = (a_qq - a_pp) / (2 a_pq),
        // t = sgn(θ) / (|θ| + √(θ² + 1)), c = 1/√(t² + 1), s = t c.
        const T theta = (A[q * ld + q] - A[p * ld + p]) / (T(2) * apq);
        const T at = std::fabs(theta);
        T t = at > T(1e18) ? T(1) / (T(2) * at) : T(1) / (at + std::sqrt(theta * theta + T(1)));
        if (theta < T(0)) t = -t;
        const T c = T(1) / std::sqrt(t * t + T(1));
        const T s = t * c;
        for (int k = 0; k < n; ++k) {  // A ← A J (columns p, q)
          const T akp = A[k * ld + p], akq = A[k * ld + q];
          A[k * ld + p] = c * akp - s * akq;
          A[k * ld + q] = s * akp + c * akq;
        }
        for (int k = 0; k < n; ++k) {  // A ← Jᵀ A (rows p, q)
          const T apk = A[p * ld + k], aqk = A[q * ld + k];
          A[p * ld + k] = c * apk - s * aqk;
          A[q * ld + k] = s * apk + c * aqk;
        }
        A[p * ld + q] = A[q * ld + p] = T(0);
        for (int k = 0; k < n; ++k) {  // V ← V J
          const T vkp = V[k * 12 + p], vkq = V[k * 12 + q];
          V[k * 12 + p] = c * vkp - s * vkq;
          V[k * 12 + q] = s * vkp + c * vkq;
        }
      }
    }
  }
  for (int i = 0; i < n; ++i) w[i] = A[i * ld + i] > T(0) ? A[i * ld + i] : T(0);  // max(λ, 0)
  // A = V max(Λ, 0) Vᵀ
  for (int i = 0; i < n; ++i)
    for (int j = i; j < n; ++j) {
      T sum = T(0);
      for (int k = 0; k < n; ++k) sum += V[i * 12 + k] * w[k] * V[j * 12 + k];
      A[i * ld + j] = A[j * ld + i] = sum;
    }
}

}  // namespace contactnet

// Projection of a small symmetric matrix onto the positive semi-definite cone (shared by both
// devices): H⁺ = V max(Λ, 0) Vᵀ, the projection IPC Toolkit calls PSDProjectionMethod::CLAMP.
// The eigen-decomposition is Householder tridiagonalisation + implicit QL (about 4n³ flops, ~30×
// fewer than cyclic Jacobi on 12×12 blocks); a block whose QL does not converge, which should not
// happen, falls back to Jacobi, which always does.
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
CN_HD void project_to_psd_jacobi(T* A, int n, int ld) {
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

// sqrt(a² + b²) without overflow or underflow of the squares (float32 Hessians can be huge).
template <typename T>
CN_HD T safe_hypot(T a, T b) {
  // Fast path (nearly always taken): the larger square neither overflows nor underflows, so the
  // plain form is accurate; the QL sweeps call this once per rotation.
  const T s = a * a + b * b;
  if (s < std::numeric_limits<T>::max() &&
      s > std::numeric_limits<T>::min() / std::numeric_limits<T>::epsilon())
    return std::sqrt(s);
  const T x = std::fabs(a), y = std::fabs(b);
  const T m = x > y ? x : y;
  if (m == T(0)) return T(0);
  const T u = x / m, v = y / m;
  return m * std::sqrt(u * u + v * v);
}

// Symmetric eigen-decomposition of the n×n matrix Z (row-major, stride 12; n ≤ 12): on return
// d holds the eigenvalues and column i of Z the i-th unit eigenvector. Householder reduction to
// tridiagonal form, then the QL algorithm with implicit Wilkinson shifts (the classic tred2 /
// tqli pair). Returns false if an eigenvalue needed more than 30 QL iterations.
template <typename T>
CN_HD bool symmetric_eigen(T* Z, int n, T* d) {
  T e[12];
  // Householder: rows n-1 .. 1 are reduced in turn; Z keeps the reflectors.
  for (int i = n - 1; i > 0; --i) {
    const int l = i - 1;
    T h = T(0);
    if (l > 0) {
      T scale = T(0);
      for (int k = 0; k <= l; ++k) scale += std::fabs(Z[i * 12 + k]);
      if (scale == T(0)) {
        e[i] = Z[i * 12 + l];
      } else {
        for (int k = 0; k <= l; ++k) {
          Z[i * 12 + k] /= scale;
          h += Z[i * 12 + k] * Z[i * 12 + k];
        }
        T f = Z[i * 12 + l];
        T g = f >= T(0) ? -std::sqrt(h) : std::sqrt(h);
        e[i] = scale * g;
        h -= f * g;
        Z[i * 12 + l] = f - g;
        f = T(0);
        for (int j = 0; j <= l; ++j) {
          Z[j * 12 + i] = Z[i * 12 + j] / h;
          g = T(0);
          for (int k = 0; k <= j; ++k) g += Z[j * 12 + k] * Z[i * 12 + k];
          for (int k = j + 1; k <= l; ++k) g += Z[k * 12 + j] * Z[i * 12 + k];
          e[j] = g / h;
          f += e[j] * Z[i * 12 + j];
        }
        const T hh = f / (h + h);
        for (int j = 0; j <= l; ++j) {
          f = Z[i * 12 + j];
          e[j] = g = e[j] - hh * f;
          for (int k = 0; k <= j; ++k) Z[j * 12 + k] -= f * e[k] + g * Z[i * 12 + k];
        }
      }
    } else {
      e[i] = Z[i * 12 + l];
    }
    d[i] = h;
  }
  d[0] = T(0);
  e[0] = T(0);
  // Accumulate the reflectors into the orthogonal matrix.
  for (int i = 0; i < n; ++i) {
    const int l = i - 1;
    if (d[i] != T(0)) {
      for (int j = 0; j <= l; ++j) {
        T g = T(0);
        for (int k = 0; k <= l; ++k) g += Z[i * 12 + k] * Z[k * 12 + j];
        for (int k = 0; k <= l; ++k) Z[k * 12 + j] -= g * Z[k * 12 + i];
      }
    }
    d[i] = Z[i * 12 + i];
    Z[i * 12 + i] = T(1);
    for (int j = 0; j <= l; ++j) Z[j * 12 + i] = Z[i * 12 + j] = T(0);
  }
  // QL with implicit shifts on the tridiagonal (d, e).
  for (int i = 1; i < n; ++i) e[i - 1] = e[i];
  e[n - 1] = T(0);
  const T eps = std::numeric_limits<T>::epsilon();
  for (int l = 0; l < n; ++l) {
    int iter = 0;
    int m;
    do {
      for (m = l; m < n - 1; ++m) {
        const T dd = std::fabs(d[m]) + std::fabs(d[m + 1]);
        if (std::fabs(e[m]) <= eps * dd) break;
      }
      if (m != l) {
        if (iter++ == 30) return false;
        T g = (d[l + 1] - d[l]) / (T(2) * e[l]);
        T r = safe_hypot(g, T(1));
        g = d[m] - d[l] + e[l] / (g + (g >= T(0) ? r : -r));
        T s = T(1), c = T(1), p = T(0);
        bool underflow = false;
        for (int i = m - 1; i >= l; --i) {
          const T f = s * e[i];
          const T b = c * e[i];
          r = safe_hypot(f, g);
          e[i + 1] = r;
          if (r == T(0)) {  // recover from underflow: deflate and restart this eigenvalue
            d[i + 1] -= p;
            e[m] = T(0);
            underflow = true;
            break;
          }
          s = f / r;
          c = g / r;
          g = d[i + 1] - p;
          r = (d[i] - g) * s + T(2) * c * b;
          p = s * r;
          d[i + 1] = g + p;
          g = c * r - b;
          for (int k = 0; k < n; ++k) {
            const T zk = Z[k * 12 + i + 1];
            Z[k * 12 + i + 1] = s * Z[k * 12 + i] + c * zk;
            Z[k * 12 + i] = c * Z[k * 12 + i] - s * zk;
          }
        }
        if (underflow) continue;
        d[l] -= p;
        e[l] = g;
        e[m] = T(0);
      }
    } while (m != l);
  }
  return true;
}

// A: n×n symmetric, row-major with row stride `ld` (n ≤ ld ≤ 12), overwritten in place with its
// projection. A block that is already positive semi-definite is left untouched (returns false;
// true when A changed).
template <typename T>
CN_HD bool project_to_psd(T* A, int n, int ld) {
  T Z[144];
  T d[12];
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) Z[i * 12 + j] = A[i * ld + j];
  if (!symmetric_eigen(Z, n, d)) {
    project_to_psd_jacobi(A, n, ld);
    return true;
  }
  bool psd = true;
  for (int i = 0; i < n; ++i) {
    if (d[i] < T(0)) {
      d[i] = T(0);
      psd = false;
    }
  }
  if (psd) return false;
  for (int i = 0; i < n; ++i)  // A = Z max(Λ, 0) Zᵀ
    for (int j = i; j < n; ++j) {
      T sum = T(0);
      for (int k = 0; k < n; ++k) sum += Z[i * 12 + k] * d[k] * Z[j * 12 + k];
      A[i * ld + j] = A[j * ld + i] = sum;
    }
  return true;
}

// Projection of an energy Hessian that is blind to translations. A: K×K row-major symmetric
// (K ≤ 12), zero outside the 3 DOFs of each of the nv vertices listed in `verts` (e.g. the
// point–edge feature of a point–triangle stencil), and with A (t, …, t) = 0 for every t: the
// energy depends on differences of those vertices only. Then A = Q M Qᵀ with Q = Hₙᵥ ⊗ I₃, Hₙᵥ
// the orthonormal Helmert basis of the vectors orthogonal to (1, …, 1), and M = Qᵀ A Q of size
// 3(nv - 1); A⁺ = Q M⁺ Qᵀ, so the eigen-decomposition runs on 3(nv - 1) instead of K rows:
// 9×9 instead of 12×12 for a point–triangle or edge–edge, 6×6 for a point–edge feature.
template <typename T>
CN_HD void project_to_psd_translation_free(T* A, int K, const int* verts, int nv) {
  if (nv < 2) return;
  const int m = nv - 1, nr = 3 * m;
  // Q[k][i]: Helmert column i = (1, …, 1 (i + 1 times), -(i + 1), 0, …) / √((i + 1)(i + 2)).
  T Q[4][3];
  for (int i = 0; i < m; ++i) {
    const T s = T(1) / std::sqrt(T((i + 1) * (i + 2)));
    for (int k = 0; k < nv; ++k) Q[k][i] = k <= i ? s : (k == i + 1 ? -T(i + 1) * s : T(0));
  }
  auto el = [&](int k, int c, int l, int d) -> T& {
    return A[(3 * verts[k] + c) * K + 3 * verts[l] + d];
  };
  // P = Qᵀ A (nr × 3nv), then M = P Q (nr × nr).
  T P[9 * 12];
  for (int i = 0; i < m; ++i)
    for (int c = 0; c < 3; ++c)
      for (int l = 0; l < nv; ++l)
        for (int d = 0; d < 3; ++d) {
          T s = T(0);
          for (int k = 0; k < nv; ++k) s += Q[k][i] * el(k, c, l, d);
          P[(3 * i + c) * 12 + 3 * l + d] = s;
        }
  T M[144];
  for (int r = 0; r < nr; ++r)
    for (int j = 0; j < m; ++j)
      for (int d = 0; d < 3; ++d) {
        T s = T(0);
        for (int l = 0; l < nv; ++l) s += P[r * 12 + 3 * l + d] * Q[l][j];
        M[r * 12 + 3 * j + d] = s;
      }
  if (!project_to_psd(M, nr, 12)) return;  // already PSD: A stays as it is
  // A = Q M⁺ Qᵀ: R = Q M⁺ (3nv × nr), then A = R Qᵀ.
  T R[12 * 9];
  for (int k = 0; k < nv; ++k)
    for (int c = 0; c < 3; ++c)
      for (int col = 0; col < nr; ++col) {
        T s = T(0);
        for (int i = 0; i < m; ++i) s += Q[k][i] * M[(3 * i + c) * 12 + col];
        R[(3 * k + c) * 9 + col] = s;
      }
  for (int k = 0; k < nv; ++k)
    for (int c = 0; c < 3; ++c)
      for (int l = 0; l < nv; ++l)
        for (int d = 0; d < 3; ++d) {
          T s = T(0);
          for (int j = 0; j < m; ++j) s += R[(3 * k + c) * 9 + 3 * j + d] * Q[l][j];
          el(k, c, l, d) = s;
        }
}

// Projection of the 12×12 Hessian A of a function of the separation s = n̂ · Σᵥ wᵥ xᵥ of a
// point–triangle or edge–edge stencil whose closest points are interior (the plane's or both
// lines' unit normal n̂, the closest points' weights w, Σ w = 0; e.g. an unmollified barrier of
// the interior distance). s and n̂ stay constant while every vertex moves in its plane normal to
// n̂, and those motions change ∇s = w ⊗ n̂ only through w, whose in-plane derivatives are
// w ⊗ (in-plane vectors). So A lives on the 5-dimensional S = ŵ ⊗ ℝ³ ⊕ {a, b} ⊗ n̂, with {a, b}
// completing (1, 1, 1, 1)/2 and ŵ to an orthonormal basis of ℝ⁴, and A⁺ = W M⁺ Wᵀ for W the
// basis of S and M = Wᵀ A W: a 5×5 eigen-decomposition instead of the 9×9 of
// project_to_psd_translation_free (about twice as fast in all). grad: any nonzero multiple of
// ∇s (e.g. ∇d²), which gives n̂ and ŵ. Returns false, leaving A as it is, when grad vanishes or
// A is not supported on S to rounding (the caller then projects the general way).
template <typename T>
CN_HD bool project_to_psd_interior(T* A, const T* grad) {
  // n̂: the largest vertex gradient's direction; wᵥ ∝ gradᵥ · n̂.
  T best = T(0);
  int k = 0;
  for (int v = 0; v < 4; ++v) {
    const T t = grad[3 * v] * grad[3 * v] + grad[3 * v + 1] * grad[3 * v + 1] + grad[3 * v + 2] * grad[3 * v + 2];
    if (t > best) {
      best = t;
      k = v;
    }
  }
  if (!(best > T(0) && best < std::numeric_limits<T>::infinity())) return false;
  const T inv = T(1) / std::sqrt(best);
  const T n[3] = {grad[3 * k] * inv, grad[3 * k + 1] * inv, grad[3 * k + 2] * inv};
  T wv[4];
  for (int v = 0; v < 4; ++v) wv[v] = grad[3 * v] * n[0] + grad[3 * v + 1] * n[1] + grad[3 * v + 2] * n[2];
  // In the Helmert basis of the vectors ⟂ (1, 1, 1, 1): ŵ = H c, a = H t₁, b = H t₂ with (c, t₁, t₂)
  // orthonormal in ℝ³ (Duff et al. 2017's frame around c), so W's columns are orthonormal.
  const T h1 = T(1) / std::sqrt(T(2)), h2 = T(1) / std::sqrt(T(6)), h3 = T(1) / std::sqrt(T(12));
  T c[3] = {(wv[0] - wv[1]) * h1, (wv[0] + wv[1] - T(2) * wv[2]) * h2,
            (wv[0] + wv[1] + wv[2] - T(3) * wv[3]) * h3};
  const T cn = std::sqrt(c[0] * c[0] + c[1] * c[1] + c[2] * c[2]);
  if (!(cn > T(0))) return false;
  for (int i = 0; i < 3; ++i) c[i] /= cn;
  const T sg = c[2] >= T(0) ? T(1) : T(-1);
  const T fa = T(-1) / (sg + c[2]), fb = c[0] * c[1] * fa;
  const T t1[3] = {T(1) + sg * c[0] * c[0] * fa, sg * fb, -sg * c[0]};
  const T t2[3] = {fb, sg + c[1] * c[1] * fa, -c[1]};
  T w[4], a[4], b[4];
  const T* frame[3] = {c, t1, t2};
  T* basis[3] = {w, a, b};
  for (int f = 0; f < 3; ++f) {
    const T* x = frame[f];
    basis[f][0] = x[0] * h1 + x[1] * h2 + x[2] * h3;
    basis[f][1] = -x[0] * h1 + x[1] * h2 + x[2] * h3;
    basis[f][2] = -T(2) * x[1] * h2 + x[2] * h3;
    basis[f][3] = -T(3) * x[2] * h3;
  }
  // Y = A W (12×5); W's columns: ŵ ⊗ e_r (r < 3), a ⊗ n̂, b ⊗ n̂.
  T Y[12][5];
  for (int i = 0; i < 12; ++i) {
    const T* row = A + 12 * i;
    T ya = T(0), yb = T(0);
    for (int u = 0; u < 4; ++u) {
      const T an = row[3 * u] * n[0] + row[3 * u + 1] * n[1] + row[3 * u + 2] * n[2];
      ya += a[u] * an;
      yb += b[u] * an;
    }
    for (int s = 0; s < 3; ++s) Y[i][s] = w[0] * row[s] + w[1] * row[3 + s] + w[2] * row[6 + s] + w[3] * row[9 + s];
    Y[i][3] = ya;
    Y[i][4] = yb;
  }
  // A (I − W Wᵀ) = A − Y Wᵀ vanishes when A lives on S: checked, relative to A, in squares.
  T off = T(0), all = T(0);
  for (int i = 0; i < 12; ++i)
    for (int u = 0; u < 4; ++u)
      for (int s = 0; s < 3; ++s) {
        const T x = A[12 * i + 3 * u + s];
        const T e = x - (w[u] * Y[i][s] + n[s] * (a[u] * Y[i][3] + b[u] * Y[i][4]));
        off += e * e;
        all += x * x;
      }
  const T tol = T(256) * std::numeric_limits<T>::epsilon();
  if (!(off <= tol * tol * all)) return false;
  // M = Wᵀ Y (5×5), symmetrised.
  T Z[144], d[12];
  for (int j = 0; j < 5; ++j) {
    for (int s = 0; s < 3; ++s)
      Z[12 * s + j] = w[0] * Y[s][j] + w[1] * Y[3 + s][j] + w[2] * Y[6 + s][j] + w[3] * Y[9 + s][j];
    T pa = T(0), pb = T(0);
    for (int v = 0; v < 4; ++v) {
      const T ny = n[0] * Y[3 * v][j] + n[1] * Y[3 * v + 1][j] + n[2] * Y[3 * v + 2][j];
      pa += a[v] * ny;
      pb += b[v] * ny;
    }
    Z[36 + j] = pa;
    Z[48 + j] = pb;
  }
  for (int i = 0; i < 5; ++i)
    for (int j = i + 1; j < 5; ++j) Z[12 * i + j] = Z[12 * j + i] = T(0.5) * (Z[12 * i + j] + Z[12 * j + i]);
  if (!symmetric_eigen(Z, 5, d)) return false;
  bool psd = true;
  for (int i = 0; i < 5; ++i) {
    if (d[i] < T(0)) {
      d[i] = T(0);
      psd = false;
    }
  }
  if (psd) return true;  // already PSD: A stays as it is
  T P[5][5];  // M⁺ = Z max(Λ, 0) Zᵀ
  for (int i = 0; i < 5; ++i)
    for (int j = i; j < 5; ++j) {
      T sum = T(0);
      for (int q = 0; q < 5; ++q) sum += Z[12 * i + q] * d[q] * Z[12 * j + q];
      P[i][j] = P[j][i] = sum;
    }
  // A = R Wᵀ with R = W M⁺ (12×5); A is symmetric, so its upper triangle is mirrored.
  T R[12][5];
  for (int v = 0; v < 4; ++v)
    for (int r = 0; r < 3; ++r)
      for (int j = 0; j < 5; ++j) R[3 * v + r][j] = w[v] * P[r][j] + n[r] * (a[v] * P[3][j] + b[v] * P[4][j]);
  for (int i = 0; i < 12; ++i)
    for (int col = i; col < 12; ++col) {
      const int u = col / 3, s = col % 3;
      A[12 * i + col] = A[12 * col + i] = w[u] * R[i][s] + n[s] * (a[u] * R[i][3] + b[u] * R[i][4]);
    }
  return true;
}

}  // namespace contactnet

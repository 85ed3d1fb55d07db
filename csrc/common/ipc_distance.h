// IPC distances with first and second derivatives, shared by the barrier, friction and CCD code on
// both devices.
//
// Throughout this file "distance" means the SQUARED Euclidean distance d² (IPC Toolkit's
// convention): it is a polynomial / rational function of the coordinates, smooth within each
// closest-feature region, and its derivatives need no square roots.
//
// Each query first chooses the closest-feature type (the enums of distance.h, numbered like IPC
// Toolkit's PointTriangleDistanceType / EdgeEdgeDistanceType), then evaluates one smooth closed form:
//   point–point  |p - q|²
//   point–line   |(p - e0) × (e1 - e0)|² / |e1 - e0|²
//   point–plane  ((p - t0) · n)² / |n|²,            n = (t1 - t0) × (t2 - t0)
//   line–line    ((eb0 - ea0) · n)² / |n|²,         n = (ea1 - ea0) × (eb1 - eb0)
// Gradients and Hessians are with respect to the primitive's vertices stacked in argument order
// (point–triangle: p, t0, t1, t2; edge–edge: ea0, ea1, eb0, eb1), 3 coordinates each; Hessians are
// row-major K×K arrays (K = 3 × number of vertices).
//
// The closed forms are written on a few "reduced" variables (edge vectors) and mapped to the vertex
// coordinates by a constant linear map y = M x, so ∇ₓ = Mᵀ ∇ᵧ and ∇ₓ² = Mᵀ ∇ᵧ² M (expand_blocks).
#pragma once

#include <cstdint>

#include "distance.h"
#include "vec3.h"

namespace contactnet {

// Nearly parallel edges: |a × b|² < parallel_sin2 · |a|² |b|² (sin² θ below it) are handled by their
// end-point features, where the line–line closed form would divide by ~0. The double threshold is
// IPC Toolkit's.
template <typename T>
struct IpcEps;
template <>
struct IpcEps<float> {
  static constexpr float parallel_sin2 = 1e-6f;
};
template <>
struct IpcEps<double> {
  static constexpr double parallel_sin2 = 2.5e-16;
};

// ---------------------------------------------------------------------------------------------
// Small dense helpers on row-major arrays.

template <typename T, int K>
CN_HD void zero_array(T* a) {
  for (int i = 0; i < K; ++i) a[i] = T(0);
}

// Writes the 3×3 block (bi, bj) of a row-major K×K matrix: H[3bi + i][3bj + j] += s · B[i][j].
template <typename T, int K>
CN_HD void add_block(T* H, int bi, int bj, const T B[9], T s) {
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) H[(3 * bi + i) * K + 3 * bj + j] += s * B[3 * i + j];
}

template <typename T>
CN_HD void outer3(const Vec3<T>& u, const Vec3<T>& v, T B[9]) {
  const T uu[3] = {u.x, u.y, u.z};
  const T vv[3] = {v.x, v.y, v.z};
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) B[3 * i + j] = uu[i] * vv[j];
}

template <typename T>
CN_HD void scaled_identity3(T s, T B[9]) {
  for (int i = 0; i < 9; ++i) B[i] = T(0);
  B[0] = B[4] = B[8] = s;
}

// [v]× with [v]× w = v × w.
template <typename T>
CN_HD void skew3(const Vec3<T>& v, T B[9]) {
  B[0] = T(0);
  B[1] = -v.z;
  B[2] = v.y;
  B[3] = v.z;
  B[4] = T(0);
  B[5] = -v.x;
  B[6] = -v.y;
  B[7] = v.x;
  B[8] = T(0);
}

template <typename T>
CN_HD void put3(T* g, int block, const Vec3<T>& v) {
  g[3 * block] = v.x;
  g[3 * block + 1] = v.y;
  g[3 * block + 2] = v.z;
}

// Maps derivatives in KY/3 reduced 3-vectors y_k to KX/3 vertices x_i where y_k = Σ_i C[i][k] x_i
// (C is KX/3 × KY/3, row-major): g_x[i] = Σ_k C[i][k] g_y[k],  H_x[i][j] = Σ_kl C[i][k] C[j][l] H_y[k][l].
template <typename T, int KY, int KX>
CN_HD void expand_blocks(const int8_t* C, const T* gy, const T* Hy, T* gx, T* Hx) {
  constexpr int NY = KY / 3, NX = KX / 3;
  if (gx) {
    for (int i = 0; i < NX; ++i)
      for (int c = 0; c < 3; ++c) {
        T s = T(0);
        for (int k = 0; k < NY; ++k) s += T(C[i * NY + k]) * gy[3 * k + c];
        gx[3 * i + c] = s;
      }
  }
  if (Hx) {
    // First Hy · C (KY × KX), then Cᵀ · that.
    T HC[KY * KX];
    for (int r = 0; r < KY; ++r)
      for (int j = 0; j < NX; ++j)
        for (int c = 0; c < 3; ++c) {
          T s = T(0);
          for (int l = 0; l < NY; ++l) s += T(C[j * NY + l]) * Hy[r * KY + 3 * l + c];
          HC[r * KX + 3 * j + c] = s;
        }
    for (int i = 0; i < NX; ++i)
      for (int a = 0; a < 3; ++a)
        for (int col = 0; col < KX; ++col) {
          T s = T(0);
          for (int k = 0; k < NY; ++k) s += T(C[i * NY + k]) * HC[(3 * k + a) * KX + col];
          Hx[(3 * i + a) * KX + col] = s;
        }
  }
}

// ---------------------------------------------------------------------------------------------
// f(u, v) = |u × v|² = |u|²|v|² - (u·v)², on y = (u, v) (K = 6).
template <typename T>
CN_HD T cross_norm2_derivs(const Vec3<T>& u, const Vec3<T>& v, T* g, T* H) {
  const Vec3<T> c = cross(u, v);
  if (g) {
    put3(g, 0, T(2) * cross(v, c));  // ∂f/∂u = 2 v × (u × v) = 2(|v|² u - (u·v) v)
    put3(g, 1, T(2) * cross(c, u));  // ∂f/∂v = 2 (u × v) × u = 2(|u|² v - (u·v) u)
  }
  if (H) {
    zero_array<T, 36>(H);
    T B[9];
    const T uv = dot(u, v);
    scaled_identity3(T(2) * norm2(v), B);  // ∂²f/∂u² = 2|v|² I - 2 v vᵀ
    add_block<T, 6>(H, 0, 0, B, T(1));
    outer3(v, v, B);
    add_block<T, 6>(H, 0, 0, B, T(-2));
    scaled_identity3(T(2) * norm2(u), B);  // ∂²f/∂v² = 2|u|² I - 2 u uᵀ
    add_block<T, 6>(H, 1, 1, B, T(1));
    outer3(u, u, B);
    add_block<T, 6>(H, 1, 1, B, T(-2));
    // ∂²f/∂u∂v = 4 u vᵀ - 2 v uᵀ - 2 (u·v) I, and its transpose below the diagonal.
    outer3(u, v, B);
    add_block<T, 6>(H, 0, 1, B, T(4));
    outer3(v, u, B);
    add_block<T, 6>(H, 1, 0, B, T(4));
    outer3(v, u, B);
    add_block<T, 6>(H, 0, 1, B, T(-2));
    outer3(u, v, B);
    add_block<T, 6>(H, 1, 0, B, T(-2));
    scaled_identity3(T(-2) * uv, B);
    add_block<T, 6>(H, 0, 1, B, T(1));
    add_block<T, 6>(H, 1, 0, B, T(1));
  }
  return dot(c, c);
}

// Quotient rule for q = N / D given N, D and their derivatives on K variables (in place on gN, HN):
//   ∇q  = (∇N - q ∇D) / D
//   ∇²q = (∇²N - q ∇²D - ∇D ∇qᵀ - ∇q ∇Dᵀ) / D
template <typename T, int K>
CN_HD T quotient_derivs(T N, T D, const T* gD, const T* HD, T* g, T* H) {
  const T q = N / D;
  const T inv = T(1) / D;
  if (g) {
    for (int i = 0; i < K; ++i) g[i] = (g[i] - q * gD[i]) * inv;  // g holds ∇N on entry
    if (H) {
      for (int i = 0; i < K; ++i)
        for (int j = 0; j < K; ++j)  // H holds ∇²N on entry
          H[i * K + j] =
              (H[i * K + j] - q * HD[i * K + j] - gD[i] * g[j] - g[i] * gD[j]) * inv;
    }
  }
  return q;
}

// ---------------------------------------------------------------------------------------------
// Point–point, x = (p, q): d = |p - q|².
template <typename T>
CN_HD T point_point_distance(const Vec3<T>& p, const Vec3<T>& q) {
  return norm2(p - q);
}
template <typename T>
CN_HD void point_point_distance_derivs(const Vec3<T>& p, const Vec3<T>& q, T* g, T* H) {
  const Vec3<T> r = p - q;
  if (g) {
    put3(g, 0, T(2) * r);   // ∂d/∂p = 2 (p - q)
    put3(g, 1, T(-2) * r);  // ∂d/∂q = -2 (p - q)
  }
  if (H) {
    zero_array<T, 36>(H);  // ∇²d = 2 [[I, -I], [-I, I]]
    for (int i = 0; i < 3; ++i) {
      H[i * 6 + i] = H[(i + 3) * 6 + i + 3] = T(2);
      H[i * 6 + i + 3] = H[(i + 3) * 6 + i] = T(-2);
    }
  }
}

// Point–line, x = (p, e0, e1), y = (r, e) with r = p - e0, e = e1 - e0:
//   d = N / D,  N = |r × e|²,  D = |e|².
template <typename T>
CN_HD T point_line_distance(const Vec3<T>& p, const Vec3<T>& e0, const Vec3<T>& e1) {
  const Vec3<T> e = e1 - e0;
  return norm2(cross(p - e0, e)) / norm2(e);
}
template <typename T>
CN_HD void point_line_distance_derivs(const Vec3<T>& p, const Vec3<T>& e0, const Vec3<T>& e1,
                                      T* g, T* H) {
  const Vec3<T> r = p - e0;
  const Vec3<T> e = e1 - e0;
  T gy[6], Hy[36], gD[6], HD[36];
  const T N = cross_norm2_derivs(r, e, gy, H ? Hy : nullptr);  // ∇N, ∇²N on (r, e)
  const T D = norm2(e);
  put3(gD, 0, make_vec3(T(0), T(0), T(0)));  // ∇D = (0, 2e)
  put3(gD, 1, T(2) * e);
  zero_array<T, 36>(HD);  // ∇²D = [[0, 0], [0, 2I]]
  for (int i = 3; i < 6; ++i) HD[i * 6 + i] = T(2);
  quotient_derivs<T, 6>(N, D, gD, HD, gy, H ? Hy : nullptr);
  // r = p - e0, e = e1 - e0  →  rows p: (1, 0), e0: (-1, -1), e1: (0, 1)
  const int8_t C[6] = {1, 0, -1, -1, 0, 1};
  expand_blocks<T, 6, 9>(C, gy, H ? Hy : nullptr, g, H);
}

// s² / |n|² with s = r · (a × b), n = a × b, on y = (r, a, b) (K = 9): the point–plane and line–line
// closed forms.
template <typename T>
CN_HD T plane_distance_reduced(const Vec3<T>& r, const Vec3<T>& a, const Vec3<T>& b, T* gy,
                               T* Hy) {
  const Vec3<T> n = cross(a, b);
  const T s = dot(r, n);
  if (!gy) return s * s / norm2(n);
  // ∇s = (a × b, b × r, r × a)
  T gs[9];
  put3(gs, 0, n);
  put3(gs, 1, cross(b, r));
  put3(gs, 2, cross(r, a));
  // D = |a × b|² on (a, b), embedded in y at blocks 1, 2.
  T gD6[6], HD6[36];
  const T D = cross_norm2_derivs(a, b, gD6, Hy ? HD6 : nullptr);
  T gD[9], HD[81];
  for (int i = 0; i < 3; ++i) gD[i] = T(0);
  for (int i = 0; i < 6; ++i) gD[3 + i] = gD6[i];
  for (int i = 0; i < 9; ++i) gy[i] = T(2) * s * gs[i];  // ∇N = 2 s ∇s
  if (Hy) {
    zero_array<T, 81>(HD);
    for (int i = 0; i < 6; ++i)
      for (int j = 0; j < 6; ++j) HD[(i + 3) * 9 + j + 3] = HD6[i * 6 + j];
    // ∇²N = 2 ∇s ∇sᵀ + 2 s ∇²s, with ∇²s blocks (r,a) = -[b]×, (r,b) = [a]×, (a,b) = -[r]×.
    for (int i = 0; i < 9; ++i)
      for (int j = 0; j < 9; ++j) Hy[i * 9 + j] = T(2) * gs[i] * gs[j];
    T B[9], Bt[9];
    const Vec3<T> m_b = -b, m_r = -r;
    const Vec3<T>* blocks[3] = {&m_b, &a, &m_r};  // skew factors of (r,a), (r,b), (a,b)
    const int bi[3] = {0, 0, 1}, bj[3] = {1, 2, 2};
    for (int k = 0; k < 3; ++k) {
      skew3(*blocks[k], B);
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) Bt[3 * j + i] = B[3 * i + j];
      add_block<T, 9>(Hy, bi[k], bj[k], B, T(2) * s);
      add_block<T, 9>(Hy, bj[k], bi[k], Bt, T(2) * s);
    }
  }
  return quotient_derivs<T, 9>(s * s, D, gD, HD, gy, Hy);
}

// Point–plane, x = (p, t0, t1, t2): r = p - t0, a = t1 - t0, b = t2 - t0.
template <typename T>
CN_HD T point_plane_distance(const Vec3<T>& p, const Vec3<T>& t0, const Vec3<T>& t1,
                             const Vec3<T>& t2) {
  return plane_distance_reduced<T>(p - t0, t1 - t0, t2 - t0, nullptr, nullptr);
}
template <typename T>
CN_HD void point_plane_distance_derivs(const Vec3<T>& p, const Vec3<T>& t0, const Vec3<T>& t1,
                                       const Vec3<T>& t2, T* g, T* H) {
  T gy[9], Hy[81];
  plane_distance_reduced<T>(p - t0, t1 - t0, t2 - t0, gy, H ? Hy : nullptr);
  // rows p: (1,0,0), t0: (-1,-1,-1), t1: (0,1,0), t2: (0,0,1)
  const int8_t C[12] = {1, 0, 0, -1, -1, -1, 0, 1, 0, 0, 0, 1};
  expand_blocks<T, 9, 12>(C, gy, H ? Hy : nullptr, g, H);
}

// Line–line, x = (ea0, ea1, eb0, eb1): r = eb0 - ea0, a = ea1 - ea0, b = eb1 - eb0.
template <typename T>
CN_HD T line_line_distance(const Vec3<T>& ea0, const Vec3<T>& ea1, const Vec3<T>& eb0,
                           const Vec3<T>& eb1) {
  return plane_distance_reduced<T>(eb0 - ea0, ea1 - ea0, eb1 - eb0, nullptr, nullptr);
}
template <typename T>
CN_HD void line_line_distance_derivs(const Vec3<T>& ea0, const Vec3<T>& ea1, const Vec3<T>& eb0,
                                     const Vec3<T>& eb1, T* g, T* H) {
  T gy[9], Hy[81];
  plane_distance_reduced<T>(eb0 - ea0, ea1 - ea0, eb1 - eb0, gy, H ? Hy : nullptr);
  // rows ea0: (-1,-1,0), ea1: (0,1,0), eb0: (1,0,-1), eb1: (0,0,1)
  const int8_t C[12] = {-1, -1, 0, 0, 1, 0, 1, 0, -1, 0, 0, 1};
  expand_blocks<T, 9, 12>(C, gy, H ? Hy : nullptr, g, H);
}

// ---------------------------------------------------------------------------------------------
// Scatter of a sub-primitive's derivatives (KS = 3 × its vertices) into the K-DOF primitive:
// sub-vertex k is primitive vertex idx[k].
template <typename T, int KS, int K>
CN_HD void scatter_derivs(const int* idx, const T* gs, const T* Hs, T* g, T* H) {
  constexpr int NS = KS / 3;
  if (g) {
    zero_array<T, K>(g);
    for (int k = 0; k < NS; ++k)
      for (int c = 0; c < 3; ++c) g[3 * idx[k] + c] = gs[3 * k + c];
  }
  if (H) {
    zero_array<T, K * K>(H);
    for (int k = 0; k < NS; ++k)
      for (int l = 0; l < NS; ++l)
        for (int a = 0; a < 3; ++a)
          for (int b = 0; b < 3; ++b)
            H[(3 * idx[k] + a) * K + 3 * idx[l] + b] = Hs[(3 * k + a) * KS + 3 * l + b];
  }
}

// Distance (and, when g / H are non-null, its derivatives on the K = 3·nv stacked vertices) of a
// point–point, point–line or plane-type feature between the vertices v[idx[0..]] of a primitive.
template <typename T, int K>
CN_HD T feature_distance(int nsub, const int* idx, const Vec3<T>* v, int plane_kind, T* g, T* H) {
  T gs[12], Hs[144];
  const bool want = g != nullptr || H != nullptr;
  T d;
  if (nsub == 2) {
    d = point_point_distance(v[idx[0]], v[idx[1]]);
    if (want) {
      point_point_distance_derivs(v[idx[0]], v[idx[1]], gs, H ? Hs : nullptr);
      scatter_derivs<T, 6, K>(idx, gs, H ? Hs : nullptr, g, H);
    }
  } else if (nsub == 3) {
    d = point_line_distance(v[idx[0]], v[idx[1]], v[idx[2]]);
    if (want) {
      point_line_distance_derivs(v[idx[0]], v[idx[1]], v[idx[2]], gs, H ? Hs : nullptr);
      scatter_derivs<T, 9, K>(idx, gs, H ? Hs : nullptr, g, H);
    }
  } else if (plane_kind == 0) {
    d = point_plane_distance(v[idx[0]], v[idx[1]], v[idx[2]], v[idx[3]]);
    if (want) point_plane_distance_derivs(v[idx[0]], v[idx[1]], v[idx[2]], v[idx[3]], g, H);
  } else {
    d = line_line_distance(v[idx[0]], v[idx[1]], v[idx[2]], v[idx[3]]);
    if (want) line_line_distance_derivs(v[idx[0]], v[idx[1]], v[idx[2]], v[idx[3]], g, H);
  }
  return d;
}

// ---------------------------------------------------------------------------------------------
// Feature types.

template <typename T>
CN_HD int8_t point_edge_distance_type(const Vec3<T>& p, const Vec3<T>& e0, const Vec3<T>& e1) {
  return point_segment_closest(p, e0, e1).type;
}

template <typename T>
CN_HD int8_t point_triangle_distance_type(const Vec3<T>& p, const Vec3<T>& t0, const Vec3<T>& t1,
                                          const Vec3<T>& t2) {
  return point_triangle_closest(p, t0, t1, t2).type;
}

// Non-parallel edges: distance.h's classification. Nearly parallel edges (sin² θ below
// IpcEps::parallel_sin2): the closest of the four end-point-to-segment features, which is exact
// for parallel segments and keeps the line–line form away from |a × b| ≈ 0.
template <typename T>
CN_HD int8_t edge_edge_distance_type(const Vec3<T>& ea0, const Vec3<T>& ea1, const Vec3<T>& eb0,
                                     const Vec3<T>& eb1) {
  const Vec3<T> a = ea1 - ea0, b = eb1 - eb0;
  const T aa = norm2(a), bb = norm2(b);
  if (aa > T(0) && bb > T(0) && norm2(cross(a, b)) >= IpcEps<T>::parallel_sin2 * aa * bb)
    return segment_segment_closest(ea0, ea1, eb0, eb1).type;
  // End point of one edge against the other edge; map PointEdgeType to EdgeEdgeType.
  const PointSegmentResult<T> r[4] = {
      point_segment_closest(ea0, eb0, eb1), point_segment_closest(ea1, eb0, eb1),
      point_segment_closest(eb0, ea0, ea1), point_segment_closest(eb1, ea0, ea1)};
  // [feature][PE type]: PE_P_E0, PE_P_E1, PE_P_E
  const int8_t table[4][3] = {{EE_EA0_EB0, EE_EA0_EB1, EE_EA0_EB},
                              {EE_EA1_EB0, EE_EA1_EB1, EE_EA1_EB},
                              {EE_EA0_EB0, EE_EA1_EB0, EE_EA_EB0},
                              {EE_EA0_EB1, EE_EA1_EB1, EE_EA_EB1}};
  int best = 0;
  for (int k = 1; k < 4; ++k)
    if (r[k].dist2 < r[best].dist2) best = k;
  return table[best][r[best].type];
}

// Sub-feature of a point–triangle type: vertices (of p, t0, t1, t2 = 0..3) and their count.
CN_HD int point_triangle_feature(int8_t type, int idx[4]) {
  switch (type) {
    case PT_P_T0: idx[0] = 0; idx[1] = 1; return 2;
    case PT_P_T1: idx[0] = 0; idx[1] = 2; return 2;
    case PT_P_T2: idx[0] = 0; idx[1] = 3; return 2;
    case PT_P_E0: idx[0] = 0; idx[1] = 1; idx[2] = 2; return 3;
    case PT_P_E1: idx[0] = 0; idx[1] = 2; idx[2] = 3; return 3;
    case PT_P_E2: idx[0] = 0; idx[1] = 3; idx[2] = 1; return 3;
    default: idx[0] = 0; idx[1] = 1; idx[2] = 2; idx[3] = 3; return 4;
  }
}

// Sub-feature of an edge–edge type (ea0, ea1, eb0, eb1 = 0..3). Point–line features list the point
// first.
CN_HD int edge_edge_feature(int8_t type, int idx[4]) {
  switch (type) {
    case EE_EA0_EB0: idx[0] = 0; idx[1] = 2; return 2;
    case EE_EA0_EB1: idx[0] = 0; idx[1] = 3; return 2;
    case EE_EA1_EB0: idx[0] = 1; idx[1] = 2; return 2;
    case EE_EA1_EB1: idx[0] = 1; idx[1] = 3; return 2;
    case EE_EA_EB0: idx[0] = 2; idx[1] = 0; idx[2] = 1; return 3;
    case EE_EA_EB1: idx[0] = 3; idx[1] = 0; idx[2] = 1; return 3;
    case EE_EA0_EB: idx[0] = 0; idx[1] = 2; idx[2] = 3; return 3;
    case EE_EA1_EB: idx[0] = 1; idx[1] = 2; idx[2] = 3; return 3;
    default: idx[0] = 0; idx[1] = 1; idx[2] = 2; idx[3] = 3; return 4;
  }
}

CN_HD int point_edge_feature(int8_t type, int idx[3]) {
  switch (type) {
    case PE_P_E0: idx[0] = 0; idx[1] = 1; return 2;
    case PE_P_E1: idx[0] = 0; idx[1] = 2; return 2;
    default: idx[0] = 0; idx[1] = 1; idx[2] = 2; return 3;
  }
}

// ---------------------------------------------------------------------------------------------
// Typed squared distances with optional derivatives (g: K, H: K×K row-major; null to skip).
// type < 0 chooses the type first.

template <typename T>
CN_HD T point_edge_distance(const Vec3<T>& p, const Vec3<T>& e0, const Vec3<T>& e1, T* g = nullptr,
                            T* H = nullptr, int8_t type = -1) {
  if (type < 0) type = point_edge_distance_type(p, e0, e1);
  const Vec3<T> v[3] = {p, e0, e1};
  int idx[3];
  const int n = point_edge_feature(type, idx);
  return feature_distance<T, 9>(n, idx, v, 0, g, H);
}

template <typename T>
CN_HD T point_triangle_distance(const Vec3<T>& p, const Vec3<T>& t0, const Vec3<T>& t1,
                                const Vec3<T>& t2, T* g = nullptr, T* H = nullptr,
                                int8_t type = -1) {
  if (type < 0) type = point_triangle_distance_type(p, t0, t1, t2);
  const Vec3<T> v[4] = {p, t0, t1, t2};
  int idx[4];
  const int n = point_triangle_feature(type, idx);
  return feature_distance<T, 12>(n, idx, v, 0, g, H);
}

template <typename T>
CN_HD T edge_edge_distance(const Vec3<T>& ea0, const Vec3<T>& ea1, const Vec3<T>& eb0,
                           const Vec3<T>& eb1, T* g = nullptr, T* H = nullptr, int8_t type = -1) {
  if (type < 0) type = edge_edge_distance_type(ea0, ea1, eb0, eb1);
  const Vec3<T> v[4] = {ea0, ea1, eb0, eb1};
  int idx[4];
  const int n = edge_edge_feature(type, idx);
  return feature_distance<T, 12>(n, idx, v, 1, g, H);
}

// ---------------------------------------------------------------------------------------------
// Edge–edge mollifier (IPC, Li et al. 2020 §4.3): nearly parallel edges have a distance whose
// derivatives blow up, so the edge–edge barrier is multiplied by
//   m(x) = (2 - x / ε) x / ε  for x < ε,  1 otherwise,   x = |(ea1 - ea0) × (eb1 - eb0)|²,
// with ε = 1e-3 |ea1 - ea0|² |eb1 - eb0|² measured at rest (a constant).
template <typename T>
CN_HD T edge_edge_mollifier_threshold(const Vec3<T>& ea0, const Vec3<T>& ea1, const Vec3<T>& eb0,
                                      const Vec3<T>& eb1) {
  return T(1e-3) * norm2(ea1 - ea0) * norm2(eb1 - eb0);
}

// Returns m and, when g / H are non-null, ∇m / ∇²m on (ea0, ea1, eb0, eb1).
template <typename T>
CN_HD T edge_edge_mollifier(const Vec3<T>& ea0, const Vec3<T>& ea1, const Vec3<T>& eb0,
                            const Vec3<T>& eb1, T eps_x, T* g = nullptr, T* H = nullptr) {
  const Vec3<T> a = ea1 - ea0, b = eb1 - eb0;
  T gy[6], Hy[36];
  const bool want = g != nullptr || H != nullptr;
  const T x = cross_norm2_derivs(a, b, want ? gy : nullptr, H ? Hy : nullptr);
  if (!(x < eps_x)) {
    if (g) zero_array<T, 12>(g);
    if (H) zero_array<T, 144>(H);
    return T(1);
  }
  const T u = x / eps_x;
  const T m = (T(2) - u) * u;                   // m = -x²/ε² + 2x/ε
  if (!want) return m;
  const T dm = T(2) * (T(1) - u) / eps_x;       // m'(x) = 2/ε - 2x/ε²
  const T d2m = T(-2) / (eps_x * eps_x);        // m''(x) = -2/ε²
  T gx[12], Hx[144];
  // a = ea1 - ea0, b = eb1 - eb0  →  rows ea0: (-1,0), ea1: (1,0), eb0: (0,-1), eb1: (0,1)
  const int8_t C[8] = {-1, 0, 1, 0, 0, -1, 0, 1};
  expand_blocks<T, 6, 12>(C, gy, H ? Hy : nullptr, gx, H ? Hx : nullptr);
  if (g)
    for (int i = 0; i < 12; ++i) g[i] = dm * gx[i];  // ∇m = m'(x) ∇x
  if (H)
    for (int i = 0; i < 12; ++i)
      for (int j = 0; j < 12; ++j)
        H[i * 12 + j] = d2m * gx[i] * gx[j] + dm * Hx[i * 12 + j];  // ∇²m = m'' ∇x∇xᵀ + m' ∇²x
  return m;
}

}  // namespace contactnet

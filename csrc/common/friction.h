// IPC smooth friction (Li et al. 2020 §5; ZeMa eq. 9–10), shared by both devices.
//
// Per contact k, with quantities lagged at the positions x̄ of the last Newton outer iteration:
//   u = Tᵀ v   (2-vector, v: the stencil's velocities or displacements, T = Γᵀ P: 12×2)
//   D = μ N f₀(‖u‖),   ∇D = μ N f₁(‖u‖)/‖u‖ T u,   ∇²D = μ N T M Tᵀ
// where Γ v = Σ_k c_k v_k is the relative velocity at the lagged closest points, P (3×2) an
// orthonormal basis of the lagged tangent plane, N = -κ b'(d̄², d̂²) · 2 d̄ the lagged normal force
// magnitude (the barrier's force, without the edge–edge mollifier, as in IPC Toolkit), and
//   f₀(y) = -y³/(3ε²) + y²/ε + ε/3,   f₁(y) = -y²/ε² + 2y/ε        for y < ε
//   f₀(y) = y,                        f₁(y) = 1                     for y ≥ ε
//   M = f₂ uuᵀ + f₁/‖u‖ I,  f₂ = (f₁'(y) y - f₁(y)) / y³  (= -1/(ε² y) static, -1/y³ sliding)
// with the limit M = (2/ε) I at u = 0. M is PSD for every u (eigenvalues (2/ε)(1 - y/ε) and f₁/y
// when static, 0 and 1/y when sliding), so these Hessians need no projection.
//
// The contact's feature (and so Γ and P) is the closest-feature type at x̄, as in IPC Toolkit's
// collision sets: a face–vertex candidate whose closest feature is a vertex or edge acts as a
// vertex–vertex or edge–vertex contact; so does an edge–edge candidate unless it is mollified
// (|ea × eb|² < ε_x). Mollified (nearly parallel) edge–edge candidates carry friction only when
// their closest features are the two edge interiors, with line–line closest points; the others
// have none (IPC Toolkit skips them when building its tangential collisions).
#pragma once

#include <cstdint>

#include "barrier.h"
#include "ipc_distance.h"

namespace contactnet {

template <typename T>
CN_HD T friction_f0(T y, T eps) {
  if (y >= eps) return y;
  return -y * y * y / (T(3) * eps * eps) + y * y / eps + eps / T(3);
}

// f₁(y) / y, with its limit 2/ε at y = 0.
template <typename T>
CN_HD T friction_f1_over_y(T y, T eps) {
  if (y >= eps) return T(1) / y;
  return -y / (eps * eps) + T(2) / eps;
}

// (f₁'(y) y - f₁(y)) / y³.
template <typename T>
CN_HD T friction_f2(T y, T eps) {
  if (y >= eps) return T(-1) / (y * y * y);
  return T(-1) / (eps * eps * y);
}

template <typename T>
struct FrictionFrame {
  T c[4];        // Γ v = Σ_k c_k v_k
  Vec3<T> P[2];  // orthonormal tangent basis
  T normal_force;
};

template <typename T>
CN_HD Vec3<T> normalized(const Vec3<T>& v) {
  return (T(1) / norm(v)) * v;
}

// Basis of the plane orthogonal to n (IPC Toolkit's point–point construction).
template <typename T>
CN_HD void plane_basis_orthogonal_to(const Vec3<T>& n, Vec3<T> P[2]) {
  const Vec3<T> cx = cross(make_vec3(T(1), T(0), T(0)), n);
  const Vec3<T> cy = cross(make_vec3(T(0), T(1), T(0)), n);
  const Vec3<T> a = norm2(cx) > norm2(cy) ? cx : cy;
  P[0] = normalized(a);
  P[1] = normalized(cross(n, a));
}

// Point q against edge (e0, e1) (stencil indices): Γv = v_q - ((1 - α) v_e0 + α v_e1).
template <typename T>
CN_HD void point_edge_frame(const Vec3<T>* v, int q, int e0, int e1, FrictionFrame<T>& fr) {
  const Vec3<T> e = v[e1] - v[e0];
  const T alpha = dot(v[q] - v[e0], e) / norm2(e);  // unclamped closest-point parameter
  fr.c[q] = T(1);
  fr.c[e0] = -(T(1) - alpha);
  fr.c[e1] = -alpha;
  fr.P[0] = normalized(e);
  fr.P[1] = normalized(cross(e, v[q] - v[e0]));
}

// Fills the lagged frame of a candidate on stencil v (p, t0, t1, t2 or ea0, ea1, eb0, eb1) and
// returns its squared distance, or -1 for a candidate without friction; rest gives the mollifier
// threshold of edge–edge candidates.
template <typename T>
CN_HD T friction_frame(const Vec3<T> v[4], const Vec3<T> rest[4], bool is_ee, FrictionFrame<T>& fr) {
  for (int k = 0; k < 4; ++k) fr.c[k] = T(0);
  int8_t type;
  T d2;
  bool mollified = false;
  if (is_ee) {
    type = edge_edge_distance_type(v[0], v[1], v[2], v[3]);
    d2 = edge_edge_distance(v[0], v[1], v[2], v[3], (T*)nullptr, (T*)nullptr, type);
    const T eps_x = edge_edge_mollifier_threshold(rest[0], rest[1], rest[2], rest[3]);
    mollified = norm2(cross(v[1] - v[0], v[3] - v[2])) < eps_x;
  } else {
    type = point_triangle_distance_type(v[0], v[1], v[2], v[3]);
    d2 = point_triangle_distance(v[0], v[1], v[2], v[3], (T*)nullptr, (T*)nullptr, type);
  }
  int idx[4];
  const int nsub = is_ee ? edge_edge_feature(type, idx) : point_triangle_feature(type, idx);
  if (is_ee && mollified && nsub != 4) return T(-1);
  if (is_ee && nsub == 4) {
    // Line–line closest points: [|a|², -a·b; -a·b, |b|²] (s, t) = (-r·a, r·b), r = ea0 - eb0.
    const Vec3<T> a = v[1] - v[0], b = v[3] - v[2], r = v[0] - v[2];
    const T aa = norm2(a), bb = norm2(b), ab = dot(a, b);
    const T ra = dot(r, a), rb = dot(r, b);
    const T det = aa * bb - ab * ab;
    const T s = (-ra * bb + ab * rb) / det;
    const T t = (aa * rb - ab * ra) / det;
    fr.c[0] = T(1) - s;
    fr.c[1] = s;
    fr.c[2] = -(T(1) - t);
    fr.c[3] = -t;
    fr.P[0] = normalized(a);
    fr.P[1] = normalized(cross(cross(a, b), a));
  } else if (nsub == 4) {
    // Point–triangle: closest = t0 + β₁ (t1 - t0) + β₂ (t2 - t0), projection onto the plane.
    const Vec3<T> e0 = v[2] - v[1], e1 = v[3] - v[1], r = v[0] - v[1];
    const T a = norm2(e0), b = dot(e0, e1), c = norm2(e1), d = dot(r, e0), e = dot(r, e1);
    const T det = a * c - b * b;
    const T b1 = (c * d - b * e) / det;
    const T b2 = (a * e - b * d) / det;
    fr.c[0] = T(1);
    fr.c[1] = -(T(1) - b1 - b2);
    fr.c[2] = -b1;
    fr.c[3] = -b2;
    fr.P[0] = normalized(e0);
    fr.P[1] = normalized(cross(cross(e0, e1), e0));
  } else if (nsub == 3) {
    point_edge_frame(v, idx[0], idx[1], idx[2], fr);
  } else {
    fr.c[idx[0]] = T(1);
    fr.c[idx[1]] = T(-1);
    plane_basis_orthogonal_to(v[idx[1]] - v[idx[0]], fr.P);
  }
  return d2;
}

// u = Tᵀ v for the frame: u_j = Σ_k c_k P_j · v_k.
template <typename T>
CN_HD void friction_tangential(const FrictionFrame<T>& fr, const Vec3<T> vel[4], T u[2]) {
  Vec3<T> w = make_vec3(T(0), T(0), T(0));
  for (int k = 0; k < 4; ++k) w = w + fr.c[k] * vel[k];  // Γ v
  u[0] = dot(fr.P[0], w);
  u[1] = dot(fr.P[1], w);
}

// Column j of T = Γᵀ P at row 3k + i: c_k P_j[i].
template <typename T>
CN_HD T friction_T(const FrictionFrame<T>& fr, int row, int j) {
  const Vec3<T>& p = fr.P[j];
  const int i = row % 3;
  return fr.c[row / 3] * (i == 0 ? p.x : (i == 1 ? p.y : p.z));
}

}  // namespace contactnet

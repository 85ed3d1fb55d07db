// Per-index functors of the IPC ops: the same code runs in the CPU loop and as the body of the CUDA
// kernel. The math lives in csrc/common/{ipc_distance,barrier,psd,ccd}.h; the broad phases
// (candidate searches) in ipc_broad_phase.h.
#pragma once

#include <cstdint>
#include <limits>

#include "common/barrier.h"
#include "common/ccd.h"
#include "common/friction.h"
#include "common/ipc_distance.h"
#include "common/psd.h"
#include "ipc/ipc_broad_phase.h"

namespace contactnet {

// Primitive kinds of the distance ops (number of vertices: 2, 3, 4, 4, 4).
enum IpcDistanceKind : int {
  kIpcPointPoint = 0,
  kIpcPointEdge = 1,
  kIpcPointTriangle = 2,
  kIpcEdgeEdge = 3,
  kIpcMollifier = 4,
};

CN_HD int ipc_kind_vertices(int kind) {
  return kind == kIpcPointPoint ? 2 : (kind == kIpcPointEdge ? 3 : 4);
}

// order 0: squared distance (or mollifier) (N,); 1: gradient (N, K); 2: Hessian (N, K, K).
template <typename T>
struct IpcDistanceFunctor {
  int kind;
  int order;
  const T* x0;
  const T* x1;
  const T* x2;
  const T* x3;
  const T* eps_x;  // (N,) mollifier thresholds (kIpcMollifier only)
  T* out;

  CN_HD void operator()(int64_t i) const {
    const int nv = ipc_kind_vertices(kind);
    const T* xs[4] = {x0, x1, x2, x3};
    Vec3<T> v[4];
    // Every slot written (zeros past nv): with only the first nv written, nvcc 13.0 at -O1 and up
    // miscompiled this functor (point–edge, point–triangle and edge–edge rows NaN or wrong on an
    // H200; right with -G and on the host). tests/ops/test_cuda_matches_cpu.py catches it.
    for (int k = 0; k < 4; ++k) v[k] = k < nv ? load3(xs[k] + 3 * i) : Vec3<T>{T(0), T(0), T(0)};
    T g[12], H[144];
    T* gp = order == 1 ? g : nullptr;
    T* Hp = order == 2 ? H : nullptr;
    T d;
    switch (kind) {
      case kIpcPointPoint:
        d = point_point_distance(v[0], v[1]);
        if (order > 0) point_point_distance_derivs(v[0], v[1], gp, Hp);
        break;
      case kIpcPointEdge:
        d = point_edge_distance(v[0], v[1], v[2], gp, Hp);
        break;
      case kIpcPointTriangle:
        d = point_triangle_distance(v[0], v[1], v[2], v[3], gp, Hp);
        break;
      case kIpcEdgeEdge:
        d = edge_edge_distance(v[0], v[1], v[2], v[3], gp, Hp);
        break;
      default:
        d = edge_edge_mollifier(v[0], v[1], v[2], v[3], eps_x[i], gp, Hp);
        break;
    }
    const int K = 3 * nv;
    if (order == 0) {
      out[i] = d;
    } else if (order == 1) {
      for (int k = 0; k < K; ++k) out[K * i + k] = g[k];
    } else {
      for (int k = 0; k < K * K; ++k) out[K * K * i + k] = H[k];
    }
  }
};

// Barrier values and derivatives on squared distances: out (N, 3) = b, b', b''.
template <typename T>
struct BarrierFunctor {
  const T* d2;
  T dhat2;
  T* out;
  CN_HD void operator()(int64_t i) const {
    const T x = d2[i];
    out[3 * i] = barrier(x, dhat2);
    out[3 * i + 1] = barrier_first_derivative(x, dhat2);
    out[3 * i + 2] = barrier_second_derivative(x, dhat2);
  }
};

// The 4 vertex ids of candidate i: face–vertex candidates (vertex, face) come first as
// (p, t0, t1, t2), then edge–edge candidates (edge_a, edge_b) as (ea0, ea1, eb0, eb1).
struct CandidateStencil {
  const int64_t* faces;  // (F, 3)
  const int64_t* edges;  // (E, 2)
  const int64_t* fv;     // (Nfv, 2) vertex, face
  const int64_t* ee;     // (Nee, 2) edge, edge
  int64_t nfv;

  CN_HD bool ids(int64_t i, int64_t id[4]) const {
    if (i < nfv) {
      const int64_t p = fv[2 * i], f = fv[2 * i + 1];
      id[0] = p;
      id[1] = faces[3 * f];
      id[2] = faces[3 * f + 1];
      id[3] = faces[3 * f + 2];
      return false;
    }
    const int64_t j = i - nfv;
    const int64_t a = ee[2 * j], b = ee[2 * j + 1];
    id[0] = edges[2 * a];
    id[1] = edges[2 * a + 1];
    id[2] = edges[2 * b];
    id[3] = edges[2 * b + 1];
    return true;
  }

  // Row i is padding of a fixed-capacity candidate list (index -1): it contributes nothing.
  CN_HD bool padded(int64_t i) const { return i < nfv ? fv[2 * i] < 0 : ee[2 * (i - nfv)] < 0; }
};

// Barrier potential of candidate i: κ m(x) b(d²(x), d̂²) with m the edge–edge mollifier (1 for
// face–vertex candidates). order 0: energy; 1: + gradient (N, 12); 2: + Hessian (N, 12, 12),
// projected to PSD when `project`. Inactive candidates (d² ≥ d̂²) give zeros.
template <typename T>
struct BarrierPotentialFunctor {
  CandidateStencil st;
  const T* vertices;  // (V, 3)
  const T* rest;      // (V, 3) positions for the mollifier threshold
  T dhat2;
  T kappa;
  int order;
  bool project;
  T* energy;  // (N,)
  T* grad;    // (N, 12) or null
  T* hess;    // (N, 144) or null
  int64_t* dofs;  // (N, 4) stencil vertex ids, or null

  // Candidate i's term κ m b (e) and, as far as `order` asks, its gradient (g, 12) and Hessian
  // (H, 144; projected when `project`); false, with nothing written, for padding and for an
  // inactive candidate (d² ≥ d̂²), whose term is zero.
  CN_HD bool evaluate(int64_t i, T& e, T* g, T* H) const {
    if (st.padded(i)) return false;
    int64_t id[4];
    const bool is_ee = st.ids(i, id);
    Vec3<T> v[4];
    for (int k = 0; k < 4; ++k) v[k] = load3(vertices + 3 * id[k]);
    T gd[12], Hd[144];
    T* gp = order >= 1 ? gd : nullptr;
    T* Hp = order >= 2 ? Hd : nullptr;
    const int8_t type = is_ee ? edge_edge_distance_type(v[0], v[1], v[2], v[3])
                              : point_triangle_distance_type(v[0], v[1], v[2], v[3]);
    const T d = is_ee ? edge_edge_distance(v[0], v[1], v[2], v[3], gp, Hp, type)
                      : point_triangle_distance(v[0], v[1], v[2], v[3], gp, Hp, type);
    if (!(d < dhat2)) return false;
    const T b = barrier(d, dhat2);
    T m = T(1);
    T gm[12], Hm[144];
    bool mollified = false;
    if (is_ee) {
      Vec3<T> r[4];
      for (int k = 0; k < 4; ++k) r[k] = load3(rest + 3 * id[k]);
      const T eps_x = edge_edge_mollifier_threshold(r[0], r[1], r[2], r[3]);
      m = edge_edge_mollifier(v[0], v[1], v[2], v[3], eps_x);
      mollified = m < T(1);  // derivatives only then: far from parallel, m ≡ 1
      if (mollified && order >= 1)
        edge_edge_mollifier(v[0], v[1], v[2], v[3], eps_x, gm, order >= 2 ? Hm : nullptr);
    }
    e = kappa * m * b;  // κ m b
    if (order < 1) return true;
    const T b1 = barrier_first_derivative(d, dhat2);
    for (int k = 0; k < 12; ++k) {
      g[k] = kappa * m * b1 * gd[k];  // κ m b' ∇d
      if (mollified) g[k] += kappa * b * gm[k];  // + κ b ∇m
    }
    if (order < 2) return true;
    const T b2 = barrier_second_derivative(d, dhat2);
    for (int r = 0; r < 12; ++r)
      for (int c = 0; c < 12; ++c) {
        // κ m (b'' ∇d ∇dᵀ + b' ∇²d)
        T h = m * (b2 * gd[r] * gd[c] + b1 * Hd[12 * r + c]);
        // + κ (b' (∇d ∇mᵀ + ∇m ∇dᵀ) + b ∇²m)
        if (mollified) h += b1 * (gd[r] * gm[c] + gm[r] * gd[c]) + b * Hm[12 * r + c];
        H[12 * r + c] = kappa * h;
      }
    if (project) {
      // m b is translation invariant; without the mollifier it lives on the closest feature's
      // vertices only, and for an interior feature on the 5 dimensions of
      // project_to_psd_interior (b depends on the separation alone; gd = 2 s ∇s).
      int feat[4] = {0, 1, 2, 3};
      const int nf = mollified ? 4 : (is_ee ? edge_edge_feature(type, feat)
                                            : point_triangle_feature(type, feat));
      if (mollified || nf != 4 || !project_to_psd_interior(H, gd))
        project_to_psd_translation_free(H, 12, feat, nf);
    }
    return true;
  }

  CN_HD void operator()(int64_t i) const {
    if (dofs) {
      int64_t id[4] = {-1, -1, -1, -1};
      if (!st.padded(i)) st.ids(i, id);
      for (int k = 0; k < 4; ++k) dofs[4 * i + k] = id[k];
    }
    T* g = grad ? grad + 12 * i : nullptr;
    T* H = hess ? hess + 144 * i : nullptr;
    if (!evaluate(i, energy[i], g, H)) {
      energy[i] = T(0);
      if (g) zero_array<T, 12>(g);
      if (H) zero_array<T, 144>(H);
    }
  }

  // Candidates whose term is b(d²) of a point–point or point–edge feature alone (no active
  // mollifier, d² < d̂², 4 distinct stencil vertices) have equal Hessians on that feature: a
  // vertex near an edge is a candidate of both faces beside the edge and of the edges at the
  // vertex. key = (point, lower, upper edge vertex) or (lower, upper point, -1); false for all
  // other candidates.
  CN_HD bool feature_key(int64_t i, int64_t key[3]) const {
    if (st.padded(i)) return false;  // padding: operator() zeroes it
    int64_t id[4];
    const bool is_ee = st.ids(i, id);
    for (int a = 0; a < 4; ++a)
      for (int b = a + 1; b < 4; ++b)
        if (id[a] == id[b]) return false;
    Vec3<T> v[4];
    for (int k = 0; k < 4; ++k) v[k] = load3(vertices + 3 * id[k]);
    const int8_t type = is_ee ? edge_edge_distance_type(v[0], v[1], v[2], v[3])
                              : point_triangle_distance_type(v[0], v[1], v[2], v[3]);
    int feat[4];
    const int nf = is_ee ? edge_edge_feature(type, feat) : point_triangle_feature(type, feat);
    if (nf == 4) return false;
    if (is_ee) {
      Vec3<T> r[4];
      for (int k = 0; k < 4; ++k) r[k] = load3(rest + 3 * id[k]);
      const T eps_x = edge_edge_mollifier_threshold(r[0], r[1], r[2], r[3]);
      if (edge_edge_mollifier(v[0], v[1], v[2], v[3], eps_x) < T(1)) return false;
    }
    T* const none = nullptr;
    const T d = is_ee ? edge_edge_distance(v[0], v[1], v[2], v[3], none, none, type)
                      : point_triangle_distance(v[0], v[1], v[2], v[3], none, none, type);
    if (!(d < dhat2)) return false;
    const int64_t a = id[feat[0]], b = id[feat[1]];
    if (nf == 2) {
      key[0] = a < b ? a : b;
      key[1] = a < b ? b : a;
      key[2] = -1;
    } else {
      const int64_t c = id[feat[2]];
      key[0] = a;  // point–edge features list the point first
      key[1] = b < c ? b : c;
      key[2] = b < c ? c : b;
    }
    return true;
  }

  // Hessian of candidate i from that of candidate `rep` on the same feature key (see
  // feature_key): the feature vertices' 3×3 blocks move to i's stencil positions, zeros
  // elsewhere. Energy and gradient of i are not written.
  CN_HD void copy_feature_hessian(int64_t rep, int64_t i, const int64_t key[3]) const {
    int64_t ir[4], ii[4];
    st.ids(rep, ir);
    st.ids(i, ii);
    const int nf = key[2] < 0 ? 2 : 3;
    int pr[3], pi[3];  // stencil slot of each feature vertex in rep and in i
    for (int k = 0; k < nf; ++k)
      for (int s = 0; s < 4; ++s) {
        if (ir[s] == key[k]) pr[k] = s;
        if (ii[s] == key[k]) pi[k] = s;
      }
    const T* A = hess + 144 * rep;
    T* H = hess + 144 * i;
    zero_array<T, 144>(H);
    for (int k = 0; k < nf; ++k)
      for (int l = 0; l < nf; ++l)
        for (int r = 0; r < 3; ++r)
          for (int c = 0; c < 3; ++c)
            H[(3 * pi[k] + r) * 12 + 3 * pi[l] + c] = A[(3 * pr[k] + r) * 12 + 3 * pr[l] + c];
  }
};

// Distance (m) of candidate i: the exact primitive distance, √ of the barrier's squared
// distance (0 where that is NaN: a non-finite position reads as touching); padding rows: +inf.
template <typename T>
struct CandidateDistanceFunctor {
  CandidateStencil st;
  const T* vertices;  // (V, 3)
  T* out;             // (N,)

  CN_HD T value(int64_t i) const {
    if (st.padded(i)) return std::numeric_limits<T>::infinity();
    int64_t id[4];
    const bool is_ee = st.ids(i, id);
    Vec3<T> v[4];
    for (int k = 0; k < 4; ++k) v[k] = load3(vertices + 3 * id[k]);
    T* const none = nullptr;
    const T d2 = is_ee ? edge_edge_distance(v[0], v[1], v[2], v[3], none, none,
                                            edge_edge_distance_type(v[0], v[1], v[2], v[3]))
                       : point_triangle_distance(v[0], v[1], v[2], v[3], none, none,
                                                 point_triangle_distance_type(v[0], v[1], v[2], v[3]));
    return sqrt(d2 > T(0) ? d2 : T(0));
  }

  CN_HD void operator()(int64_t i) const { out[i] = value(i); }
};

// Smooth friction of candidate i (see friction.h): D = μ N f₀(‖u‖) with u = Tᵀ v, lagged at
// `lagged` positions; order 0: energy, 1: gradient (N, 12), 2: Hessian (N, 12, 12). Candidates
// inactive at the lagged positions (d̄² ≥ d̂²) give zeros.
template <typename T>
struct FrictionFunctor {
  CandidateStencil st;
  const T* velocities;  // (V, 3)
  const T* lagged;      // (V, 3)
  const T* rest;        // (V, 3)
  T dhat2;
  T kappa;
  T mu;
  T eps_v;
  int order;
  T* out;  // (N,), (N, 12) or (N, 144)

  // Candidate i's lagged frame, μ N, u = Tᵀ v and y = ‖u‖; false for padding and for a candidate
  // without friction (inactive at the lagged positions).
  CN_HD bool state(int64_t i, FrictionFrame<T>& fr, T& scale, T u[2], T& y) const {
    if (st.padded(i)) return false;
    int64_t id[4];
    const bool is_ee = st.ids(i, id);
    Vec3<T> x[4], r[4], vel[4];
    for (int k = 0; k < 4; ++k) {
      x[k] = load3(lagged + 3 * id[k]);
      r[k] = load3(rest + 3 * id[k]);
      vel[k] = load3(velocities + 3 * id[k]);
    }
    const T d2 = friction_frame(x, r, is_ee, fr);
    if (!(d2 >= T(0) && d2 < dhat2)) return false;
    // N = -κ b'(d̄², d̂²) · 2 d̄   (force of the barrier along the distance)
    fr.normal_force = -kappa * barrier_first_derivative(d2, dhat2) * T(2) * sqrt(d2);
    scale = mu * fr.normal_force;  // μ N
    friction_tangential(fr, vel, u);
    y = sqrt(u[0] * u[0] + u[1] * u[1]);
    return true;
  }

  // Candidate i's D (order 0) or ∇D (order 1, 12 values) into out; false, with nothing written,
  // for padding and for a candidate without friction, whose term is zero.
  CN_HD bool evaluate(int64_t i, int order, T* out) const {
    FrictionFrame<T> fr;
    T scale, u[2], y;
    if (!state(i, fr, scale, u, y)) return false;
    if (order == 0) {
      out[0] = scale * friction_f0(y, eps_v);  // μ N f₀(‖u‖)
      return true;
    }
    const T s = scale * friction_f1_over_y(y, eps_v);  // ∇D = μ N f₁(‖u‖)/‖u‖ T u
    for (int row = 0; row < 12; ++row)
      out[row] = s * (friction_T(fr, row, 0) * u[0] + friction_T(fr, row, 1) * u[1]);
    return true;
  }

  CN_HD void operator()(int64_t i) const {
    const int K = order == 0 ? 1 : (order == 1 ? 12 : 144);
    T* o = out + K * i;
    if (order < 2) {
      if (!evaluate(i, order, o))
        for (int k = 0; k < K; ++k) o[k] = T(0);
      return;
    }
    for (int k = 0; k < K; ++k) o[k] = T(0);
    FrictionFrame<T> fr;
    T scale, u[2], y;
    if (!state(i, fr, scale, u, y)) return;
    const T f1y = friction_f1_over_y(y, eps_v);
    // ∇²D = μ N T M Tᵀ,  M = f₂ u uᵀ + f₁/‖u‖ I  (M = (2/ε) I at u = 0)
    const T f2 = y > T(0) ? friction_f2(y, eps_v) : T(0);
    const T M[2][2] = {{scale * (f2 * u[0] * u[0] + f1y), scale * f2 * u[0] * u[1]},
                       {scale * f2 * u[1] * u[0], scale * (f2 * u[1] * u[1] + f1y)}};
    T TM[12][2];
    for (int row = 0; row < 12; ++row)
      for (int j = 0; j < 2; ++j)
        TM[row][j] = friction_T(fr, row, 0) * M[0][j] + friction_T(fr, row, 1) * M[1][j];
    for (int a = 0; a < 12; ++a)
      for (int b = 0; b < 12; ++b)
        o[12 * a + b] = TM[a][0] * friction_T(fr, b, 0) + TM[a][1] * friction_T(fr, b, 1);
  }
};

// Whether candidate i may come closer than `reach` on the linear motion v0 → v1 (v1 null: at v0).
// Every point of a primitive moves by a convex combination of its vertices' displacements Δ, so
// for any shared vector s the gap between the two sides changes by at most δ_a + δ_b, δ the
// side's largest |Δ − s|, and the distance along the motion stays ≥ d(v0) − δ_a − δ_b. Both s = 0
// and s = Δ of stencil vertex 0 are tried and the smaller bound kept: with the latter, a motion
// the two sides share (objects carried by a shaken bowl) moves no distance. Kept when the bound is
// below reach (with a relative margin of 1e-9 against rounding). At v0 alone: d² < reach², the
// test the barrier makes. Padding rows are dropped.
template <typename T>
struct PruneFunctor {
  CandidateStencil st;
  const T* v0;  // (V, 3)
  const T* v1;  // (V, 3) or null
  T reach;
  T reach2;  // reach² rounded once from double, as the barrier rounds d̂²
  bool* keep;  // (N,)

  CN_HD void operator()(int64_t i) const {
    if (st.padded(i)) {
      keep[i] = false;
      return;
    }
    int64_t id[4];
    const bool is_ee = st.ids(i, id);
    keep[i] = pair_may_come_within(v0, v1, id, is_ee, reach, reach2);
  }
};

// Row i of rows (m, 2), kept, to out[rank[i] - 1] (rank: the inclusive running count of kept
// rows) when that is below capacity: the kept rows in order at the front of a fixed-capacity list.
struct CompactRowsFunctor {
  const bool* keep;     // (m,)
  const int64_t* rank;  // (m,)
  const int64_t* rows;  // (m, 2)
  int64_t capacity;
  int64_t* out;  // (capacity, 2), -1 filled

  CN_HD void operator()(int64_t i) const {
    const int64_t r = rank[i] - 1;
    if (!keep[i] || r >= capacity) return;
    out[2 * r] = rows[2 * i];
    out[2 * r + 1] = rows[2 * i + 1];
  }
};

// Time of impact of candidate i between positions v0 and v1 (linear trajectories).
template <typename T>
struct CcdFunctor {
  CandidateStencil st;
  const T* v0;  // (V, 3)
  const T* v1;  // (V, 3)
  CcdParams prm;
  T* toi;  // (N,)

  CN_HD T value(int64_t i) const {
    if (st.padded(i)) return T(prm.tmax);  // padding: no impact
    int64_t id[4];
    const bool is_ee = st.ids(i, id);
    Vec3<double> x[4], dx[4];
    for (int k = 0; k < 4; ++k) {
      const T* a = v0 + 3 * id[k];
      const T* b = v1 + 3 * id[k];
      x[k] = make_vec3(double(a[0]), double(a[1]), double(a[2]));
      dx[k] = make_vec3(double(b[0]) - x[k].x, double(b[1]) - x[k].y, double(b[2]) - x[k].z);
    }
    return T(additive_ccd(x, dx, is_ee, prm));
  }

  CN_HD void operator()(int64_t i) const { toi[i] = value(i); }
};

}  // namespace contactnet

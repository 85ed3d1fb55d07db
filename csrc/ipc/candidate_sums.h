// The device form of the stepper's sums over candidates (affine_potential.h: the potential, its
// derivatives, the contact forces and statistics, the CCD step bound): one index per candidate
// evaluates its term in registers and adds it (or takes the minimum) into the rows of its
// environment or bodies, atomically on a GPU. A fixed-capacity list (the stepper's fixed-shape mode: capacity in
// the millions at thousands of environments, a few hundred live rows per environment) then costs
// one load per padding row and one distance per row beyond d̂, with no per-candidate arrays (a
// projected Hessian per row would be 1,152 bytes, over 100 GB at 4,096 bowls) and no atomic adds
// of padding's zeros into one shared row.
//
// The host keeps its own form (per-candidate arrays evaluated in parallel, then sums in candidate
// order that parallelise over environments or bodies); run serially on the host, these functors
// add the same terms in the same candidate order, which is how the CPU tests check the GPU's form.
#pragma once

#include <cstdint>
#include <type_traits>

#include "common/macros.h"
#include "ipc/body_derivatives.h"
#include "ipc/ipc_kernels.h"

namespace contactnet {

// Whether launchers L sum the candidates' terms on the host: per-candidate arrays evaluated in
// parallel, then sums in candidate order that share the threads by environment or body (a CPU's
// launchers say so with kSumsOnHost). Otherwise the functors below (the device form).
CN_LAUNCHER_FLAG_TRAIT(launcher_sums_on_host, kSumsOnHost);

// The rows of a face–vertex list (nfv rows) then an edge–edge list (nee) that may be in use:
// those before extents[0] and extents[1] (device values, clamped to the lists), as candidate
// indices of f. A bounded launch's index j runs f on that row.
template <typename F>
struct ExtentRows {
  F f;
  const int64_t* extents;  // (2,)
  int64_t nfv, nee;

  CN_HD int64_t in_use(int kind) const {
    const int64_t e = extents[kind], n = kind == 0 ? nfv : nee;
    return e < 0 ? 0 : (e < n ? e : n);
  }
  CN_HD int64_t bound() const { return in_use(0) + in_use(1); }
  CN_HD void operator()(int64_t j) const {
    const int64_t a = in_use(0);
    f(j < a ? j : nfv + (j - a));
  }
};

// *p += 1, atomically on a GPU (a serial host launch: plainly).
CN_HD void count_add(int64_t* p) {
#if defined(__CUDA_ARCH__)
  atomicAdd(reinterpret_cast<unsigned long long*>(p), 1ULL);
#else
  ++*p;
#endif
}

// *p = min(*p, v) for v and *p >= +0 or +inf (never NaN or -0): such doubles (floats) order as
// their bit patterns do as unsigned integers, so a GPU takes the integer atomicMin.
template <typename T>
CN_HD void min_nonnegative(T* p, T v) {
#if defined(__CUDA_ARCH__)
  if constexpr (sizeof(T) == 8)
    atomicMin(reinterpret_cast<unsigned long long*>(p),
              static_cast<unsigned long long>(__double_as_longlong(v)));
  else
    atomicMin(reinterpret_cast<unsigned int*>(p), __float_as_uint(v));
#else
  if (v < *p) *p = v;
#endif
}

// Environment of a candidate: that of its first stencil vertex.
CN_HD int64_t candidate_env(const int64_t id[4], const int64_t* vertex_body, int64_t B) {
  return vertex_body[id[0]] / B;
}

// Energy: the barrier's κ m b of candidate i into total[its environment].
template <typename T>
struct BarrierEnergySumFunctor {
  BarrierPotentialFunctor<T> barrier;  // order 0
  const int64_t* vertex_body;          // (V,) flat bodies e·B + b
  int64_t B;
  T* total;  // (E,)

  CN_HD void operator()(int64_t i) const {
    T e;
    if (!barrier.evaluate(i, e, nullptr, nullptr)) return;
    int64_t id[4];
    barrier.st.ids(i, id);
    BodyPairDerivativesFunctor<T>::add(total + candidate_env(id, vertex_body, B), e);
  }
};

// Energy: friction's μ_i h² D_i (D at μ = 1) of lagged candidate i into total[its environment].
template <typename T>
struct FrictionEnergySumFunctor {
  FrictionFunctor<T> friction;  // μ = 1; its order and out are unused
  const T* mu;                  // (N,)
  T h2;
  const int64_t* vertex_body;
  int64_t B;
  T* total;

  CN_HD void operator()(int64_t i) const {
    T d;
    if (!friction.evaluate(i, 0, &d)) return;
    int64_t id[4];
    friction.st.ids(i, id);
    BodyPairDerivativesFunctor<T>::add(total + candidate_env(id, vertex_body, B), (mu[i] * h2) * d);
  }
};

// Derivatives: the barrier's gradient (order 1) or gradient and projected Hessian (order 2) of
// candidate i, carried to its two bodies and added into the dense systems, as
// BodyPairDerivativesFunctor's sum of its four parts (in the same order).
template <typename T>
struct BarrierBodySumFunctor {
  BarrierPotentialFunctor<T> barrier;  // order 1 or 2, projected
  const int64_t* vertex_body;
  int64_t B;
  T* grad;  // (E, 12B)
  T* hess;  // (E, 12B, 12B)

  CN_HD void operator()(int64_t i) const {
    using Sum = BodyPairDerivativesFunctor<T>;
    const bool hessian = barrier.order >= 2;
    T e, g[12], H[144];
    if (!barrier.evaluate(i, e, g, hessian ? H : nullptr)) return;
    int64_t id[4];
    const bool is_fv = !barrier.st.ids(i, id);
    const int64_t body[2] = {vertex_body[id[0]], vertex_body[id[3]]};
    for (int s = 0; s < 2; ++s)
      for (int t = 0; t < (hessian ? 2 : 1); ++t) {
        T block[144], gblock[12];
        if (Sum::part(g, hessian ? H : nullptr, id, is_fv, barrier.rest, s, t, block, gblock))
          Sum::add_dense(hess, B, body[s], body[t], block);
        if (t == 0)
          for (int k = 0; k < 12; ++k) Sum::add(grad + body[s] * 12 + k, gblock[k]);
      }
  }
};

// Derivatives: friction's Kronecker factors of lagged candidate n and its four parts, as
// FrictionBodyFactorsFunctor then FrictionBodyAddFunctor.
template <typename T>
struct FrictionBodySumFunctor {
  FrictionBodyFactorsFunctor<T> factors;  // its out is unused
  const int64_t* vertex_body;
  int64_t B;
  T* grad;
  T* hess;

  CN_HD void operator()(int64_t n) const {
    T f[kFrictionFactors];
    factors.factors(n, f);
    if (f[20] == T(0)) return;
    int64_t id[4];
    factors.friction.st.ids(n, id);
    const int64_t body[2] = {vertex_body[id[0]], vertex_body[id[3]]};
    for (int s = 0; s < 2; ++s)
      for (int t = 0; t < 2; ++t)
        FrictionBodyAddFunctor<T>::add_part(f, s, t, B, body[s], body[t], grad, hess);
  }
};

// End of step: candidate i counts in its environment's contacts and smallest distance
// (CandidateDistanceFunctor's).
template <typename T>
struct ContactStatisticsFunctor {
  CandidateDistanceFunctor<T> distance;  // its out is unused
  const int64_t* vertex_body;
  int64_t B;
  int64_t* contacts;  // (E,)
  T* min_distance;    // (E,), +inf to start

  CN_HD void operator()(int64_t i) const {
    if (distance.st.padded(i)) return;
    int64_t id[4];
    distance.st.ids(i, id);
    const int64_t env = candidate_env(id, vertex_body, B);
    count_add(contacts + env);
    min_nonnegative(min_distance + env, distance.value(i));
  }
};

// End of step: the barrier's −gradient (order 1, barrier.kappa = κ) of each stencil vertex of
// candidate i to that vertex's body.
template <typename T>
struct BarrierForceSumFunctor {
  BarrierPotentialFunctor<T> barrier;  // order 1
  const int64_t* vertex_body;
  T* forces;  // (E·B, 3)

  CN_HD void operator()(int64_t i) const {
    T e, g[12];
    if (!barrier.evaluate(i, e, g, nullptr)) return;
    int64_t id[4];
    barrier.st.ids(i, id);
    for (int v = 0; v < 4; ++v)
      for (int c = 0; c < 3; ++c)
        BodyPairDerivativesFunctor<T>::add(forces + 3 * vertex_body[id[v]] + c, -g[3 * v + c]);
  }
};

// End of step: friction's −μ_i ∇D_i (D at μ = 1) of each stencil vertex of lagged candidate i
// to that vertex's body.
template <typename T>
struct FrictionForceSumFunctor {
  FrictionFunctor<T> friction;  // μ = 1; its order and out are unused
  const T* mu;                  // (N,)
  const int64_t* vertex_body;
  T* forces;  // (E·B, 3)

  CN_HD void operator()(int64_t i) const {
    T g[12];
    if (!friction.evaluate(i, 1, g)) return;
    int64_t id[4];
    friction.st.ids(i, id);
    for (int row = 0; row < 12; ++row)
      BodyPairDerivativesFunctor<T>::add(forces + 3 * vertex_body[id[row / 3]] + row % 3,
                                         -(g[row] * mu[i]));
  }
};

// CCD: the largest collision-free fraction of the motion per environment, the smallest time of
// impact of its candidates (CcdFunctor's) in step[e] (tmax to start); a NaN time reads as 0.
template <typename T>
struct CollisionFreeStepFunctor {
  CcdFunctor<T> ccd;  // its toi is unused
  const int64_t* vertex_env;  // (V,)
  T* step;                    // (E,)

  CN_HD void operator()(int64_t i) const {
    if (ccd.st.padded(i)) return;
    const T toi = ccd.value(i);
    if (toi >= T(ccd.prm.tmax)) return;
    int64_t id[4];
    ccd.st.ids(i, id);
    min_nonnegative(step + vertex_env[id[0]], toi > T(0) ? toi : T(0));
  }
};

}  // namespace contactnet

// One marker for math that must run on both devices: host+device under nvcc, plain inline under g++.
#pragma once

#include <type_traits>

#if defined(__CUDACC__)
#define CN_HD __host__ __device__ __forceinline__
#else
#define CN_HD inline
#endif

// A hint to start loading a cache line that will be read soon (host GCC/Clang only; GPU threads
// hide latency by switching warps instead).
#if defined(__CUDA_ARCH__) || !(defined(__GNUC__) || defined(__clang__))
#define CN_PREFETCH(p) ((void)0)
#else
#define CN_PREFETCH(p) __builtin_prefetch(p)
#endif

// Declares `trait<L>`, true where type L declares the static member `member` (a launcher's
// opt-in flag such as kSumsOnHost), false otherwise.
#define CN_LAUNCHER_FLAG_TRAIT(trait, member)             \
  template <typename L, typename = void>                 \
  struct trait : std::false_type {};                     \
  template <typename L>                                  \
  struct trait<L, std::void_t<decltype(L::member)>> : std::true_type {}

namespace contactnet {

// Thresholds that depend on precision. All are relative (scale-free), so the same code is
// correct for 1e-4 m and 1e3 m inputs.
template <typename T>
struct Eps;
template <>
struct Eps<float> {
  // |d1 x d2|^2 <= parallel * |d1|^2 |d2|^2 treats two directions as parallel.
  static constexpr float parallel = 1e-10f;
  // Below this |d1 x d2|^2 / (|d1|^2 |d2|^2) (angles under ~0.6 deg) segment-segment also tries
  // the endpoint distances, which stay accurate where the interior formula cancels.
  static constexpr float near_parallel = 1e-4f;
  // |ab x ac|^2 <= degenerate * |ab|^2 |ac|^2 treats a triangle as a segment.
  static constexpr float degenerate = 1e-12f;
};
template <>
struct Eps<double> {
  static constexpr double parallel = 1e-24;
  static constexpr double near_parallel = 1e-4;
  static constexpr double degenerate = 1e-28;
};

}  // namespace contactnet

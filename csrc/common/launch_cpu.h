// Runs a per-index functor over [0, n) on torch's intra-op thread pool.
#pragma once

#include <algorithm>
#include <atomic>

#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>

namespace contactnet {

// grain: indices per task; pick it so one task costs a few microseconds at least.
template <typename F>
void parallel_for_each(int64_t n, int64_t grain, const F& f) {
  at::parallel_for(0, n, grain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) f(i);
  });
}

}  // namespace contactnet

namespace contactnet {

// Launcher for the device-generic op implementations (see e.g. primitive_distance.h).
struct CpuLauncher {
  int64_t grain;
  template <typename F>
  void operator()(const at::Tensor& /*like*/, int64_t n, const F& f) const {
    parallel_for_each(n, grain, f);
  }
};

// For indices of very uneven cost (a tree traversal near contact against one far from it): the
// threads take them one at a time from a shared counter, so none is left with the costly ones.
struct CpuDynamicLauncher {
  template <typename F>
  void operator()(const at::Tensor& /*like*/, int64_t n, const F& f) const {
    std::atomic<int64_t> next{0};
    at::parallel_for(0, std::min<int64_t>(at::get_num_threads(), n), 1, [&](int64_t, int64_t) {
      for (int64_t i; (i = next.fetch_add(1)) < n;) f(i);
    });
  }
};

// CpuDynamicLauncher for two-pass drivers that may keep the counting pass's results on the host
// and copy them in the second pass (see launcher_records_pairs in ipc/ipc_body_search.h).
struct CpuRecordingLauncher : CpuDynamicLauncher {
  static constexpr bool kRecordsPairs = true;
};

// For functors whose indices add into shared rows: one index at a time, in order, so the sums
// are deterministic (the order of `index_add_`).
struct CpuSerialLauncher {
  template <typename F>
  void operator()(const at::Tensor& /*like*/, int64_t n, const F& f) const {
    for (int64_t i = 0; i < n; ++i) f(i);
  }
  // Indices [0, f.bound()), a count the functor reads where it runs (at most n_max).
  template <typename F>
  void bounded(const at::Tensor& /*like*/, int64_t /*n_max*/, const F& f) const {
    for (int64_t i = 0, n = f.bound(); i < n; ++i) f(i);
  }
};

}  // namespace contactnet

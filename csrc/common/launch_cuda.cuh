// Runs a per-index functor over [0, n) as a CUDA grid on the current stream of a tensor's device.
// Only generic c10 headers are used (no c10/cuda), so this compiles against any torch build.
#pragma once

#include <algorithm>

#include <ATen/core/Tensor.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>
#include <cuda_runtime.h>

namespace contactnet {

inline cudaStream_t current_cuda_stream(const at::Tensor& t) {
  return static_cast<cudaStream_t>(
      c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getStream(t.device()).native_handle());
}

template <typename F>
__global__ void for_each_kernel(int64_t n, F f) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) f(i);
}

// Indices [0, f.bound()): a count each thread reads on the device, so a launch whose count is
// only known there (a fixed-capacity list's rows in use, under a CUDA graph) costs the indices in
// use, not the capacity.
template <typename F>
__global__ void for_each_bounded_kernel(F f) {
  const int64_t n = f.bound();
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    f(i);
}

// Launches on the current stream of `like`'s device, with that device made current.
template <typename F>
void launch_for_each(const at::Tensor& like, int64_t n, const F& f, int threads = 256) {
  if (n == 0) return;
  c10::DeviceGuard guard(like.device());
  const int64_t blocks = (n + threads - 1) / threads;
  for_each_kernel<<<static_cast<unsigned>(blocks), threads, 0, current_cuda_stream(like)>>>(n, f);
  const cudaError_t err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, "contactnet CUDA launch failed: ", cudaGetErrorString(err));
}

}  // namespace contactnet

namespace contactnet {

// Launcher for the device-generic op implementations (see e.g. primitive_distance.h).
struct CudaLauncher {
  template <typename F>
  void operator()(const at::Tensor& like, int64_t n, const F& f) const {
    launch_for_each(like, n, f);
  }
  // f(i) for i in [0, f.bound()) <= n_max: a grid of at most kBoundedThreads threads (about two
  // waves of a large GPU) striding over the count.
  template <typename F>
  void bounded(const at::Tensor& like, int64_t n_max, const F& f, int threads = 256) const {
    constexpr int64_t kBoundedThreads = int64_t(1) << 19;
    if (n_max == 0) return;
    c10::DeviceGuard guard(like.device());
    const int64_t blocks = (std::min(n_max, kBoundedThreads) + threads - 1) / threads;
    for_each_bounded_kernel<<<static_cast<unsigned>(blocks), threads, 0, current_cuda_stream(like)>>>(f);
    const cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "contactnet CUDA launch failed: ", cudaGetErrorString(err));
  }
};

}  // namespace contactnet

// Runs a per-index functor over [0, n) as a CUDA grid on the current stream of a tensor's device.
// Only generic c10 headers are used (no c10/cuda), so this compiles against any torch build.
#pragma once

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
};

}  // namespace contactnet

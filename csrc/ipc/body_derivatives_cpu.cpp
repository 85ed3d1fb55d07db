// ipc_body_pair_derivatives(_sum) (see body_derivatives.h): schemas and CPU kernels.
// Kept apart from ipc_cpu.cpp's registrations so the op can move into a generated list as one group.
#include <torch/library.h>

#include "common/launch_cpu.h"
#include "ipc/body_derivatives.h"

namespace contactnet {
namespace {

constexpr CpuLauncher kBlockLaunch{64};  // one index: a 12×12 block, ~1 µs

std::tuple<at::Tensor, at::Tensor> body_pair_derivatives_cpu(const at::Tensor& local_gradient,
                                                             const at::Tensor& local_hessian,
                                                             const at::Tensor& stencils,
                                                             const at::Tensor& is_face_vertex,
                                                             const at::Tensor& rest_vertices) {
  return ipc_body_pair_derivatives_impl(local_gradient, local_hessian, stencils, is_face_vertex,
                                        rest_vertices, kBlockLaunch);
}

// Summing adds each candidate's blocks into shared rows: one index at a time, in order.
struct SerialCpuLauncher {
  template <typename F>
  void operator()(const at::Tensor& /*like*/, int64_t n, const F& f) const {
    for (int64_t i = 0; i < n; ++i) f(i);
  }
};

std::tuple<at::Tensor, at::Tensor> body_pair_derivatives_sum_cpu(
    const at::Tensor& local_gradient, const at::Tensor& local_hessian, const at::Tensor& stencils,
    const at::Tensor& is_face_vertex, const at::Tensor& rest_vertices, const at::Tensor& body_index,
    const at::Tensor& block_index, int64_t num_bodies, int64_t num_blocks) {
  return ipc_body_pair_derivatives_sum_impl(local_gradient, local_hessian, stencils, is_face_vertex,
                                            rest_vertices, body_index, block_index, num_bodies,
                                            num_blocks, SerialCpuLauncher{});
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(contactnet, m) {
  m.def(
      "ipc_body_pair_derivatives(Tensor local_gradient, Tensor local_hessian, Tensor stencils, "
      "Tensor is_face_vertex, Tensor rest_vertices) -> (Tensor gradient, Tensor hessian)");
  m.def(
      "ipc_body_pair_derivatives_sum(Tensor local_gradient, Tensor local_hessian, Tensor stencils, "
      "Tensor is_face_vertex, Tensor rest_vertices, Tensor body_index, Tensor block_index, "
      "int num_bodies, int num_blocks) -> (Tensor gradient, Tensor hessian)");
}

TORCH_LIBRARY_IMPL(contactnet, CPU, m) {
  m.impl("ipc_body_pair_derivatives", &body_pair_derivatives_cpu);
  m.impl("ipc_body_pair_derivatives_sum", &body_pair_derivatives_sum_cpu);
}

}  // namespace contactnet

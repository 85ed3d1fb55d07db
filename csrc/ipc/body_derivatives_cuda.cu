// ipc_body_pair_derivatives(_sum) (see body_derivatives.h): CUDA kernels, the same functor as on the CPU.
#include <torch/library.h>

#include "common/launch_cuda.cuh"
#include "ipc/body_derivatives.h"

namespace contactnet {
namespace {

std::tuple<at::Tensor, at::Tensor> body_pair_derivatives_cuda(const at::Tensor& local_gradient,
                                                              const at::Tensor& local_hessian,
                                                              const at::Tensor& stencils,
                                                              const at::Tensor& is_face_vertex,
                                                              const at::Tensor& rest_vertices) {
  return ipc_body_pair_derivatives_impl(local_gradient, local_hessian, stencils, is_face_vertex,
                                        rest_vertices, CudaLauncher{});
}

std::tuple<at::Tensor, at::Tensor> body_pair_derivatives_sum_cuda(
    const at::Tensor& local_gradient, const at::Tensor& local_hessian, const at::Tensor& stencils,
    const at::Tensor& is_face_vertex, const at::Tensor& rest_vertices, const at::Tensor& body_index,
    const at::Tensor& block_index, int64_t num_bodies, int64_t num_blocks) {
  return ipc_body_pair_derivatives_sum_impl(local_gradient, local_hessian, stencils, is_face_vertex,
                                            rest_vertices, body_index, block_index, num_bodies,
                                            num_blocks, CudaLauncher{});
}

}  // namespace

TORCH_LIBRARY_IMPL(contactnet, CUDA, m) {
  m.impl("ipc_body_pair_derivatives", &body_pair_derivatives_cuda);
  m.impl("ipc_body_pair_derivatives_sum", &body_pair_derivatives_sum_cuda);
}

}  // namespace contactnet

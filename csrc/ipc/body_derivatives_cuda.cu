// ipc_body_pair_derivatives (see body_derivatives.h): CUDA kernel, the same functor as on the CPU.
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

}  // namespace

TORCH_LIBRARY_IMPL(contactnet, CUDA, m) {
  m.impl("ipc_body_pair_derivatives", &body_pair_derivatives_cuda);
}

}  // namespace contactnet

// ipc_body_pair_derivatives (see body_derivatives.h): schema and CPU kernel.
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

}  // namespace

TORCH_LIBRARY_FRAGMENT(contactnet, m) {
  m.def(
      "ipc_body_pair_derivatives(Tensor local_gradient, Tensor local_hessian, Tensor stencils, "
      "Tensor is_face_vertex, Tensor rest_vertices) -> (Tensor gradient, Tensor hessian)");
}

TORCH_LIBRARY_IMPL(contactnet, CPU, m) {
  m.impl("ipc_body_pair_derivatives", &body_pair_derivatives_cpu);
}

}  // namespace contactnet

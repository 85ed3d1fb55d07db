#include <torch/library.h>

#include "common/launch_cuda.cuh"
#include "hull_separation/hull_separation.h"

namespace contactnet {
namespace {

at::Tensor hulls_separated_cuda(CN_HULL_SEPARATION_ARGS) {
  return hulls_separated_impl(CN_HULL_SEPARATION_PASS, CudaLauncher{});
}

}  // namespace

TORCH_LIBRARY_IMPL(contactnet, CUDA, m) { m.impl("hulls_separated", &hulls_separated_cuda); }

}  // namespace contactnet

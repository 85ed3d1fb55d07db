#include <torch/library.h>

#include "common/launch_cuda.cuh"
#include "ipc/ipc_ops.h"

namespace contactnet {
namespace {

// The launchers of ipc_ops.h: one GPU thread per index for every cost class.
struct IpcCudaLaunchers {
  static constexpr CudaLauncher cheap{}, medium{}, heavy{}, hessian{}, grid{}, sweep{}, traversal{}, block{},
      ordered{};
};

}  // namespace

TORCH_LIBRARY_IMPL(contactnet, CUDA, m) {
  for_each_ipc_op<IpcCudaLaunchers>(
      [&](const char* name, const char*, auto fn) { m.impl(name, fn); });
}

}  // namespace contactnet

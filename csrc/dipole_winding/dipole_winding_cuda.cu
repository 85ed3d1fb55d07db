#include <torch/library.h>

#include "common/launch_cuda.cuh"
#include "dipole_winding/dipole_winding.h"

namespace contactnet {
namespace {

// One thread per query.
at::Tensor dipoles_enclose_cuda(const at::Tensor& dipoles, const at::Tensor& ids, const at::Tensor& probes,
                                double inside) {
  return dipoles_enclose_impl(dipoles, ids, probes, inside, CudaLauncher{});
}

}  // namespace

TORCH_LIBRARY_IMPL(contactnet, CUDA, m) { m.impl("dipoles_enclose", &dipoles_enclose_cuda); }

}  // namespace contactnet

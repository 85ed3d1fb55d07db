#include <torch/library.h>

#include "common/launch_cuda.cuh"
#include "grid_sample_rows/grid_sample_rows.h"

namespace contactnet {
namespace {

at::Tensor grid_sample_rows_cuda(const at::Tensor& rows, int64_t grid, const at::Tensor& ids,
                                 const at::Tensor& coords) {
  return grid_sample_rows_impl(rows, grid, ids, coords, CudaLauncher{});
}

at::Tensor grid_sample_rows_backward_cuda(const at::Tensor& rows, int64_t grid, const at::Tensor& ids,
                                          const at::Tensor& coords, const at::Tensor& grad_out) {
  return grid_sample_rows_backward_impl(rows, grid, ids, coords, grad_out, CudaLauncher{});
}

}  // namespace

TORCH_LIBRARY_IMPL(contactnet, CUDA, m) {
  m.impl("grid_sample_rows", &grid_sample_rows_cuda);
  m.impl("grid_sample_rows_backward", &grid_sample_rows_backward_cuda);
}

}  // namespace contactnet

#include <torch/library.h>

#include "common/launch_cpu.h"
#include "grid_sample_rows/grid_sample_rows.h"

namespace contactnet {
namespace {

// A sample reads 8 rows of D numbers (tens of nanoseconds): tasks of 1024.
constexpr CpuLauncher kSampleLaunch{1024};

at::Tensor grid_sample_rows_cpu(const at::Tensor& rows, int64_t grid, const at::Tensor& ids,
                                const at::Tensor& coords) {
  return grid_sample_rows_impl(rows, grid, ids, coords, kSampleLaunch);
}

at::Tensor grid_sample_rows_backward_cpu(const at::Tensor& rows, int64_t grid, const at::Tensor& ids,
                                         const at::Tensor& coords, const at::Tensor& grad_out) {
  return grid_sample_rows_backward_impl(rows, grid, ids, coords, grad_out, kSampleLaunch);
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(contactnet, m) {
  m.def("grid_sample_rows(Tensor rows, int grid, Tensor ids, Tensor coords) -> Tensor");
  m.def("grid_sample_rows_backward(Tensor rows, int grid, Tensor ids, Tensor coords, Tensor grad_out) "
        "-> Tensor");
}

TORCH_LIBRARY_IMPL(contactnet, CPU, m) {
  m.impl("grid_sample_rows", &grid_sample_rows_cpu);
  m.impl("grid_sample_rows_backward", &grid_sample_rows_backward_cpu);
}

}  // namespace contactnet

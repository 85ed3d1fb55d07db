#include <torch/library.h>

#include "common/launch_cuda.cuh"
#include "locc_cooccupancy/locc_cooccupancy.h"

namespace contactnet {
namespace {

// One thread per query: a pass over its K points, then its few kept ones.
std::tuple<at::Tensor, at::Tensor> locc_point_cooccupancy_cuda(
    const at::Tensor& points, const at::Tensor& point_queries, const at::Tensor& keys, const at::Tensor& occupancy,
    int64_t grid, const at::Tensor& ids_own, const at::Tensor& ids_other, const at::Tensor& rotation,
    const at::Tensor& translation, const at::Tensor& aabb_other, int64_t count) {
  return locc_point_cooccupancy_impl(points, point_queries, keys, occupancy, grid, ids_own, ids_other, rotation,
                                     translation, aabb_other, count, CudaLauncher{});
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> locc_point_cooccupancy_backward_cuda(
    const at::Tensor& points, const at::Tensor& point_queries, const at::Tensor& keys, const at::Tensor& occupancy,
    int64_t grid, const at::Tensor& ids_own, const at::Tensor& ids_other, const at::Tensor& rotation,
    const at::Tensor& translation, const at::Tensor& aabb_other, int64_t count, const at::Tensor& arg,
    const at::Tensor& grad_values, bool table_grads) {
  return locc_point_cooccupancy_backward_impl(points, point_queries, keys, occupancy, grid, ids_own, ids_other,
                                              rotation, translation, aabb_other, count, arg, grad_values,
                                              table_grads, CudaLauncher{}, CudaLauncher{});
}

}  // namespace

TORCH_LIBRARY_IMPL(contactnet, CUDA, m) {
  m.impl("locc_point_cooccupancy", &locc_point_cooccupancy_cuda);
  m.impl("locc_point_cooccupancy_backward", &locc_point_cooccupancy_backward_cuda);
}

}  // namespace contactnet

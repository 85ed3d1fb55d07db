#include <torch/library.h>

#include "common/launch_cpu.h"
#include "locc_cooccupancy/locc_cooccupancy.h"

namespace contactnet {
namespace {

// A query costs from a pass over its K points (microseconds) to ranking and reading hundreds of
// them: the threads take queries one at a time.
std::tuple<at::Tensor, at::Tensor> locc_point_cooccupancy_cpu(
    const at::Tensor& points, const at::Tensor& point_queries, const at::Tensor& keys, const at::Tensor& occupancy,
    int64_t grid, const at::Tensor& ids_own, const at::Tensor& ids_other, const at::Tensor& rotation,
    const at::Tensor& translation, const at::Tensor& aabb_other, int64_t count) {
  return locc_point_cooccupancy_impl(points, point_queries, keys, occupancy, grid, ids_own, ids_other, rotation,
                                     translation, aabb_other, count, CpuDynamicLauncher{});
}

// A query's backward reads D argmax points' 8 corners (about a microsecond): tasks of 64, or one
// query at a time in order where the table's gradients are summed (the same sums every run).
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> locc_point_cooccupancy_backward_cpu(
    const at::Tensor& points, const at::Tensor& point_queries, const at::Tensor& keys, const at::Tensor& occupancy,
    int64_t grid, const at::Tensor& ids_own, const at::Tensor& ids_other, const at::Tensor& rotation,
    const at::Tensor& translation, const at::Tensor& aabb_other, int64_t count, const at::Tensor& arg,
    const at::Tensor& grad_values, bool table_grads) {
  return locc_point_cooccupancy_backward_impl(points, point_queries, keys, occupancy, grid, ids_own, ids_other,
                                              rotation, translation, aabb_other, count, arg, grad_values,
                                              table_grads, CpuLauncher{64}, CpuSerialLauncher{});
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(contactnet, m) {
  m.def(
      "locc_point_cooccupancy(Tensor points, Tensor point_queries, Tensor keys, Tensor occupancy, int grid, "
      "Tensor ids_own, Tensor ids_other, Tensor rotation, Tensor translation, Tensor aabb_other, int count) "
      "-> (Tensor values, Tensor arg)");
  m.def(
      "locc_point_cooccupancy_backward(Tensor points, Tensor point_queries, Tensor keys, Tensor occupancy, "
      "int grid, Tensor ids_own, Tensor ids_other, Tensor rotation, Tensor translation, Tensor aabb_other, "
      "int count, Tensor arg, Tensor grad_values, bool table_grads) -> (Tensor grad_rotation, "
      "Tensor grad_translation, Tensor grad_point_queries, Tensor grad_keys)");
}

TORCH_LIBRARY_IMPL(contactnet, CPU, m) {
  m.impl("locc_point_cooccupancy", &locc_point_cooccupancy_cpu);
  m.impl("locc_point_cooccupancy_backward", &locc_point_cooccupancy_backward_cpu);
}

}  // namespace contactnet

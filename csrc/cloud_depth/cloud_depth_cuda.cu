#include <torch/library.h>

#include "cloud_depth/cloud_depth.h"
#include "common/launch_cuda.cuh"

namespace contactnet {
namespace {

// One thread per query: a pass over its K points, searching the other's cells around the near ones.
std::tuple<at::Tensor, at::Tensor, at::Tensor> cloud_depth_cuda(
    const at::Tensor& points, const at::Tensor& normals, const at::Tensor& starts, const at::Tensor& ids_own,
    const at::Tensor& ids_other, const at::Tensor& radius, const at::Tensor& rotation,
    const at::Tensor& translation, const at::Tensor& aabb_other, int64_t neighbours) {
  return cloud_depth_impl(points, normals, starts, ids_own, ids_other, radius, rotation, translation, aabb_other,
                          neighbours, CudaLauncher{});
}

}  // namespace

TORCH_LIBRARY_IMPL(contactnet, CUDA, m) { m.impl("cloud_depth", &cloud_depth_cuda); }

}  // namespace contactnet

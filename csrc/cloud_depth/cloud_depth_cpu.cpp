#include <torch/library.h>

#include "cloud_depth/cloud_depth.h"
#include "common/launch_cpu.h"

namespace contactnet {
namespace {

// A query costs from a pass over its K points to searching the other's cells around hundreds of
// them: the threads take queries one at a time.
std::tuple<at::Tensor, at::Tensor, at::Tensor> cloud_depth_cpu(
    const at::Tensor& points, const at::Tensor& normals, const at::Tensor& starts, const at::Tensor& ids_own,
    const at::Tensor& ids_other, const at::Tensor& radius, const at::Tensor& rotation,
    const at::Tensor& translation, const at::Tensor& aabb_other, int64_t neighbours) {
  return cloud_depth_impl(points, normals, starts, ids_own, ids_other, radius, rotation, translation, aabb_other,
                          neighbours, CpuDynamicLauncher{});
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(contactnet, m) {
  m.def(
      "cloud_depth(Tensor points, Tensor normals, Tensor starts, Tensor ids_own, Tensor ids_other, "
      "Tensor radius, Tensor rotation, Tensor translation, Tensor aabb_other, int neighbours) "
      "-> (Tensor depth, Tensor own_point, Tensor neighbour)");
}

TORCH_LIBRARY_IMPL(contactnet, CPU, m) { m.impl("cloud_depth", &cloud_depth_cpu); }

}  // namespace contactnet

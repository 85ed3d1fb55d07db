#include <torch/library.h>

#include "common/launch_cpu.h"
#include "locc_crop/locc_crop.h"

namespace contactnet {
namespace {

constexpr CpuLauncher kCropLaunch{64};  // a query is ~1 µs of work

CropOut locc_crop_cpu(const at::Tensor& aabb, const at::Tensor& rotation, const at::Tensor& offset,
                      const at::Tensor& reach, int64_t grid) {
  return locc_crop_impl(aabb, rotation, offset, reach, grid, kCropLaunch);
}

CropOut locc_crop_pool_cpu(const at::Tensor& aabb, const at::Tensor& rotation, const at::Tensor& offset,
                           const at::Tensor& reach, int64_t grid, const at::Tensor& rows, const at::Tensor& ids) {
  return locc_crop_pool_impl(aabb, rotation, offset, reach, grid, rows, ids, kCropLaunch);
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(contactnet, m) {
  m.def(
      "locc_crop(Tensor aabb, Tensor rotation, Tensor offset, Tensor reach, int grid) -> "
      "(Tensor weights, Tensor mean_own, Tensor count)");
  m.def(
      "locc_crop_pool(Tensor aabb, Tensor rotation, Tensor offset, Tensor reach, int grid, Tensor rows, "
      "Tensor ids) -> (Tensor pooled, Tensor mean_own, Tensor count)");
}

TORCH_LIBRARY_IMPL(contactnet, CPU, m) {
  m.impl("locc_crop", &locc_crop_cpu);
  m.impl("locc_crop_pool", &locc_crop_pool_cpu);
}

}  // namespace contactnet

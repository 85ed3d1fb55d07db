#include <torch/library.h>

#include "common/launch_cuda.cuh"
#include "locc_crop/locc_crop.h"

namespace contactnet {
namespace {

// One thread per query: M^3 <= 4096 cheap cell tests from per-thread axis tables.
CropOut locc_crop_cuda(const at::Tensor& aabb, const at::Tensor& rotation, const at::Tensor& offset,
                       const at::Tensor& reach, int64_t grid) {
  return locc_crop_impl(aabb, rotation, offset, reach, grid, CudaLauncher{});
}

// One thread per query, reading its kept cells' rows.
CropOut locc_crop_pool_cuda(const at::Tensor& aabb, const at::Tensor& rotation, const at::Tensor& offset,
                            const at::Tensor& reach, int64_t grid, const at::Tensor& rows, const at::Tensor& ids) {
  return locc_crop_pool_impl(aabb, rotation, offset, reach, grid, rows, ids, CudaLauncher{});
}

}  // namespace

TORCH_LIBRARY_IMPL(contactnet, CUDA, m) {
  m.impl("locc_crop", &locc_crop_cuda);
  m.impl("locc_crop_pool", &locc_crop_pool_cuda);
}

}  // namespace contactnet

// LOCC's local crop (algorithm: locc_crop_kernels.h).
//
// contactnet::locc_crop(Tensor aabb, Tensor rotation, Tensor offset, Tensor reach, int grid)
//     aabb (Q, 2, 3): each query's own box (min, max corners, own frame, metres)
//     rotation (Q, 3, 3): own frame -> the other object's box frame
//     offset (Q, 3): own origin in the other box's frame, minus the other box's centre
//     reach (Q, 3): the other box's half-size plus the own cell half-diagonal
//     all float32 or float64 (one dtype), contiguous, one device; 2 <= grid <= 16
//  -> weights (Q, M^3): 1 / count on kept cells (x-major order, as the shape encoder), else 0
//     mean_own (Q, 3): the kept cells' mean centre in the own frame (0 when none is kept)
//     count (Q,): kept cells
//
// contactnet::locc_crop_pool(aabb, rotation, offset, reach, int grid, Tensor rows, Tensor ids)
//     the same crop, pooled: rows (N·M^3, F) embeddings as rows (embedding n's cell c at
//     n·M^3 + c, the dtype of aabb), ids (Q,) int64 in [0, N): each query's embedding
//  -> pooled (Q, F): the kept cells' mean row (0 when none is kept), mean_own, count
#pragma once

#include <tuple>

#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include "common/checks.h"
#include "locc_crop/locc_crop_kernels.h"

namespace contactnet {

using CropOut = std::tuple<at::Tensor, at::Tensor, at::Tensor>;

inline void check_crop_inputs(const at::Tensor& aabb, const at::Tensor& rotation, const at::Tensor& offset,
                              const at::Tensor& reach, int64_t grid) {
  check_float_input(aabb, "aabb", {-1, 2, 3});
  const int64_t q = aabb.size(0);
  check_float_input(rotation, "rotation", {q, 3, 3});
  check_float_input(offset, "offset", {q, 3});
  check_float_input(reach, "reach", {q, 3});
  check_same_device_dtype(aabb, "aabb", rotation, "rotation");
  check_same_device_dtype(aabb, "aabb", offset, "offset");
  check_same_device_dtype(aabb, "aabb", reach, "reach");
  TORCH_CHECK(grid >= 2 && grid <= kCropMaxGrid, "grid: expected 2 <= grid <= ", kCropMaxGrid,
              ", got ", grid);
}

template <typename Launch>
CropOut locc_crop_impl(const at::Tensor& aabb, const at::Tensor& rotation, const at::Tensor& offset,
                       const at::Tensor& reach, int64_t grid, const Launch& launch) {
  check_crop_inputs(aabb, rotation, offset, reach, grid);
  const int64_t q = aabb.size(0);
  const auto opt = aabb.options();
  at::Tensor weights = at::empty({q, grid * grid * grid}, opt), mean_own = at::empty({q, 3}, opt),
             count = at::empty({q}, opt);
  AT_DISPATCH_FLOATING_TYPES(aabb.scalar_type(), "locc_crop", [&] {
    launch(aabb, q,
           LoccCropFunctor<scalar_t>{aabb.data_ptr<scalar_t>(), rotation.data_ptr<scalar_t>(),
                                     offset.data_ptr<scalar_t>(), reach.data_ptr<scalar_t>(), grid,
                                     weights.data_ptr<scalar_t>(), mean_own.data_ptr<scalar_t>(),
                                     count.data_ptr<scalar_t>()});
  });
  return {weights, mean_own, count};
}

template <typename Launch>
CropOut locc_crop_pool_impl(const at::Tensor& aabb, const at::Tensor& rotation, const at::Tensor& offset,
                            const at::Tensor& reach, int64_t grid, const at::Tensor& rows, const at::Tensor& ids,
                            const Launch& launch) {
  check_crop_inputs(aabb, rotation, offset, reach, grid);
  const int64_t q = aabb.size(0), cells = grid * grid * grid;
  check_float_input(rows, "rows", {-1, -1});
  TORCH_CHECK_VALUE(rows.size(0) % cells == 0, "rows: expected N·M^3 rows (M = ", grid, "), got ", rows.size(0));
  check_same_device_dtype(rows, "rows", aabb, "aabb");
  check_index_input(ids, "ids", {q}, rows.size(0) / cells);
  check_same_device(ids, "ids", aabb, "aabb");
  const auto opt = aabb.options();
  at::Tensor pooled = at::empty({q, rows.size(1)}, opt), mean_own = at::empty({q, 3}, opt),
             count = at::empty({q}, opt);
  AT_DISPATCH_FLOATING_TYPES(aabb.scalar_type(), "locc_crop_pool", [&] {
    const LoccCropFunctor<scalar_t> crop{aabb.data_ptr<scalar_t>(), rotation.data_ptr<scalar_t>(),
                                         offset.data_ptr<scalar_t>(), reach.data_ptr<scalar_t>(), grid,
                                         nullptr, mean_own.data_ptr<scalar_t>(), count.data_ptr<scalar_t>()};
    launch(aabb, q,
           LoccCropPoolFunctor<scalar_t>{crop, rows.data_ptr<scalar_t>(), ids.data_ptr<int64_t>(), rows.size(1),
                                         pooled.data_ptr<scalar_t>()});
  });
  return {pooled, mean_own, count};
}

}  // namespace contactnet

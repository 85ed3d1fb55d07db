// LOCC's co-occupancy term at surface points, fused (algorithm: locc_cooccupancy_kernels.h).
//
// contactnet::locc_point_cooccupancy(Tensor points, Tensor point_queries, Tensor keys,
//     Tensor occupancy, int grid, Tensor ids_own, Tensor ids_other, Tensor rotation,
//     Tensor translation, Tensor aabb_other, int count)
//     points (N, K, 3), point_queries (N, K, D): each object's encoded points (own frame) and
//       their co-occupancy queries; keys (N·M³, D), occupancy (N·M³,): each object's key grid and
//       points per cell as rows (cell (i, j, k) of object n at n·M³ + (i·M + j)·M + k)
//     ids_own, ids_other (Q,) int64 in [0, N); rotation (Q, 3, 3), translation (Q, 3): own frame
//       -> other's frame; aabb_other (Q, 2, 3): the other's box in its frame
//     count >= 1: sites read per query, the kept points of highest rank
//     float32 or float64 (one dtype), contiguous, one device
//  -> (Q, D): per channel, the max over the read sites of query ⊙ key (0 where no point is kept)
#pragma once

#include <limits>

#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include "common/checks.h"
#include "locc_cooccupancy/locc_cooccupancy_kernels.h"

namespace contactnet {

template <typename Launch>
at::Tensor locc_point_cooccupancy_impl(const at::Tensor& points, const at::Tensor& point_queries,
                                       const at::Tensor& keys, const at::Tensor& occupancy,
                                       int64_t grid, const at::Tensor& ids_own,
                                       const at::Tensor& ids_other, const at::Tensor& rotation,
                                       const at::Tensor& translation, const at::Tensor& aabb_other,
                                       int64_t count, const Launch& launch) {
  check_float_input(points, "points", {-1, -1, 3});
  const int64_t n = points.size(0), k = points.size(1);
  check_float_input(point_queries, "point_queries", {n, k, -1});
  const int64_t d = point_queries.size(2);
  TORCH_CHECK_VALUE(grid >= 1, "grid: expected M >= 1, got ", grid);
  const int64_t cells = grid * grid * grid;
  check_float_input(keys, "keys", {n * cells, d});
  check_float_input(occupancy, "occupancy", {n * cells});
  check_index_input(ids_own, "ids_own", {-1}, n);
  const int64_t q = ids_own.size(0);
  check_index_input(ids_other, "ids_other", {q}, n);
  check_float_input(rotation, "rotation", {q, 3, 3});
  check_float_input(translation, "translation", {q, 3});
  check_float_input(aabb_other, "aabb_other", {q, 2, 3});
  TORCH_CHECK_VALUE(count >= 1, "count: expected sites per query >= 1, got ", count);
  TORCH_CHECK_VALUE(k < (int64_t(1) << 31), "points: expected fewer than 2^31 points per object, got ", k);
  check_same_device_dtype(point_queries, "point_queries", points, "points");
  check_same_device_dtype(keys, "keys", points, "points");
  check_same_device_dtype(occupancy, "occupancy", points, "points");
  check_same_device_dtype(rotation, "rotation", points, "points");
  check_same_device_dtype(translation, "translation", points, "points");
  check_same_device_dtype(aabb_other, "aabb_other", points, "points");
  check_same_device(ids_own, "ids_own", points, "points");
  check_same_device(ids_other, "ids_other", points, "points");
  at::Tensor out = at::empty({q, d}, points.options());
  // Scratch: each query's kept points (only as many entries touched), their ranks for the queries
  // that keep more points than they read.
  at::Tensor priority = at::empty({k > count ? q * k : 0}, points.options());
  at::Tensor site = at::empty({q * k}, points.options().dtype(at::kInt));
  AT_DISPATCH_FLOATING_TYPES(points.scalar_type(), "locc_point_cooccupancy", [&] {
    launch(points, q,
           LoccPointCooccupancyFunctor<scalar_t>{
               points.data_ptr<scalar_t>(), point_queries.data_ptr<scalar_t>(),
               keys.data_ptr<scalar_t>(), occupancy.data_ptr<scalar_t>(),
               ids_own.data_ptr<int64_t>(), ids_other.data_ptr<int64_t>(),
               rotation.data_ptr<scalar_t>(), translation.data_ptr<scalar_t>(),
               aabb_other.data_ptr<scalar_t>(), k, d, grid, count,
               std::numeric_limits<scalar_t>::lowest(), priority.data_ptr<scalar_t>(),
               site.data_ptr<int32_t>(), out.data_ptr<scalar_t>()});
  });
  return out;
}

}  // namespace contactnet

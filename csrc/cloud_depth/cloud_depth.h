// How deep a query's own points reach into the other's cloud (algorithm: cloud_depth_kernels.h).
//
// contactnet::cloud_depth(Tensor points, Tensor normals, Tensor starts, Tensor ids_own, Tensor ids_other,
//     Tensor radius, Tensor rotation, Tensor translation, Tensor aabb_other, int neighbours)
//     points, normals (N, K, 3): each object's points (its frame) and unit normals, sorted by the
//       cells of an M³ grid over its box (sort_by_cell); starts (N, M³ + 1) int32: each cell's first
//       point, then K
//     ids_own, ids_other (Q,) int64 in [0, N); radius (Q,): each query's search radius; rotation
//       (Q, 3, 3), translation (Q, 3): own frame -> other's frame; aabb_other (Q, 2, 3): the other's
//       grid box in its frame
//     neighbours in [1, 8]: cloud points read per own point
//     float32 or float64 (one dtype), contiguous, one device
//  -> depth (Q,): the least weighted point-to-plane distance over the own points (the radius
//     where no own point has a neighbour), own_point (Q,) int32 (-1: none), neighbour
//     (Q, neighbours) int32 (-1 past the found ones)
#pragma once

#include <tuple>

#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include "cloud_depth/cloud_depth_kernels.h"
#include "common/checks.h"

namespace contactnet {

template <typename Launch>
std::tuple<at::Tensor, at::Tensor, at::Tensor> cloud_depth_impl(
    const at::Tensor& points, const at::Tensor& normals, const at::Tensor& starts, const at::Tensor& ids_own,
    const at::Tensor& ids_other, const at::Tensor& radius, const at::Tensor& rotation,
    const at::Tensor& translation, const at::Tensor& aabb_other, int64_t neighbours, const Launch& launch) {
  check_float_input(points, "points", {-1, -1, 3});
  const int64_t n = points.size(0), k = points.size(1);
  check_float_input(normals, "normals", {n, k, 3});
  check_input(starts, "starts", {n, -1});
  TORCH_CHECK(starts.scalar_type() == at::kInt, "starts: expected int32, got ", starts.scalar_type());
  const int64_t cells = starts.size(1) - 1;
  int64_t m = 1;
  while (m * m * m < cells) ++m;
  TORCH_CHECK_VALUE(cells >= 1 && m * m * m == cells, "starts: expected (N, M³ + 1) for a grid M, got ",
                    starts.sizes());
  check_index_input(ids_own, "ids_own", {-1}, n);
  const int64_t q = ids_own.size(0);
  check_index_input(ids_other, "ids_other", {q}, n);
  check_float_input(radius, "radius", {q});
  check_float_input(rotation, "rotation", {q, 3, 3});
  check_float_input(translation, "translation", {q, 3});
  check_float_input(aabb_other, "aabb_other", {q, 2, 3});
  TORCH_CHECK_VALUE(neighbours >= 1 && neighbours <= kCloudDepthMaxNeighbours,
                    "neighbours: expected 1 to ", kCloudDepthMaxNeighbours, ", got ", neighbours);
  TORCH_CHECK_VALUE(k < (int64_t(1) << 31), "points: expected fewer than 2^31 points per object, got ", k);
  check_same_device_dtype(normals, "normals", points, "points");
  check_same_device_dtype(radius, "radius", points, "points");
  check_same_device_dtype(rotation, "rotation", points, "points");
  check_same_device_dtype(translation, "translation", points, "points");
  check_same_device_dtype(aabb_other, "aabb_other", points, "points");
  check_same_device(starts, "starts", points, "points");
  check_same_device(ids_own, "ids_own", points, "points");
  check_same_device(ids_other, "ids_other", points, "points");
  at::Tensor depth = at::empty({q}, points.options());
  at::Tensor own_point = at::empty({q}, points.options().dtype(at::kInt));
  at::Tensor neighbour = at::empty({q, neighbours}, points.options().dtype(at::kInt));
  AT_DISPATCH_FLOATING_TYPES(points.scalar_type(), "cloud_depth", [&] {
    const CloudDepthFunctor<scalar_t> f{
        points.data_ptr<scalar_t>(),    normals.data_ptr<scalar_t>(),     starts.data_ptr<int32_t>(),
        radius.data_ptr<scalar_t>(),    ids_own.data_ptr<int64_t>(),      ids_other.data_ptr<int64_t>(),
        rotation.data_ptr<scalar_t>(),  translation.data_ptr<scalar_t>(), aabb_other.data_ptr<scalar_t>(),
        k,                              m,                                neighbours,
        depth.data_ptr<scalar_t>(),     own_point.data_ptr<int32_t>(),    neighbour.data_ptr<int32_t>()};
    launch(points, q, f);
  });
  return {depth, own_point, neighbour};
}

}  // namespace contactnet

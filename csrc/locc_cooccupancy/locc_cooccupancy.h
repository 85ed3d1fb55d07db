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
//  -> values (Q, D): per channel, the max over the read sites of query ⊙ key (0 where no point is
//     kept), and arg (Q, D) int32: the point it came from (-1 where none is kept)
//
// contactnet::locc_point_cooccupancy_backward(the same inputs, Tensor arg, Tensor grad_values,
//     bool table_grads)
//  -> grad_rotation (Q, 3, 3), grad_translation (Q, 3), and with table_grads grad_point_queries
//     (N, K, D) and grad_keys (N·M³, D) (else empty)
#pragma once

#include <limits>
#include <tuple>

#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/aminmax.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros_like.h>

#include "common/checks.h"
#include "locc_cooccupancy/locc_cooccupancy_kernels.h"

namespace contactnet {

// Checks the inputs and returns the forward functor over them (outputs and scratch unset).
template <typename T>
LoccPointCooccupancyFunctor<T> cooccupancy_functor(const at::Tensor& points, const at::Tensor& point_queries,
                                                   const at::Tensor& keys, const at::Tensor& occupancy,
                                                   int64_t grid, const at::Tensor& ids_own,
                                                   const at::Tensor& ids_other, const at::Tensor& rotation,
                                                   const at::Tensor& translation, const at::Tensor& aabb_other,
                                                   int64_t count) {
  return {points.data_ptr<T>(), point_queries.data_ptr<T>(), keys.data_ptr<T>(), occupancy.data_ptr<T>(),
          ids_own.data_ptr<int64_t>(), ids_other.data_ptr<int64_t>(), rotation.data_ptr<T>(),
          translation.data_ptr<T>(), aabb_other.data_ptr<T>(), points.size(1), point_queries.size(2), grid, count,
          std::numeric_limits<T>::lowest(), nullptr, nullptr, nullptr, nullptr};
}

inline void check_cooccupancy_inputs(const at::Tensor& points, const at::Tensor& point_queries,
                                     const at::Tensor& keys, const at::Tensor& occupancy, int64_t grid,
                                     const at::Tensor& ids_own, const at::Tensor& ids_other,
                                     const at::Tensor& rotation, const at::Tensor& translation,
                                     const at::Tensor& aabb_other, int64_t count) {
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
}

template <typename Launch>
std::tuple<at::Tensor, at::Tensor> locc_point_cooccupancy_impl(
    const at::Tensor& points, const at::Tensor& point_queries, const at::Tensor& keys, const at::Tensor& occupancy,
    int64_t grid, const at::Tensor& ids_own, const at::Tensor& ids_other, const at::Tensor& rotation,
    const at::Tensor& translation, const at::Tensor& aabb_other, int64_t count, const Launch& launch) {
  check_cooccupancy_inputs(points, point_queries, keys, occupancy, grid, ids_own, ids_other, rotation, translation,
                           aabb_other, count);
  const int64_t q = ids_own.size(0), k = points.size(1), d = point_queries.size(2);
  at::Tensor out = at::empty({q, d}, points.options());
  at::Tensor arg = at::empty({q, d}, points.options().dtype(at::kInt));
  // Scratch: each query's kept points (only as many entries touched), their ranks for the queries
  // that keep more points than they read.
  at::Tensor priority = at::empty({k > count ? q * k : 0}, points.options());
  at::Tensor site = at::empty({q * k}, points.options().dtype(at::kInt));
  AT_DISPATCH_FLOATING_TYPES(points.scalar_type(), "locc_point_cooccupancy", [&] {
    auto f = cooccupancy_functor<scalar_t>(points, point_queries, keys, occupancy, grid, ids_own, ids_other,
                                           rotation, translation, aabb_other, count);
    f.priority = priority.data_ptr<scalar_t>();
    f.site = site.data_ptr<int32_t>();
    f.out = out.data_ptr<scalar_t>();
    f.arg = arg.data_ptr<int32_t>();
    launch(points, q, f);
  });
  return {out, arg};
}

// launch: per query; serial_launch: one query at a time, in order, when the table's gradients are
// summed (queries share its rows).
template <typename Launch, typename SerialLaunch>
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> locc_point_cooccupancy_backward_impl(
    const at::Tensor& points, const at::Tensor& point_queries, const at::Tensor& keys, const at::Tensor& occupancy,
    int64_t grid, const at::Tensor& ids_own, const at::Tensor& ids_other, const at::Tensor& rotation,
    const at::Tensor& translation, const at::Tensor& aabb_other, int64_t count, const at::Tensor& arg,
    const at::Tensor& grad_values, bool table_grads, const Launch& launch, const SerialLaunch& serial_launch) {
  check_cooccupancy_inputs(points, point_queries, keys, occupancy, grid, ids_own, ids_other, rotation, translation,
                           aabb_other, count);
  const int64_t q = ids_own.size(0), k = points.size(1), d = point_queries.size(2);
  check_input(arg, "arg", {q, d});
  TORCH_CHECK(arg.scalar_type() == at::kInt, "arg: expected int32, got ", arg.scalar_type());
  check_same_device(arg, "arg", points, "points");
  check_float_input(grad_values, "grad_values", {q, d});
  check_same_device_dtype(grad_values, "grad_values", points, "points");
  if (arg.numel() > 0 && values_checked_in_cpp(arg)) {
    const auto [lo, hi] = at::aminmax(arg);
    TORCH_CHECK_VALUE(lo.item<int32_t>() >= -1 && hi.item<int32_t>() < k, "arg: expected point indices in [-1, ",
                      k, ")");
  }
  const auto opt = points.options();
  at::Tensor grad_rotation = at::empty({q, 3, 3}, opt), grad_translation = at::empty({q, 3}, opt);
  at::Tensor grad_point_queries = table_grads ? at::zeros_like(point_queries) : at::empty({0}, opt);
  at::Tensor grad_keys = table_grads ? at::zeros_like(keys) : at::empty({0}, opt);
  AT_DISPATCH_FLOATING_TYPES(points.scalar_type(), "locc_point_cooccupancy_backward", [&] {
    const LoccPointCooccupancyBackwardFunctor<scalar_t> f{
        cooccupancy_functor<scalar_t>(points, point_queries, keys, occupancy, grid, ids_own, ids_other, rotation,
                                      translation, aabb_other, count),
        arg.data_ptr<int32_t>(), grad_values.data_ptr<scalar_t>(), grad_rotation.data_ptr<scalar_t>(),
        grad_translation.data_ptr<scalar_t>(), table_grads ? grad_point_queries.data_ptr<scalar_t>() : nullptr,
        table_grads ? grad_keys.data_ptr<scalar_t>() : nullptr};
    if (table_grads)
      serial_launch(points, q, f);
    else
      launch(points, q, f);
  });
  return {grad_rotation, grad_translation, grad_point_queries, grad_keys};
}

}  // namespace contactnet

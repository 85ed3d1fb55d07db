// Exact distances between primitives, batched: N independent pairs, float32 or float64, one device.
//
// contactnet::triangle_distance(Tensor tri_a, Tensor tri_b)
//     tri_a, tri_b: (N, 3, 3) triangle vertices (row k = vertex k)
//  -> distance  (N,)   Euclidean distance, 0 when the triangles intersect
//     point_a   (N, 3) closest point on tri_a (on the intersection when intersecting)
//     point_b   (N, 3) closest point on tri_b
//     weights_a (N, 3) barycentric weights of point_a on tri_a's vertices
//     weights_b (N, 3) barycentric weights of point_b on tri_b's vertices
//
// contactnet::triangle_intersect(Tensor tri_a, Tensor tri_b)
//     tri_a, tri_b: (N, 3, 3)
//  -> intersect (N,) bool: the triangles intersect or touch (false for non-finite input)
//
// contactnet::point_triangle_distance(Tensor points, Tensor triangles)
//     points (N, 3), triangles (N, 3, 3)
//  -> distance (N,), closest (N, 3) point on the triangle, type (N,) int8 PointTriangleType,
//     weights (N, 3) barycentric weights of `closest`
//
// contactnet::segment_segment_distance(Tensor seg_a, Tensor seg_b)
//     seg_a, seg_b (N, 2, 3) segment end points
//  -> distance (N,), point_a (N, 3), point_b (N, 3), type (N,) int8 EdgeEdgeType,
//     params (N, 2): s, t with point_a = a0 + s (a1 - a0), point_b = b0 + t (b1 - b0)
//
// A pair with any non-finite coordinate gets NaN values and type -1.
#pragma once

#include <tuple>

#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include "common/checks.h"
#include "primitive_distance/primitive_distance_kernels.h"

namespace contactnet {

using TriangleDistanceOut = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>;
using PointTriangleDistanceOut = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor>;
using SegmentSegmentDistanceOut =
    std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>;

// Device-generic implementations: `launch(like, n, functor)` runs functor(i) for i in [0, n) on
// like's device (CpuLauncher in launch_cpu.h, CudaLauncher in launch_cuda.cuh).
// tri_a, tri_b: (N, 3, 3) float tensors on one device, of one dtype.
inline void check_triangle_pairs(const at::Tensor& tri_a, const at::Tensor& tri_b) {
  check_float_input(tri_a, "tri_a", {-1, 3, 3});
  check_float_input(tri_b, "tri_b", {-1, 3, 3});
  check_same_device_dtype(tri_a, "tri_a", tri_b, "tri_b");
  check_same_batch(tri_a, "tri_a", tri_b, "tri_b");
}

template <typename Launch>
TriangleDistanceOut triangle_distance_impl(const at::Tensor& tri_a, const at::Tensor& tri_b,
                                           const Launch& launch) {
  check_triangle_pairs(tri_a, tri_b);
  const int64_t n = tri_a.size(0);
  const auto opt = tri_a.options();
  at::Tensor distance = at::empty({n}, opt), point_a = at::empty({n, 3}, opt),
             point_b = at::empty({n, 3}, opt), weights_a = at::empty({n, 3}, opt),
             weights_b = at::empty({n, 3}, opt);
  AT_DISPATCH_FLOATING_TYPES(tri_a.scalar_type(), "triangle_distance", [&] {
    launch(tri_a, n,
           TriangleDistanceFunctor<scalar_t>{
               tri_a.data_ptr<scalar_t>(), tri_b.data_ptr<scalar_t>(),
               distance.data_ptr<scalar_t>(), point_a.data_ptr<scalar_t>(),
               point_b.data_ptr<scalar_t>(), weights_a.data_ptr<scalar_t>(),
               weights_b.data_ptr<scalar_t>()});
  });
  return {distance, point_a, point_b, weights_a, weights_b};
}

template <typename Launch>
at::Tensor triangle_intersect_impl(const at::Tensor& tri_a, const at::Tensor& tri_b,
                                   const Launch& launch) {
  check_triangle_pairs(tri_a, tri_b);
  const int64_t n = tri_a.size(0);
  at::Tensor intersect = at::empty({n}, tri_a.options().dtype(at::kBool));
  AT_DISPATCH_FLOATING_TYPES(tri_a.scalar_type(), "triangle_intersect", [&] {
    launch(tri_a, n,
           TriangleIntersectFunctor<scalar_t>{tri_a.data_ptr<scalar_t>(),
                                              tri_b.data_ptr<scalar_t>(),
                                              intersect.data_ptr<bool>()});
  });
  return intersect;
}

template <typename Launch>
PointTriangleDistanceOut point_triangle_distance_impl(const at::Tensor& points,
                                                      const at::Tensor& triangles,
                                                      const Launch& launch) {
  check_float_input(points, "points", {-1, 3});
  check_float_input(triangles, "triangles", {-1, 3, 3});
  check_same_device_dtype(points, "points", triangles, "triangles");
  check_same_batch(points, "points", triangles, "triangles");
  const int64_t n = points.size(0);
  const auto opt = points.options();
  at::Tensor distance = at::empty({n}, opt), closest = at::empty({n, 3}, opt),
             type = at::empty({n}, opt.dtype(at::kChar)), weights = at::empty({n, 3}, opt);
  AT_DISPATCH_FLOATING_TYPES(points.scalar_type(), "point_triangle_distance", [&] {
    launch(points, n,
           PointTriangleDistanceFunctor<scalar_t>{
               points.data_ptr<scalar_t>(), triangles.data_ptr<scalar_t>(),
               distance.data_ptr<scalar_t>(), closest.data_ptr<scalar_t>(),
               type.data_ptr<int8_t>(), weights.data_ptr<scalar_t>()});
  });
  return {distance, closest, type, weights};
}

template <typename Launch>
SegmentSegmentDistanceOut segment_segment_distance_impl(const at::Tensor& seg_a,
                                                        const at::Tensor& seg_b,
                                                        const Launch& launch) {
  check_float_input(seg_a, "seg_a", {-1, 2, 3});
  check_float_input(seg_b, "seg_b", {-1, 2, 3});
  check_same_device_dtype(seg_a, "seg_a", seg_b, "seg_b");
  check_same_batch(seg_a, "seg_a", seg_b, "seg_b");
  const int64_t n = seg_a.size(0);
  const auto opt = seg_a.options();
  at::Tensor distance = at::empty({n}, opt), point_a = at::empty({n, 3}, opt),
             point_b = at::empty({n, 3}, opt), type = at::empty({n}, opt.dtype(at::kChar)),
             params = at::empty({n, 2}, opt);
  AT_DISPATCH_FLOATING_TYPES(seg_a.scalar_type(), "segment_segment_distance", [&] {
    launch(seg_a, n,
           SegmentSegmentDistanceFunctor<scalar_t>{
               seg_a.data_ptr<scalar_t>(), seg_b.data_ptr<scalar_t>(),
               distance.data_ptr<scalar_t>(), point_a.data_ptr<scalar_t>(),
               point_b.data_ptr<scalar_t>(), type.data_ptr<int8_t>(),
               params.data_ptr<scalar_t>()});
  });
  return {distance, point_a, point_b, type, params};
}

}  // namespace contactnet

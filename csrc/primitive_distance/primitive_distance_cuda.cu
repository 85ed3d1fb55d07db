#include <torch/library.h>

#include "common/launch_cuda.cuh"
#include "primitive_distance/primitive_distance.h"

namespace contactnet {
namespace {

TriangleDistanceOut triangle_distance_cuda(const at::Tensor& tri_a, const at::Tensor& tri_b) {
  return triangle_distance_impl(tri_a, tri_b, CudaLauncher{});
}
at::Tensor triangle_intersect_cuda(const at::Tensor& tri_a, const at::Tensor& tri_b) {
  return triangle_intersect_impl(tri_a, tri_b, CudaLauncher{});
}
PointTriangleDistanceOut point_triangle_distance_cuda(const at::Tensor& points,
                                                      const at::Tensor& triangles) {
  return point_triangle_distance_impl(points, triangles, CudaLauncher{});
}
SegmentSegmentDistanceOut segment_segment_distance_cuda(const at::Tensor& seg_a,
                                                        const at::Tensor& seg_b) {
  return segment_segment_distance_impl(seg_a, seg_b, CudaLauncher{});
}

}  // namespace

TORCH_LIBRARY_IMPL(contactnet, CUDA, m) {
  m.impl("triangle_distance", &triangle_distance_cuda);
  m.impl("triangle_intersect", &triangle_intersect_cuda);
  m.impl("point_triangle_distance", &point_triangle_distance_cuda);
  m.impl("segment_segment_distance", &segment_segment_distance_cuda);
}

}  // namespace contactnet

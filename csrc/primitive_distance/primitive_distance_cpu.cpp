#include <torch/library.h>

#include "common/launch_cpu.h"
#include "primitive_distance/primitive_distance.h"

namespace contactnet {
namespace {

// Indices per task, so that one task does a few microseconds of work.
constexpr CpuLauncher kTriangleLaunch{256};
constexpr CpuLauncher kPrimitiveLaunch{1024};

TriangleDistanceOut triangle_distance_cpu(const at::Tensor& tri_a, const at::Tensor& tri_b) {
  return triangle_distance_impl(tri_a, tri_b, kTriangleLaunch);
}
at::Tensor triangle_intersect_cpu(const at::Tensor& tri_a, const at::Tensor& tri_b) {
  return triangle_intersect_impl(tri_a, tri_b, kTriangleLaunch);
}
PointTriangleDistanceOut point_triangle_distance_cpu(const at::Tensor& points,
                                                     const at::Tensor& triangles) {
  return point_triangle_distance_impl(points, triangles, kPrimitiveLaunch);
}
SegmentSegmentDistanceOut segment_segment_distance_cpu(const at::Tensor& seg_a,
                                                       const at::Tensor& seg_b) {
  return segment_segment_distance_impl(seg_a, seg_b, kPrimitiveLaunch);
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(contactnet, m) {
  m.def(
      "triangle_distance(Tensor tri_a, Tensor tri_b) -> (Tensor distance, Tensor point_a, "
      "Tensor point_b, Tensor weights_a, Tensor weights_b)");
  m.def("triangle_intersect(Tensor tri_a, Tensor tri_b) -> Tensor");
  m.def(
      "point_triangle_distance(Tensor points, Tensor triangles) -> (Tensor distance, "
      "Tensor closest, Tensor type, Tensor weights)");
  m.def(
      "segment_segment_distance(Tensor seg_a, Tensor seg_b) -> (Tensor distance, "
      "Tensor point_a, Tensor point_b, Tensor type, Tensor params)");
}

TORCH_LIBRARY_IMPL(contactnet, CPU, m) {
  m.impl("triangle_distance", &triangle_distance_cpu);
  m.impl("triangle_intersect", &triangle_intersect_cpu);
  m.impl("point_triangle_distance", &point_triangle_distance_cpu);
  m.impl("segment_segment_distance", &segment_segment_distance_cpu);
}

}  // namespace contactnet

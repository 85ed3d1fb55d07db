// Certified separation of convex hull pairs (common/gjk.h): Q queries, query q = hull ids_a[q] at
// poses_a[q] against hull ids_b[q] at poses_b[q]. float32 or float64; one device.
//
// contactnet::hulls_separated(Tensor vertices, Tensor vertex_offsets, Tensor neighbours,
//                             Tensor neighbour_offsets, Tensor ids_a, Tensor ids_b,
//                             Tensor poses_a, Tensor poses_b, float min_gap, int max_iterations)
//     vertices (V, 3) T: every hull's vertices in its object frame, hull after hull
//     vertex_offsets (M + 1,) int64: hull m owns vertex rows [vertex_offsets[m], vertex_offsets[m + 1])
//     neighbours (E,) int64: hull-local vertex indices of the hulls' vertex graphs
//     neighbour_offsets (V + 1,) int64: vertex row i's neighbours are neighbours[[i], [i + 1])
//       (these four as contactnet.geometry.ConvexHulls builds them; their values are trusted, like
//        a library's BVH)
//     ids_a, ids_b (Q,) int64 hull ids in [0, M); poses_a, poses_b (Q, 7) T world poses
//     min_gap >= 0 (metres): certify only gaps above it; max_iterations >= 1: GJK's cap
//  -> separated (Q,) bool: a plane provably separates the two posed hulls by more than min_gap.
//     False for touching or overlapping hulls, undecided pairs and hulls with no vertices, so
//     "true" is a certificate and "false" is not. Poses must be finite with a non-zero quaternion
//     (checked on the CPU; elsewhere a NaN pose reads false).
#pragma once

#include <utility>

#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include "common/checks.h"
#include "hull_separation/hull_separation_kernels.h"

namespace contactnet {

#define CN_HULL_SEPARATION_ARGS                                                                     \
  const at::Tensor &vertices, const at::Tensor &vertex_offsets, const at::Tensor &neighbours,       \
      const at::Tensor &neighbour_offsets, const at::Tensor &ids_a, const at::Tensor &ids_b,        \
      const at::Tensor &poses_a, const at::Tensor &poses_b, double min_gap, int64_t max_iterations
#define CN_HULL_SEPARATION_PASS                                                                     \
  vertices, vertex_offsets, neighbours, neighbour_offsets, ids_a, ids_b, poses_a, poses_b, min_gap, \
      max_iterations

template <typename Launch>
at::Tensor hulls_separated_impl(CN_HULL_SEPARATION_ARGS, const Launch& launch) {
  check_float_input(vertices, "vertices", {-1, 3});
  check_input(vertex_offsets, "vertex_offsets", {-1});
  check_input(neighbours, "neighbours", {-1});
  check_input(neighbour_offsets, "neighbour_offsets", {vertices.size(0) + 1});
  for (const auto& [t, name] : {std::pair{&vertex_offsets, "vertex_offsets"},
                                std::pair{&neighbours, "neighbours"},
                                std::pair{&neighbour_offsets, "neighbour_offsets"}}) {
    TORCH_CHECK(t->scalar_type() == at::kLong, name, ": expected int64, got ", t->scalar_type());
    check_same_device(*t, name, vertices, "vertices");
  }
  const int64_t num_hulls = vertex_offsets.size(0) - 1;
  TORCH_CHECK(num_hulls >= 1, "vertex_offsets: expected M + 1 >= 2 entries, got ", num_hulls + 1);
  check_index_input(ids_a, "ids_a", {-1}, num_hulls);
  const int64_t q = ids_a.size(0);
  check_index_input(ids_b, "ids_b", {q}, num_hulls);
  check_float_input(poses_a, "poses_a", {q, 7});
  check_float_input(poses_b, "poses_b", {q, 7});
  for (const auto& [t, name] : {std::pair{&ids_a, "ids_a"}, std::pair{&ids_b, "ids_b"}})
    check_same_device(*t, name, vertices, "vertices");
  check_same_device_dtype(poses_a, "poses_a", vertices, "vertices");
  check_same_device_dtype(poses_b, "poses_b", vertices, "vertices");
  TORCH_CHECK_VALUE(min_gap >= 0, "min_gap: expected >= 0 metres, got ", min_gap);
  TORCH_CHECK_VALUE(max_iterations >= 1, "max_iterations: expected >= 1, got ", max_iterations);
  at::Tensor separated = at::empty({q}, ids_a.options().dtype(at::kBool));
  AT_DISPATCH_FLOATING_TYPES(vertices.scalar_type(), "hulls_separated", [&] {
    if (values_checked_in_cpp(poses_a)) {
      check_query_poses<scalar_t>(poses_a, "poses_a");
      check_query_poses<scalar_t>(poses_b, "poses_b");
    }
    launch(vertices, q,
           HullSeparationFunctor<scalar_t>{
               vertices.data_ptr<scalar_t>(), vertex_offsets.data_ptr<int64_t>(),
               neighbours.data_ptr<int64_t>(), neighbour_offsets.data_ptr<int64_t>(),
               ids_a.data_ptr<int64_t>(), ids_b.data_ptr<int64_t>(), poses_a.data_ptr<scalar_t>(),
               poses_b.data_ptr<scalar_t>(), static_cast<scalar_t>(min_gap), max_iterations,
               separated.data_ptr<bool>()});
  });
  return separated;
}

}  // namespace contactnet

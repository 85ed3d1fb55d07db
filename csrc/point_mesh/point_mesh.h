// Batched point–mesh queries over a packed BVH library (layout: common/bvh.h): Q queries, query q
// = point points[q], in the frame of mesh ids[q]. float32 or float64; one device.
//
// contactnet::point_mesh_distance(tris, tri_ids, nodes, dipoles, node_offsets, face_offsets,
//                                 Tensor ids, Tensor points, Tensor max_distance,
//                                 float winding_threshold, float beta)
//     the library's BVH tensors (common/bvh_checks.h), then
//     ids (Q,) int64 mesh ids in [0, M), or -1 for a padding query
//     points (Q, 3) T in the mesh's frame
//     max_distance (Q,) T, > 0 (+inf allowed): the search bound of a point outside
//  -> distance (Q,) T: unsigned distance to the closest triangle. A point outside (winding <
//                      winding_threshold) with no triangle closer than max_distance gets
//                      max_distance (tri -1); a point inside is always searched in full.
//                      Padding: +inf. A non-finite point: NaN.
//     tri (Q,) int64: the closest triangle's face id (mesh-local, as Mesh.faces), -1 as above;
//                     between triangles tied at the minimum (a shared vertex or edge), any one
//     winding (Q,) T: generalised winding number (fast: far-field dipoles beyond beta node
//                     radii, common/bvh.h winding_number); padding 0, non-finite point NaN
//     inside (Q,) bool: winding >= winding_threshold
#pragma once

#include <tuple>

#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include "common/bvh_checks.h"
#include "common/checks.h"
#include "point_mesh/point_mesh_kernels.h"

namespace contactnet {

using PointMeshOut = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor>;

#define CN_POINT_MESH_ARGS                                                                      \
  const at::Tensor &tris, const at::Tensor &tri_ids, const at::Tensor &nodes,                   \
      const at::Tensor &dipoles, const at::Tensor &node_offsets, const at::Tensor &face_offsets, \
      const at::Tensor &ids, const at::Tensor &points, const at::Tensor &max_distance,          \
      double winding_threshold, double beta
#define CN_POINT_MESH_PASS                                                                   \
  tris, tri_ids, nodes, dipoles, node_offsets, face_offsets, ids, points, max_distance,      \
      winding_threshold, beta

// Values (CPU only, common/checks.h policy): ids in [-1, M), max_distance > 0 (not NaN).
template <typename T>
void check_point_mesh_values(const at::Tensor& ids, const at::Tensor& max_distance,
                             int64_t num_meshes) {
  const int64_t* id = ids.data_ptr<int64_t>();
  const T* bound = max_distance.data_ptr<T>();
  for (int64_t q = 0, n = ids.size(0); q < n; ++q) {
    TORCH_CHECK_VALUE(id[q] >= -1 && id[q] < num_meshes, "ids: mesh ids must lie in [0, ",
                      num_meshes, ") (or be -1 padding), got ", id[q], " (query ", q, ")");
    TORCH_CHECK_VALUE(bound[q] > T(0), "max_distance: expected > 0 (+inf for no cut-off), got ",
                      bound[q], " (query ", q, ")");
  }
}

template <typename Launch>
PointMeshOut point_mesh_distance_impl(CN_POINT_MESH_ARGS, const Launch& launch) {
  const int64_t num_meshes =
      check_bvh_tensors(tris, tri_ids, nodes, dipoles, node_offsets, face_offsets);
  check_input(ids, "ids", {-1});
  const int64_t q = ids.size(0);
  check_float_input(points, "points", {q, 3});
  check_float_input(max_distance, "max_distance", {q});
  TORCH_CHECK(ids.scalar_type() == at::kLong, "ids: expected int64, got ", ids.scalar_type());
  check_same_device(ids, "ids", tris, "tris");
  check_same_device_dtype(points, "points", tris, "tris");
  check_same_device_dtype(max_distance, "max_distance", tris, "tris");
  const auto opt = tris.options();
  at::Tensor distance = at::empty({q}, opt), tri = at::empty({q}, opt.dtype(at::kLong)),
             winding = at::empty({q}, opt), inside = at::empty({q}, opt.dtype(at::kBool));
  AT_DISPATCH_FLOATING_TYPES(tris.scalar_type(), "point_mesh_distance", [&] {
    if (values_checked_in_cpp(ids))
      check_point_mesh_values<scalar_t>(ids, max_distance, num_meshes);
    launch(tris, q,
           PointMeshFunctor<scalar_t>{
               bvh_view<scalar_t>(tris, tri_ids, nodes, dipoles, node_offsets, face_offsets),
               ids.data_ptr<int64_t>(), points.data_ptr<scalar_t>(),
               max_distance.data_ptr<scalar_t>(), static_cast<scalar_t>(winding_threshold),
               static_cast<scalar_t>(beta), distance.data_ptr<scalar_t>(),
               tri.data_ptr<int64_t>(), winding.data_ptr<scalar_t>(), inside.data_ptr<bool>()});
  });
  return {distance, tri, winding, inside};
}

}  // namespace contactnet

// Entry checks (metadata only, common/checks.h policy) of a library's BVH tensors, and their view
// for the kernels (layout: common/bvh.h). Shared by every op that reads a MeshLibrary's BVH.
#pragma once

#include <ATen/core/Tensor.h>

#include "common/bvh.h"
#include "common/checks.h"

namespace contactnet {

// tris (F, 3, 3) float, tri_ids (F,) int32, nodes (N, 16) int32, dipoles (N, 7) tris' dtype,
// node_offsets (M + 1,) int64, face_offsets (M + 1,) int64, all contiguous on tris' device.
// Returns M, the number of meshes (>= 1).
inline int64_t check_bvh_tensors(const at::Tensor& tris, const at::Tensor& tri_ids,
                                 const at::Tensor& nodes, const at::Tensor& dipoles,
                                 const at::Tensor& node_offsets, const at::Tensor& face_offsets) {
  check_float_input(tris, "tris", {-1, 3, 3});
  check_input(tri_ids, "tri_ids", {tris.size(0)});
  check_input(nodes, "nodes", {-1, kNodeWords});
  check_input(dipoles, "dipoles", {nodes.size(0), 7});
  check_input(node_offsets, "node_offsets", {-1});
  check_input(face_offsets, "face_offsets", {node_offsets.size(0)});
  TORCH_CHECK(tri_ids.scalar_type() == at::kInt && nodes.scalar_type() == at::kInt,
              "tri_ids, nodes: expected int32");
  TORCH_CHECK(node_offsets.scalar_type() == at::kLong && face_offsets.scalar_type() == at::kLong,
              "node_offsets, face_offsets: expected int64");
  for (const at::Tensor* t : {&tri_ids, &nodes, &dipoles, &node_offsets, &face_offsets})
    TORCH_CHECK(t->device() == tris.device(), "mesh query inputs must share one device, got ",
                t->device(), " and ", tris.device());
  TORCH_CHECK(dipoles.scalar_type() == tris.scalar_type(),
              "mesh query float inputs must share one dtype");
  const int64_t num_meshes = node_offsets.size(0) - 1;
  TORCH_CHECK(num_meshes >= 1, "mesh query: the library has no meshes");
  return num_meshes;
}

template <typename T>
BvhView<T> bvh_view(const at::Tensor& tris, const at::Tensor& tri_ids, const at::Tensor& nodes,
                    const at::Tensor& dipoles, const at::Tensor& node_offsets,
                    const at::Tensor& face_offsets) {
  return {tris.data_ptr<T>(),
          tri_ids.data_ptr<int32_t>(),
          reinterpret_cast<const BvhNode*>(nodes.data_ptr<int32_t>()),
          dipoles.data_ptr<T>(),
          node_offsets.data_ptr<int64_t>(),
          face_offsets.data_ptr<int64_t>()};
}

}  // namespace contactnet

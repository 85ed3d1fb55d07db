// Builds the packed BVHs of a mesh library (layout in common/bvh.h). CPU only: the library builds
// once on the host and moves its tensors to the query device.
//
// contactnet::build_mesh_bvh(Tensor vertices, Tensor faces, Tensor vertex_offsets,
//                            Tensor face_offsets)
//     vertices       (V, 3) float32/float64, all meshes' vertices, each in its mesh frame
//     faces          (F, 3) int64, mesh-local vertex indices
//     vertex_offsets (M + 1,) int64, mesh m owns vertices [vertex_offsets[m], vertex_offsets[m+1])
//     face_offsets   (M + 1,) int64, mesh m owns faces [face_offsets[m], face_offsets[m+1]);
//                    every mesh must have at least one face
//  -> tris (F, 3, 3), tri_ids (F,) int32, nodes (N, 16) int32 (64-byte records: float32 box,
//     link), dipoles (N, 7), node_offsets (M + 1,) int64   (N = total node count)
//
// Every node gets an oriented box fitted to its triangles' vertex covariance (as RAPID and fcl
// fit theirs); the node is split at the median of its triangle centroids along the box's major
// axis, kBvhLeafSize triangles per leaf: the node count of an F-triangle mesh depends on F only,
// and the depth is logarithmic.
#pragma once

#include <tuple>

#include <ATen/core/Tensor.h>

namespace contactnet {

using BuildMeshBvhOut = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>;

BuildMeshBvhOut build_mesh_bvh_cpu(const at::Tensor& vertices, const at::Tensor& faces,
                                   const at::Tensor& vertex_offsets,
                                   const at::Tensor& face_offsets);

}  // namespace contactnet

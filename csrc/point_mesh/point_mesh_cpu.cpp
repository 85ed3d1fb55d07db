#include <torch/library.h>

#include "common/launch_cpu.h"
#include "point_mesh/point_mesh.h"

namespace contactnet {
namespace {

// One query is two single-tree traversals (about a microsecond on 1k-triangle meshes): tasks of
// 64 queries keep the scheduling cost small next to the work.
constexpr CpuLauncher kPointLaunch{64};

PointMeshOut point_mesh_distance_cpu(CN_POINT_MESH_ARGS) {
  return point_mesh_distance_impl(CN_POINT_MESH_PASS, kPointLaunch);
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(contactnet, m) {
  m.def("point_mesh_distance(Tensor tris, Tensor tri_ids, Tensor nodes, Tensor dipoles, "
        "Tensor node_offsets, Tensor face_offsets, Tensor ids, Tensor points, Tensor max_distance, "
        "float winding_threshold, float beta) -> (Tensor distance, Tensor tri, Tensor winding, "
        "Tensor inside)");
}

TORCH_LIBRARY_IMPL(contactnet, CPU, m) { m.impl("point_mesh_distance", &point_mesh_distance_cpu); }

}  // namespace contactnet

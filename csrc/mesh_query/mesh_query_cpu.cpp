#include <torch/library.h>

#include "common/launch_cpu.h"
#include "mesh_query/mesh_query.h"

namespace contactnet {
namespace {

// One query is a whole BVH traversal (microseconds to milliseconds): one query per task.
constexpr CpuLauncher kQueryLaunch{1};

MeshDistanceOut mesh_distance_cpu(CN_BVH_ARGS, double upper_bound) {
  return mesh_distance_impl(CN_BVH_PASS, upper_bound, kQueryLaunch);
}
at::Tensor mesh_collide_cpu(CN_BVH_ARGS, double winding_threshold, double beta) {
  return mesh_collide_impl(CN_BVH_PASS, winding_threshold, beta, kQueryLaunch);
}
BlemRawOut blem_contacts_raw_cpu(CN_BVH_ARGS, const at::Tensor& r_a, const at::Tensor& r_b) {
  return blem_contacts_raw_impl(CN_BVH_PASS, r_a, r_b, kQueryLaunch);
}

}  // namespace

#define CN_BVH_SCHEMA                                                                     \
  "Tensor tris, Tensor tri_ids, Tensor obbs, Tensor children, Tensor dipoles, "         \
  "Tensor node_offsets, Tensor face_offsets, Tensor ids_a, Tensor ids_b, Tensor poses_a, " \
  "Tensor poses_b"

TORCH_LIBRARY_FRAGMENT(contactnet, m) {
  m.def("mesh_distance(" CN_BVH_SCHEMA
        ", float upper_bound) -> (Tensor distance, Tensor point_a, Tensor point_b, "
        "Tensor tri_a, Tensor tri_b)");
  m.def("mesh_collide(" CN_BVH_SCHEMA ", float winding_threshold, float beta) -> Tensor");
  m.def("blem_contacts_raw(" CN_BVH_SCHEMA
        ", Tensor r_a, Tensor r_b) -> (Tensor points, Tensor normals, Tensor depths, "
        "Tensor distances, Tensor points_a, Tensor points_b, Tensor tri_a, Tensor tri_b, "
        "Tensor intersecting, Tensor offsets)");
}

TORCH_LIBRARY_IMPL(contactnet, CPU, m) {
  m.impl("mesh_distance", &mesh_distance_cpu);
  m.impl("mesh_collide", &mesh_collide_cpu);
  m.impl("blem_contacts_raw", &blem_contacts_raw_cpu);
}

}  // namespace contactnet

#include <torch/library.h>

#include "common/launch_cuda.cuh"
#include "mesh_query/mesh_query.h"

namespace contactnet {
namespace {

MeshDistanceOut mesh_distance_cuda(CN_BVH_ARGS, double upper_bound) {
  return mesh_distance_impl(CN_BVH_PASS, upper_bound, CudaLauncher{});
}
at::Tensor mesh_collide_cuda(CN_BVH_ARGS, double winding_threshold, double beta) {
  return mesh_collide_impl(CN_BVH_PASS, winding_threshold, beta, CudaLauncher{});
}
BlemRawOut blem_contacts_raw_cuda(CN_BVH_ARGS, const at::Tensor& r_a, const at::Tensor& r_b,
                                  bool compact) {
  return blem_contacts_raw_impl(CN_BVH_PASS, r_a, r_b, compact, CudaLauncher{});
}
BlemRowsOut blem_contact_rows_cuda(CN_BVH_ARGS, const at::Tensor& r_a, const at::Tensor& r_b,
                                   const at::Tensor& query, const at::Tensor& row_a,
                                   const at::Tensor& row_b) {
  return blem_contact_rows_impl(CN_BVH_PASS, r_a, r_b, query, row_a, row_b, CudaLauncher{});
}

}  // namespace

TORCH_LIBRARY_IMPL(contactnet, CUDA, m) {
  m.impl("mesh_distance", &mesh_distance_cuda);
  m.impl("mesh_collide", &mesh_collide_cuda);
  m.impl("blem_contacts_raw", &blem_contacts_raw_cuda);
  m.impl("blem_contact_rows", &blem_contact_rows_cuda);
}

}  // namespace contactnet

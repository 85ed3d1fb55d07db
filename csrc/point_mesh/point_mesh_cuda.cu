#include <torch/library.h>

#include "common/launch_cuda.cuh"
#include "point_mesh/point_mesh.h"

namespace contactnet {
namespace {

PointMeshOut point_mesh_distance_cuda(CN_POINT_MESH_ARGS) {
  return point_mesh_distance_impl(CN_POINT_MESH_PASS, CudaLauncher{});
}

}  // namespace

TORCH_LIBRARY_IMPL(contactnet, CUDA, m) {
  m.impl("point_mesh_distance", &point_mesh_distance_cuda);
}

}  // namespace contactnet

#include <torch/library.h>

#include "common/launch_cuda.cuh"
#include "ipc/ipc_padded.h"

namespace contactnet {
namespace {

using Tensor = at::Tensor;
using OptTensor = std::optional<at::Tensor>;

std::tuple<Tensor, Tensor, Tensor> candidates_padded_cuda(
    const Tensor& vertices, const Tensor& faces, const Tensor& edges, const OptTensor& vertex_body,
    double dhat, int64_t capacity, const OptTensor& vertex_active, const OptTensor& face_active,
    const OptTensor& edge_active) {
  return ipc_collision_candidates_padded_impl(vertices, faces, edges, vertex_body, dhat, capacity,
                                              vertex_active, face_active, edge_active,
                                              CudaLauncher{});
}

std::tuple<Tensor, Tensor, Tensor> swept_candidates_padded_cuda(
    const Tensor& v0, const Tensor& v1, const Tensor& faces, const Tensor& edges,
    const OptTensor& vertex_body, double min_distance, int64_t capacity,
    const OptTensor& vertex_active, const OptTensor& face_active, const OptTensor& edge_active) {
  return ipc_swept_candidates_padded_impl(v0, v1, faces, edges, vertex_body, min_distance,
                                          capacity, vertex_active, face_active, edge_active,
                                          CudaLauncher{});
}

}  // namespace

TORCH_LIBRARY_IMPL(contactnet, CUDA, m) {
  m.impl("ipc_collision_candidates_padded", &candidates_padded_cuda);
  m.impl("ipc_swept_candidates_padded", &swept_candidates_padded_cuda);
}

}  // namespace contactnet

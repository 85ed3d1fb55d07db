#include <torch/library.h>

#include "common/launch_cpu.h"
#include "ipc/ipc_padded.h"

namespace contactnet {
namespace {

using Tensor = at::Tensor;
using OptTensor = std::optional<at::Tensor>;

constexpr CpuLauncher kSweepLaunch{64};  // one sweep item scans many boxes

std::tuple<Tensor, Tensor, Tensor> candidates_padded_cpu(
    const Tensor& vertices, const Tensor& faces, const Tensor& edges, const OptTensor& vertex_body,
    double dhat, int64_t capacity, const OptTensor& vertex_active, const OptTensor& face_active,
    const OptTensor& edge_active) {
  return ipc_collision_candidates_padded_impl(vertices, faces, edges, vertex_body, dhat, capacity,
                                              vertex_active, face_active, edge_active,
                                              kSweepLaunch);
}

std::tuple<Tensor, Tensor, Tensor> swept_candidates_padded_cpu(
    const Tensor& v0, const Tensor& v1, const Tensor& faces, const Tensor& edges,
    const OptTensor& vertex_body, double min_distance, int64_t capacity,
    const OptTensor& vertex_active, const OptTensor& face_active, const OptTensor& edge_active) {
  return ipc_swept_candidates_padded_impl(v0, v1, faces, edges, vertex_body, min_distance,
                                          capacity, vertex_active, face_active, edge_active,
                                          kSweepLaunch);
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(contactnet, m) {
  m.def(
      "ipc_collision_candidates_padded(Tensor vertices, Tensor faces, Tensor edges, "
      "Tensor? vertex_body, float dhat, int capacity, Tensor? vertex_active=None, "
      "Tensor? face_active=None, Tensor? edge_active=None) -> (Tensor fv, Tensor ee, "
      "Tensor counts)");
  m.def(
      "ipc_swept_candidates_padded(Tensor vertices_t0, Tensor vertices_t1, Tensor faces, "
      "Tensor edges, Tensor? vertex_body, float min_distance, int capacity, "
      "Tensor? vertex_active=None, Tensor? face_active=None, Tensor? edge_active=None) "
      "-> (Tensor fv, Tensor ee, Tensor counts)");
}

TORCH_LIBRARY_IMPL(contactnet, CPU, m) {
  m.impl("ipc_collision_candidates_padded", &candidates_padded_cpu);
  m.impl("ipc_swept_candidates_padded", &swept_candidates_padded_cpu);
}

}  // namespace contactnet

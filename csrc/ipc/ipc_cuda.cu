#include <torch/library.h>

#include "common/launch_cuda.cuh"
#include "ipc/ipc.h"

namespace contactnet {
namespace {

using Tensor = at::Tensor;
using OptTensor = std::optional<at::Tensor>;

template <int Order>
Tensor pp_cuda(const Tensor& p, const Tensor& q) {
  return ipc_distance_impl(kIpcPointPoint, Order, {p, q}, nullptr, CudaLauncher{});
}
template <int Order>
Tensor pe_cuda(const Tensor& p, const Tensor& e0, const Tensor& e1) {
  return ipc_distance_impl(kIpcPointEdge, Order, {p, e0, e1}, nullptr, CudaLauncher{});
}
template <int Order>
Tensor pt_cuda(const Tensor& p, const Tensor& t0, const Tensor& t1, const Tensor& t2) {
  return ipc_distance_impl(kIpcPointTriangle, Order, {p, t0, t1, t2}, nullptr, CudaLauncher{});
}
template <int Order>
Tensor ee_cuda(const Tensor& a0, const Tensor& a1, const Tensor& b0, const Tensor& b1) {
  return ipc_distance_impl(kIpcEdgeEdge, Order, {a0, a1, b0, b1}, nullptr, CudaLauncher{});
}
template <int Order>
Tensor moll_cuda(const Tensor& a0, const Tensor& a1, const Tensor& b0, const Tensor& b1,
                 const Tensor& eps_x) {
  return ipc_distance_impl(kIpcMollifier, Order, {a0, a1, b0, b1}, &eps_x, CudaLauncher{});
}

std::tuple<Tensor, Tensor, Tensor> barrier_cuda(const Tensor& d2, double dhat) {
  return ipc_barrier_impl(d2, dhat, CudaLauncher{});
}

std::tuple<Tensor, Tensor> candidates_cuda(const Tensor& vertices, const Tensor& faces,
                                           const Tensor& edges, const OptTensor& vertex_body,
                                           double dhat) {
  return ipc_collision_candidates_impl(vertices, faces, edges, vertex_body, dhat, CudaLauncher{});
}

std::tuple<Tensor, Tensor> swept_candidates_cuda(const Tensor& v0, const Tensor& v1,
                                                 const Tensor& faces, const Tensor& edges,
                                                 const OptTensor& vertex_body,
                                                 double min_distance) {
  return ipc_swept_candidates_impl(v0, v1, faces, edges, vertex_body, min_distance,
                                   CudaLauncher{});
}

template <int Order>
Tensor potential_cuda(const Tensor& vertices, const Tensor& rest, const Tensor& faces,
                      const Tensor& edges, const Tensor& fv, const Tensor& ee, double dhat,
                      double kappa) {
  auto out = ipc_barrier_potential_impl(vertices, rest, faces, edges, fv, ee, dhat, kappa, Order,
                                        false, CudaLauncher{});
  return Order == 0 ? std::get<0>(out) : std::get<1>(out);
}
Tensor potential_hessian_cuda(const Tensor& vertices, const Tensor& rest, const Tensor& faces,
                              const Tensor& edges, const Tensor& fv, const Tensor& ee,
                              double dhat, double kappa, bool project_to_psd) {
  return std::get<2>(ipc_barrier_potential_impl(vertices, rest, faces, edges, fv, ee, dhat, kappa,
                                                2, project_to_psd, CudaLauncher{}));
}

template <int Order>
Tensor friction_cuda(const Tensor& velocities, const Tensor& lagged, const Tensor& rest,
                     const Tensor& faces, const Tensor& edges, const Tensor& fv, const Tensor& ee,
                     double dhat, double kappa, double mu, double eps_v) {
  return ipc_friction_impl(velocities, lagged, rest, faces, edges, fv, ee, dhat, kappa, mu, eps_v,
                           Order, CudaLauncher{});
}

Tensor ccd_cuda(const Tensor& v0, const Tensor& v1, const Tensor& faces, const Tensor& edges,
                const Tensor& fv, const Tensor& ee, double min_distance, double tmax,
                double conservative_rescaling, int64_t max_iterations) {
  return ipc_ccd_impl(v0, v1, faces, edges, fv, ee, min_distance, tmax, conservative_rescaling,
                      max_iterations, CudaLauncher{});
}

}  // namespace

TORCH_LIBRARY_IMPL(contactnet, CUDA, m) {
  m.impl("ipc_point_point_distance", &pp_cuda<0>);
  m.impl("ipc_point_point_distance_gradient", &pp_cuda<1>);
  m.impl("ipc_point_point_distance_hessian", &pp_cuda<2>);
  m.impl("ipc_point_edge_distance", &pe_cuda<0>);
  m.impl("ipc_point_edge_distance_gradient", &pe_cuda<1>);
  m.impl("ipc_point_edge_distance_hessian", &pe_cuda<2>);
  m.impl("ipc_point_triangle_distance", &pt_cuda<0>);
  m.impl("ipc_point_triangle_distance_gradient", &pt_cuda<1>);
  m.impl("ipc_point_triangle_distance_hessian", &pt_cuda<2>);
  m.impl("ipc_edge_edge_distance", &ee_cuda<0>);
  m.impl("ipc_edge_edge_distance_gradient", &ee_cuda<1>);
  m.impl("ipc_edge_edge_distance_hessian", &ee_cuda<2>);
  m.impl("ipc_edge_edge_mollifier", &moll_cuda<0>);
  m.impl("ipc_edge_edge_mollifier_gradient", &moll_cuda<1>);
  m.impl("ipc_edge_edge_mollifier_hessian", &moll_cuda<2>);
  m.impl("ipc_barrier", &barrier_cuda);
  m.impl("ipc_collision_candidates", &candidates_cuda);
  m.impl("ipc_swept_candidates", &swept_candidates_cuda);
  m.impl("ipc_barrier_potential", &potential_cuda<0>);
  m.impl("ipc_barrier_potential_gradient", &potential_cuda<1>);
  m.impl("ipc_barrier_potential_hessian", &potential_hessian_cuda);
  m.impl("ipc_friction_potential", &friction_cuda<0>);
  m.impl("ipc_friction_potential_gradient", &friction_cuda<1>);
  m.impl("ipc_friction_potential_hessian", &friction_cuda<2>);
  m.impl("ipc_ccd", &ccd_cuda);
}

}  // namespace contactnet
